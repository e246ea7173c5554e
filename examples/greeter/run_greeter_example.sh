#!/usr/bin/env bash
# run_greeter_example.sh SERVER CLIENT URI: the README walkthrough end to end. Starts greeter_server
# on URI (port 0), waits (bounded) for the URI it listens on, runs greeter_client against it and
# checks both calls answered "hello, ada". 77 (CTest "skipped") for rdma:// without an RDMA device.
set -u
server=$1 client=$2 uri=$3

if [[ $uri == rdma://* ]] && ! compgen -G '/sys/class/infiniband/*' >/dev/null; then
  echo "SKIPPED: no RDMA device (/sys/class/infiniband is empty); run it in the Soft-RoCE VM"
  exit 77
fi

log=$(mktemp)
trap 'kill -TERM "$pid" 2>/dev/null; rm -f "$log"' EXIT
"$server" "$uri" >"$log" 2>&1 &
pid=$!
bound=""
for _ in $(seq 300); do  # up to ~30 s for the listener (rxe under TCG is slow)
  bound=$(sed -n 's/^greeter_server listening on //p' "$log" | head -n 1)
  [[ -n $bound ]] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [[ -z $bound ]]; then
  echo "run_greeter_example: FAILED: greeter_server did not start listening"
  sed 's/^/  server| /' "$log"
  exit 1
fi
out=$(timeout 60 "$client" "$bound")
rc=$?
echo "$out"
echo "run_greeter_example: greeter_client exit $rc"
((rc == 0)) || exit 1
[[ $(grep -c '^\(callback\|coroutine\): *hello, ada (from ' <<<"$out") == 2 ]] ||
  { echo "run_greeter_example: FAILED: expected two 'hello, ada' replies"; exit 1; }
