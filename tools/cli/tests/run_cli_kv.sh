#!/usr/bin/env bash
# run_cli_kv.sh SERVER CLIENT CLI PROTO_DIR URI: issue 13's target "rdmarpc call against the kv
# example returns the same results the kv client shows". Starts kv_server on URI (port 0), runs
# kv_client's scripted session against it, then replays that session's every operation with
# `rdmarpc call` (--proto PROTO_DIR/kv.proto, same keys, so the same store state), writes each result
# the way kv_client prints it ("what -> STATUS  detail") and compares the two lists line by line.
# Also checks each failed call's exit status is 64 + its canonical code. 77 (skipped) for rdma://
# without an RDMA device.
set -u
server=$1 client=$2 cli=$3 proto_dir=$4 uri=$5
here=$(dirname "${BASH_SOURCE[0]}")
source "$here/start_server.sh"
skip_without_rdma_device "$uri"

work=$(mktemp -d)
watch_pid=""
cleanup() {
  [[ -n $watch_pid ]] && kill "$watch_pid" 2>/dev/null
  [[ -n ${server_pid:-} ]] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work" "${server_log:-}"
}
trap cleanup EXIT
proto=(--proto "$proto_dir/kv.proto" -I "$proto_dir")
declare -A code=([OK]=0 [CANCELLED]=1 [UNKNOWN]=2 [INVALID_ARGUMENT]=3 [DEADLINE_EXCEEDED]=4 [NOT_FOUND]=5
  [ALREADY_EXISTS]=6 [PERMISSION_DENIED]=7 [RESOURCE_EXHAUSTED]=8 [FAILED_PRECONDITION]=9 [ABORTED]=10
  [OUT_OF_RANGE]=11 [UNIMPLEMENTED]=12 [INTERNAL]=13 [UNAVAILABLE]=14 [DATA_LOSS]=15 [UNAUTHENTICATED]=16)
problems=0
problem() { echo "run_cli_kv: FAIL: $*"; problems=$((problems + 1)); }

# Heartbeats answered within 5 s, not the default 0.3: a process of this test stalled for longer
# (a loaded machine, sanitizers) would otherwise end its connection, which is not what it tests.
relaxed=(--heartbeat-timeout 5)
start_server kv_server "$server" "$uri" "${relaxed[@]}" || exit 1
echo "run_cli_kv: kv_server listens on $bound"
timeout 120 "$client" "$bound" >"$work/client.out"
client_rc=$?
sed 's/^/  kv_client| /' "$work/client.out"
((client_rc == 0)) || { echo "run_cli_kv: kv_client failed ($client_rc)"; exit 1; }
prefix=$(sed -n "s/.* (keys under '\(.*\)', shown as ~\/)$/\1/p" "$work/client.out")
[[ -n $prefix ]] || { echo "run_cli_kv: no key prefix in kv_client's output"; exit 1; }
# "  [ ok ] Get '~/apple'    -> OK    123 us  'red' (version 1)" -> "Get '~/apple' -> OK  'red' (version 1)"
sed -nE 's/^  \[( ok |FAIL)\] (.*[^ ]) +-> ([A-Z_]+) +[0-9]+ us  (.*)$/\2 -> \3  \4/p' "$work/client.out" >"$work/expected"

# ---- the same session through rdmarpc call
b64() { printf '%s' "$1" | base64 | tr -d '\n'; }
field() { sed -nE "s/.*\"$1\":\"?([^\",}]*)\"?.*/\1/p" <<<"$2" | head -n 1; }  # a scalar field's value
shown() {  # kv_client's shown(): without the session prefix, long ones shortened
  local t=$1 s=$1
  [[ -n $prefix && $t == "$prefix"* ]] && s="~/${t#"$prefix"}"
  ((${#s} > 24)) && s="${s:0:12}...(${#t} bytes)"
  printf "'%s'" "$s"
}
# rpc METHOD JSON|@FILE: sets out (the reply's JSON), st (status name) and msg (status message)
rpc() {
  local method=$1 request=$2 rc
  if [[ $request == @* ]]; then
    out=$("$cli" call "$bound" "kv.Store/$method" -d "$request" "${proto[@]}" --timeout 30 "${relaxed[@]}" 2>"$work/err")
  else
    out=$("$cli" call "$bound" "kv.Store/$method" "$request" "${proto[@]}" --timeout 30 "${relaxed[@]}" 2>"$work/err")
  fi
  rc=$?
  st=OK msg=""
  if ((rc != 0)); then
    st=$(sed -nE 's/^rdmarpc: .* failed: ([A-Z_]+): .*/\1/p' "$work/err")
    msg=$(sed -nE 's/^rdmarpc: .* failed: [A-Z_]+: (.*)$/\1/p' "$work/err")
    [[ -n $st ]] || { problem "kv.Store/$method $request: $(cat "$work/err")"; st="?"; return; }
    ((rc == 64 + ${code[$st]})) || problem "kv.Store/$method ended $st but exited $rc, not $((64 + ${code[$st]}))"
  fi
}
line() { printf '%s -> %s  %s\n' "$1" "$st" "$2"; }
put() {  # KEY VALUE [EXPECTED_VERSION] [LABEL]
  local json="{\"key\":\"$1\",\"value\":\"$(b64 "$2")\"" what="Put $(shown "$1") = $(shown "$2")"
  [[ -n ${3:-} ]] && json+=",\"expectedVersion\":\"$3\"" && what+=" if version $3"
  rpc Put "$json}"
  if [[ $st == OK ]]; then line "$what${4:-}" "version $(field version "$out")"; else line "$what${4:-}" "$msg"; fi
}
get() {
  rpc Get "{\"key\":\"$1\"}"
  if [[ $st == OK ]]; then
    line "Get $(shown "$1")" "$(shown "$(field value "$out" | base64 -d)") (version $(field version "$out"))"
  else
    line "Get $(shown "$1")" "$msg"
  fi
}
del() {
  rpc Delete "{\"key\":\"$1\"}"
  if [[ $st == OK ]]; then line "Delete $(shown "$1")" "was version $(field version "$out")"; else line "Delete $(shown "$1")" "$msg"; fi
}
scan() {  # FROM TO LIMIT; sets next
  rpc Scan "{\"startKey\":\"$1\",\"endKey\":\"$2\",\"limit\":$3}"
  local what="Scan [$(shown "$1"), $(shown "$2")) limit $3"
  next=""
  if [[ $st != OK ]]; then line "$what" "$msg"; return; fi
  local keys=() k found
  # No process substitution here or below: the VM's initramfs has no /dev/fd.
  found=$(grep -o '"key":"[^"]*"' <<<"$out" | sed 's/"key":"\(.*\)"/\1/')
  while read -r k; do [[ -n $k ]] && keys+=("${k#"$prefix"}"); done <<<"$found"
  next=$(sed -nE 's/.*"nextKey":"([^"]*)".*/\1/p' <<<"$out")
  local list
  list=$(IFS=,; echo "${keys[*]}" | sed 's/,/, /g')
  line "$what" "${#keys[@]} entries [$list]$([[ -n $next ]] && echo " more from $(shown "$next")")"
}

a=${prefix}apple b=${prefix}banana c=${prefix}cherry d=${prefix}date end="${prefix}~"
{
  put "$a" red; get "$a"; put "$a" green 1; get "$a"
  put "$a" yellow 1; put "$a" yellow 0; get "${prefix}missing"; put "" x
  # 100 KiB of 'z': given with -d @FILE (too long for one argument)
  printf '{"key":"%s","value":"%s"}' "${prefix}huge" "$(printf 'enp6%.0s' $(seq 34133))eg==" >"$work/huge.json"
  rpc Put "@$work/huge.json"
  line "Put $(shown "${prefix}huge") = $(shown "$(printf 'z%.0s' $(seq 102400))")" "$msg"
  put "$b" yellow 0; put "$c" "dark red" "" " (callback)"; put "$d" brown
  scan "$prefix" "$end" 3; scan "$next" "$end" 3
  scan "$prefix" "$end" 0; scan "$prefix" "$end" 5000; scan "$end" "$prefix" 10
  del "$a"; get "$a"; del "$a"; del "$b"; del "$c"; del "$d"; scan "$prefix" "$end" 10

  # Watch (server streaming, a line per event) while PutMany (client streaming, -d @- with three
  # objects on stdin) writes three keys; Ctrl-C (SIGINT) cancels the watch.
  "$cli" call "$bound" kv.Store/Watch "{\"prefix\":\"${prefix}bulk/\"}" "${proto[@]}" "${relaxed[@]}" >"$work/watch" 2>"$work/watch.err" &
  watch_pid=$!
  for _ in $(seq 300); do [[ -s $work/watch ]] && break; sleep 0.1; done
  st=OK
  line "Watch $(shown "${prefix}bulk/") (stream)" "$([[ $(head -n 1 "$work/watch") == '{"kind":"WATCHING"}' ]] && echo watching)"
  for k in one two three; do printf '{"key":"%sbulk/%s","value":"%s"}\n' "$prefix" $k "$(b64 "value of bulk/$k")"; done \
    >"$work/bulk.json"
  rpc PutMany @- <"$work/bulk.json"  # stdin
  line "PutMany 3 keys under $(shown "${prefix}bulk/") (stream)" "$(field count "$out") puts"
  for _ in $(seq 300); do (($(wc -l <"$work/watch") >= 4)) && break; sleep 0.1; done
  tail -n +2 "$work/watch" >"$work/events"
  while read -r event; do
    st=OK
    [[ $event == *'"kind"'* ]] && st="unexpected kind"  # PUT is the default value: not printed
    line "  watch event" "put $(shown "$(field key "$event")") = $(shown "$(field value "$event" | base64 -d)") (version $(field version "$event"))"
  done <"$work/events"
  kill -INT "$watch_pid"
  wait "$watch_pid"
  rc=$? watch_pid=""
  st=$(sed -nE 's/^rdmarpc: .*: ([A-Z_]+) .*/\1/p' "$work/watch.err")
  ((rc == 65)) || problem "the cancelled watch exited $rc, not 65 (CANCELLED): $(cat "$work/watch.err")"
  line "Watch cancelled by the client" "finished CANCELLED, as asked"
  for k in one two three; do del "${prefix}bulk/$k"; done
} >"$work/got"

echo "run_cli_kv: rdmarpc call's results, as kv_client prints them:"
sed 's/^/  rdmarpc| /' "$work/got"
if ! diff -u "$work/expected" "$work/got"; then
  problem "rdmarpc call's results differ from kv_client's (diff above: - kv_client, + rdmarpc)"
fi
echo "run_cli_kv: $(wc -l <"$work/expected") kv_client results, $(wc -l <"$work/got") rdmarpc results, $problems problems"
((problems == 0 && $(wc -l <"$work/expected") > 30))
