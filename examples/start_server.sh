# start_server.sh: sourced by the examples' run_*_example.sh scripts (copied next to them in the
# build tree, which is all that travels into the Soft-RoCE VM).
#
# start_server NAME SERVER URI [FLAGS...]: starts `SERVER FLAGS... URI` in the background with its
# output in $server_log, and waits (bounded: ~30 s, rxe under TCG is slow) until it prints
# "NAME listening on <uri>". Sets server_pid and bound (the URI with the real port). On failure
# prints the server's log, stops it and returns 1.
start_server() {
  local name=$1 server=$2 uri=$3 _
  server_log=$(mktemp)
  "$server" "${@:4}" "$uri" >"$server_log" 2>&1 &
  server_pid=$!
  bound=""
  for _ in $(seq 300); do
    bound=$(sed -n "s/^$name listening on //p" "$server_log" | head -n 1)
    [[ -n $bound ]] && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "FAILED: $name did not start listening"
  sed 's/^/  server| /' "$server_log"
  kill -TERM "$server_pid" 2>/dev/null
  wait "$server_pid"
  return 1
}

# skip_without_rdma_device URI: exits 77 (CTest "skipped") for an rdma:// URI on a machine without
# an RDMA device, saying so loudly.
skip_without_rdma_device() {
  if [[ $1 == rdma://* ]] && ! compgen -G '/sys/class/infiniband/*' >/dev/null; then
    echo "SKIPPED: no RDMA device (/sys/class/infiniband is empty); run it in the Soft-RoCE VM"
    exit 77
  fi
}

# run_client NAME CLIENT: after start_server, runs `CLIENT $bound` (bounded: 60 s), prints its
# output and sets `out`; returns 1, saying so, when the client fails.
run_client() {
  local name=$1 client=$2 rc
  out=$(timeout 60 "$client" "$bound")
  rc=$?
  echo "$out"
  echo "$name exit $rc"
  ((rc == 0))
}
