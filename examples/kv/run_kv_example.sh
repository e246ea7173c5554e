#!/usr/bin/env bash
# run_kv_example.sh SERVER CLIENT URI: the KV example end to end. Starts kv_server on URI (use port
# 0), waits (bounded) until it prints the URI it listens on, runs kv_client against that URI, then
# stops the server with SIGTERM and checks it shut down cleanly. Exit 0 only if both behaved;
# 77 (CTest "skipped") for an rdma:// URI on a machine without an RDMA device.
set -u
server=$1 client=$2 uri=$3

if [[ $uri == rdma://* ]] && ! compgen -G '/sys/class/infiniband/*' >/dev/null; then
  echo "SKIPPED: no RDMA device (/sys/class/infiniband is empty); run it in the Soft-RoCE VM"
  exit 77
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "run_kv_example: starting $server $uri"
"$server" "$uri" >"$log" 2>&1 &
pid=$!
bound=""
for _ in $(seq 300); do  # up to ~30 s for the listener (rxe under TCG is slow)
  bound=$(sed -n 's/^kv_server listening on //p' "$log" | head -n 1)
  [[ -n $bound ]] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [[ -z $bound ]]; then
  echo "run_kv_example: FAILED: kv_server did not start listening"
  sed 's/^/  server| /' "$log"
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
  exit 1
fi
echo "run_kv_example: kv_server listens on $bound; running $client $bound"
timeout 120 "$client" "$bound"
client_rc=$?
kill -TERM "$pid"
server_rc=0
wait "$pid" || server_rc=$?
echo "run_kv_example: kv_server's log:"
sed 's/^/  server| /' "$log"
echo "run_kv_example: kv_client exit $client_rc, kv_server exit $server_rc"
((client_rc == 0 && server_rc == 0))
