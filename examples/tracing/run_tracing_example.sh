#!/usr/bin/env bash
# run_tracing_example.sh SERVER CLIENT URI: a trace across two services. Starts trace_server
# "backend" and trace_server "frontend" (which calls the backend) on URI's host (port 0), runs
# trace_client against the frontend, and checks: the reply went through both; the trace id the
# client started is the one both servers logged; the frontend's parent span is the client's and
# the backend's is a new one (the frontend's call); a call without the token is refused by the
# bearer check. 77 (CTest "skipped") for rdma:// without an RDMA device.
set -u
server=$1 client=$2 uri=$3
source "$(dirname "${BASH_SOURCE[0]}")/../start_server.sh"
skip_without_rdma_device "$uri"

logs=()
pids=()
trap 'kill -TERM "${pids[@]}" 2>/dev/null; rm -f "${logs[@]}"' EXIT
# start NAME [BACKEND]: sets `bound` to its URI.
start() {
  local log _
  log=$(mktemp)
  logs+=("$log")
  "$server" "$1" "$uri" ${2:+"$2"} >"$log" 2>&1 &
  pids+=($!)
  for _ in $(seq 300); do
    bound=$(sed -n 's/^trace_server listening on //p' "$log" | head -n 1)
    [[ -n $bound ]] && return 0
    sleep 0.1
  done
  echo "FAILED: trace_server $1 did not start"
  sed 's/^/  | /' "$log"
  exit 1
}
start backend
backend_uri=$bound
start frontend "$backend_uri"
out=$(timeout 60 "$client" "$bound")
rc=$?
echo "$out"
kill -TERM "${pids[@]}" 2>/dev/null
wait "${pids[@]}" 2>/dev/null
backend_log=$(cat "${logs[0]}")
frontend_log=$(cat "${logs[1]}")
echo "--- backend:";  echo "$backend_log"
echo "--- frontend:"; echo "$frontend_log"
fail() { echo "run_tracing_example: FAILED: $1"; exit 1; }
((rc == 0)) || fail "trace_client exit $rc"
grep -qxF 'SayHello: frontend -> backend: hello, ada' <<<"$out" || fail "the reply did not go through both servers"
grep -qxF 'without a token: UNAUTHENTICATED: no authorization metadata' <<<"$out" || fail "the token check"
# (No process substitution: the Soft-RoCE VM has no /dev/fd.)
ids=$(sed -n 's/^trace \([0-9a-f]\{32\}\) span \([0-9a-f]\{16\}\)$/\1 \2/p' <<<"$out" | head -n 1)
trace=${ids% *} span=${ids#* }
[[ -n ${trace:-} ]] || fail "the client printed no trace id"
front=$(grep -o "frontend: /greeter.v1.Greeter/SayHello from .*: OK in [0-9]* us, trace $trace parent [0-9a-f]*" <<<"$frontend_log")
back=$(grep -o "backend: /greeter.v1.Greeter/SayHello from .*: OK in [0-9]* us, trace $trace parent [0-9a-f]*" <<<"$backend_log")
[[ -n $front ]] || fail "the frontend did not log trace $trace"
[[ -n $back ]] || fail "the backend did not log trace $trace"
[[ ${front##* } == "$span" ]] || fail "the frontend's parent span is not the client's ($span)"
[[ ${back##* } != "$span" && ${back##* } =~ ^[0-9a-f]{16}$ ]] || fail "the backend's parent span is not a new one"
grep -q "frontend: /greeter.v1.Greeter/SayHello from .*: UNAUTHENTICATED" <<<"$frontend_log" ||
  fail "the refused call was not logged"
echo "run_tracing_example: ok (trace $trace: client span $span, frontend's call span ${back##* })"
