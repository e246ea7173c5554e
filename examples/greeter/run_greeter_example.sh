#!/usr/bin/env bash
# run_greeter_example.sh SERVER CLIENT URI: the README walkthrough end to end. Starts greeter_server
# on URI (port 0), waits (bounded) for the URI it listens on, runs greeter_client against it and
# checks both calls answered "hello, ada" and the stream brought three greetings. 77 (CTest "skipped") for rdma:// without an RDMA device.
set -u
server=$1 client=$2 uri=$3
source "$(dirname "${BASH_SOURCE[0]}")/../start_server.sh"
skip_without_rdma_device "$uri"

start_server greeter_server "$server" "$uri" || exit 1
trap 'kill -TERM "$server_pid" 2>/dev/null; rm -f "$server_log"' EXIT
run_client greeter_client "$client" || exit 1
[[ $(grep -c '^\(callback\|coroutine\): *hello, ada (from ' <<<"$out") == 2 ]] ||
  { echo "run_greeter_example: FAILED: expected two 'hello, ada' replies"; exit 1; }
[[ $(grep -c '^stream: *\(hello\|bonjour\|hallo\), ada$' <<<"$out") == 3 ]] ||
  { echo "run_greeter_example: FAILED: expected three streamed greetings"; exit 1; }
