#!/usr/bin/env bash
# run_kv_example.sh SERVER CLIENT URI: the KV example end to end. Starts kv_server on URI (use port
# 0), waits (bounded) until it prints the URI it listens on, runs kv_client against that URI, then
# stops the server with SIGTERM and checks it shut down cleanly. Exit 0 only if both behaved;
# 77 (CTest "skipped") for an rdma:// URI on a machine without an RDMA device.
set -u
server=$1 client=$2 uri=$3
source "$(dirname "${BASH_SOURCE[0]}")/../start_server.sh"
skip_without_rdma_device "$uri"

echo "run_kv_example: starting $server $uri"
start_server kv_server "$server" "$uri" || exit 1
trap 'rm -f "$server_log"' EXIT
echo "run_kv_example: kv_server listens on $bound; running $client $bound"
timeout 120 "$client" "$bound"
client_rc=$?
kill -TERM "$server_pid"
server_rc=0
wait "$server_pid" || server_rc=$?
echo "run_kv_example: kv_server's log:"
sed 's/^/  server| /' "$server_log"
echo "run_kv_example: kv_client exit $client_rc, kv_server exit $server_rc"
((client_rc == 0 && server_rc == 0))
