#!/usr/bin/env bash
# run_cli_tool.sh SERVER CLI PROTO_DIR URI: the rdmarpc tool as a person uses it, against kv_server
# (which serves kv.Store, grpc.health.v1 and grpc.reflection.v1): list and describe through
# reflection and through --proto, the errors a person makes (unknown method, a JSON field that does
# not exist, a bad URI, a server that is not there) with their messages and exit statuses, -d @FILE
# with several requests, a server-streaming call printing a line per message, health, and bench
# writing a JSON file with sane fields (never timing). 77 (skipped) for rdma:// without a device.
set -u
server=$1 cli=$2 proto_dir=$3 uri=$4
source "$(dirname "${BASH_SOURCE[0]}")/start_server.sh"
skip_without_rdma_device "$uri"
work=$(mktemp -d)
cleanup() {
  [[ -n ${server_pid:-} ]] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work" "${server_log:-}"
}
trap cleanup EXIT
# Heartbeats answered within 5 s, not the default 0.3: a process of this test stalled for longer
# (a loaded machine, sanitizers) would otherwise end its connection, which is not what it tests
# (the heartbeat tests do, with their own settings).
relaxed=(--heartbeat-timeout 5)
start_server kv_server "$server" "$uri" "${relaxed[@]}" || exit 1
proto=(--proto "$proto_dir/kv.proto" -I "$proto_dir")
checks=0 failures=0

# expect NAME STATUS STDOUT_PATTERN STDERR_PATTERN -- ARGS...: runs rdmarpc ARGS (and the relaxed
# heartbeat timeout); the exit status must be STATUS and stdout / stderr must match the (grep -E)
# patterns ("" = anything).
expect() {
  local name=$1 want=$2 out_re=$3 err_re=$4 rc ok=1
  shift 5
  "$cli" "$@" "${relaxed[@]}" >"$work/out" 2>"$work/err"
  rc=$?
  ((rc == want)) || ok=0
  [[ -z $out_re ]] || grep -Eq -- "$out_re" "$work/out" || ok=0
  [[ -z $err_re ]] || grep -Eq -- "$err_re" "$work/err" || ok=0
  checks=$((checks + 1))
  if ((ok)); then
    echo "ok    $name"
  else
    failures=$((failures + 1))
    echo "FAIL  $name: exit $rc (wanted $want); rdmarpc $*"
    sed 's/^/        stdout| /' "$work/out"
    sed 's/^/        stderr| /' "$work/err"
  fi
}

u=$bound
echo "run_cli_tool: kv_server on $u"
# Reflection (no .proto given)
expect "list via reflection" 0 '^kv\.Store$' '' -- list "$u"
expect "list lists health and reflection" 0 '^grpc\.reflection\.v1\.ServerReflection$' '' -- list "$u"
expect "list a service's methods" 0 '^kv\.Store/PutMany$' '' -- list "$u" kv.Store
expect "describe a service" 0 'rpc Watch\(\.kv\.WatchRequest\) returns \(stream \.kv\.WatchEvent\);' '' -- describe "$u" kv.Store
expect "describe a message" 0 'optional uint64 expected_version = 3;' '' -- describe "$u" kv.PutRequest
expect "describe a method" 0 'rpc Get\(\.kv\.GetRequest\) returns \(\.kv\.GetReply\);' '' -- describe "$u" kv.Store/Get
expect "describe a misspelt symbol" 4 '' "no service, method, message or enum named 'kv.GetRequst'; did you mean kv.GetRequest" -- describe "$u" kv.GetRequst
# --proto
expect "list via --proto" 0 '^kv\.Store$' '' -- list "$u" "${proto[@]}"
expect "describe via --proto" 0 'message ScanReply' '' -- describe "$u" kv.ScanReply "${proto[@]}"
expect "a --proto that is not there" 3 '' 'cannot use --proto nope.proto' -- list "$u" --proto nope.proto -I "$proto_dir"
# Calls and the errors a person makes
expect "put" 0 '^\{"version":"1"\}$' '' -- call "$u" kv.Store/Put '{"key":"cli/a","value":"cmVk"}'
expect "get" 0 '^\{"value":"cmVk","version":"1"\}$' '' -- call "$u" kv.Store/Get '{"key":"cli/a"}'
expect "get with --emit-defaults" 0 '"value":"cmVk"' '' -- call "$u" kv.Store/Scan '{"startKey":"cli/","limit":1}' --emit-defaults
expect "NOT_FOUND exits 69" 69 '' "kv.Store/Get failed: NOT_FOUND: no key 'cli/none'" -- call "$u" kv.Store/Get '{"key":"cli/none"}'
expect "an unknown method" 4 '' "service kv.Store has no method 'Gett'; did you mean Get\?" -- call "$u" kv.Store/Gett '{}'
expect "an unknown service" 4 '' "no service 'kv.Stor' on this server; did you mean kv.Store\?" -- call "$u" kv.Stor/Get '{}'
expect "a JSON field that does not exist" 3 '' "kv.GetRequest has no field 'ky' \(its fields: key\)" -- call "$u" kv.Store/Get '{"ky":"x"}'
expect "a nested field that does not exist" 3 '' "kv.ScanRequest has no field 'entries'" -- call "$u" kv.Store/Scan '{"entries":[{"kee":"x"}]}'
expect "a value of the wrong type" 3 '' 'the request does not fit kv.GetRequest' -- call "$u" kv.Store/Get '{"key":5}'
expect "JSON that is not closed" 3 '' 'never closed' -- call "$u" kv.Store/Get '{"key":"x"'
expect "a bad URI" 2 '' "'tcp:/127.0.0.1:1' is not a server URI" -- call tcp:/127.0.0.1:1 kv.Store/Get '{}' "${proto[@]}"
expect "an unknown scheme" 2 '' "'http://127.0.0.1:1' is not a server URI" -- list http://127.0.0.1:1
expect "a server that is not there" 78 '' 'cannot reach tcp://127.0.0.1:1 ' -- call tcp://127.0.0.1:1 kv.Store/Get '{}' "${proto[@]}"
expect "usage: no command" 2 '' 'no command given' --
expect "usage: unknown option" 2 '' 'unknown option --frobnicate' -- list "$u" --frobnicate
expect "a heartbeat timeout that is not a number" 2 '' '--heartbeat-timeout wants a number of seconds' -- list "$u" --heartbeat-timeout soon
expect "--help" 0 'rdmarpc bench URI SERVICE/METHOD' '' -- --help
# -d @FILE with several requests (one per line and concatenated)
printf '{"key":"cli/b","value":"Yg=="}\n{"key":"cli/c","value":"Yw=="}{"key":"cli/d","value":"ZA=="}\n' >"$work/puts.json"
expect "-d @FILE: three puts" 0 '' '' -- call "$u" kv.Store/Put -d "@$work/puts.json"
[[ $(wc -l <"$work/out") == 3 ]] || { failures=$((failures + 1)); echo "FAIL  -d @FILE printed $(wc -l <"$work/out") lines, not 3"; }
printf '{"key":"cli/b"}\n{"key":"cli/d"}\n' | expect "-d @-: two gets from stdin" 0 '^\{"value":"ZA==","version":"1"\}$' '' -- call "$u" kv.Store/Get -d @-
printf '{"key":"cli/b"}\n{"kee":"cli/d"}\n' >"$work/bad.json"
expect "-d @FILE: the bad request is named" 3 '' "request 2: kv.GetRequest has no field 'kee'" -- call "$u" kv.Store/Get -d "@$work/bad.json"
# Server streaming: a line per message, as they arrive; the deadline ends the watch
(sleep 1; "$cli" call "$u" kv.Store/Put '{"key":"cli/w/1","value":"MQ=="}' "${relaxed[@]}" >/dev/null) &
putter=$!
expect "a watch streams lines until --timeout" 68 '"key":"cli/w/1"' 'DEADLINE_EXCEEDED' -- call "$u" kv.Store/Watch '{"prefix":"cli/w/"}' --timeout 3
[[ $(head -n 1 "$work/out") == '{"kind":"WATCHING"}' && $(wc -l <"$work/out") == 2 ]] ||
  { failures=$((failures + 1)); echo "FAIL  the watch printed:"; cat "$work/out"; }
wait "$putter"
# Health
expect "health of the server" 0 '^server: SERVING$' '' -- health "$u"
expect "health of kv.Store" 0 '^kv\.Store: SERVING$' '' -- health "$u" kv.Store
expect "health of an unknown service" 69 '' 'kv.Nope: SERVICE_UNKNOWN' -- health "$u" kv.Nope
# Stats: the admin service's figures of the calls made above (kv_server runs with metrics on)
expect "stats lists kv.Store/Get with its calls" 0 '^/kv\.Store/Get +[1-9][0-9]* ' '' -- stats "$u" --output-json "$work/stats.json"
expect "stats shows the connection table" 0 '^tcp://127\.0\.0\.1:[0-9]+ +tcp ' '' -- stats "$u"
expect "stats shows the server line" 0 '^server: [1-9][0-9]* connections' '' -- stats "$u"
grep -q '"method": *"/kv.Store/Put"' "$work/stats.json" && grep -q '"rnrErrors": *"0"' "$work/stats.json" ||
  { failures=$((failures + 1)); echo "FAIL  stats --output-json:"; cat "$work/stats.json"; }
checks=$((checks + 1))
# Bench: a JSON file with sane fields (values are never asserted on timing)
expect "bench" 0 'p99\.9 us' '' -- bench "$u" kv.Store/Get --json '{"key":"cli/a"}' --concurrency 2 --duration 1 \
  --output-json "$work/bench.json"
grep -q 'calls/s' "$work/err" || { failures=$((failures + 1)); echo "FAIL  bench printed no progress line"; }
j=$(cat "$work/bench.json" 2>/dev/null)
num() { sed -nE "s/.*\"$1\":([0-9.e+-]+).*/\1/p" <<<"$j"; }
sane=1
[[ $j == *'"method":"kv.Store/Get"'* && $j == *'"concurrency":2'* && $j == *'"errors":0'* ]] || sane=0
calls=$(num calls)
[[ -n $calls ]] && ((calls > 0)) || sane=0
awk -v a="$(num min_us)" -v b="$(num p50_us)" -v c="$(num p99_us)" -v d="$(num max_us)" -v r="$(num calls_per_s)" \
  'BEGIN { exit !(a > 0 && a <= b && b <= c && c <= d && r > 0) }' || sane=0
checks=$((checks + 1))
if ((sane)); then echo "ok    bench --output-json has sane fields"; else failures=$((failures + 1)); echo "FAIL  bench JSON: $j"; fi
expect "bench of a streaming method" 2 '' 'is a streaming method' -- bench "$u" kv.Store/Watch --json '{}' --duration 1
expect "bench of a failing request stops before measuring" 69 '' 'the first call of kv.Store/Get \(before measuring\) failed: NOT_FOUND' -- \
  bench "$u" kv.Store/Get --json '{"key":"cli/none"}' --duration 1

echo "run_cli_tool: $checks checks, $failures failed"
((failures == 0))
