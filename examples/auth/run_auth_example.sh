#!/usr/bin/env bash
# run_auth_example.sh SERVER CLIENT URI: starts auth_server on URI (port 0), runs auth_client
# against it and checks each call's outcome: no token and an unknown one UNAUTHENTICATED, the
# hello-only token OK for SayHello and PERMISSION_DENIED for the stream, the demo token OK for both.
# 77 (CTest "skipped") for rdma:// without an RDMA device.
set -u
server=$1 client=$2 uri=$3
source "$(dirname "${BASH_SOURCE[0]}")/../start_server.sh"
skip_without_rdma_device "$uri"

start_server auth_server "$server" "$uri" || exit 1
trap 'kill -TERM "$server_pid" 2>/dev/null; rm -f "$server_log"' EXIT
run_client auth_client "$client" || exit 1
expect() {
  grep -qxF "$1" <<<"$out" || { echo "run_auth_example: FAILED: expected the line '$1'"; exit 1; }
}
expect '(no token) SayHello: UNAUTHENTICATED: no "authorization: Bearer <token>" metadata'
expect '(no token) SayHellos: UNAUTHENTICATED: no "authorization: Bearer <token>" metadata'
expect 'wrong-token SayHello: UNAUTHENTICATED: unknown token'
expect 'hello-only-token SayHello: OK, hello, ada'
expect 'hello-only-token SayHellos: PERMISSION_DENIED: hello-only may not call /greeter.v1.Greeter/SayHellos'
expect 'demo-token SayHello: OK, hello, ada'
expect 'demo-token SayHellos: OK'
