#!/bin/bash
# bench/vm/guest_bench.sh: runs INSIDE the Soft-RoCE VM (started by bench/compare through
# tools/rxe-vm/run-in-vm.sh). Runs the raw-verbs baselines (perftest over rdma_cm), rdmarpc over
# rdma:// and tcp://, the gRPC baseline over TCP, server streaming (rdmarpc over rdma:// and
# tcp://, gRPC over TCP), the idle-cost probes and liveness (dead-peer detection, failover and
# heartbeat CPU over rdma:// and tcp://), more rounds of the rxe targets' 64 B points, and
# callgrind of rdmarpc over rdma://, all on one rxe0 in one VM boot, and leaves raw results in
# /out for bench/make_report.py:
#   /out/perftest/<test>-<size>.txt   perftest client output (ib_send_lat[_e], ib_send_bw); the
#                                     latency tests also at the 64 B echo's wire size
#   /out/frame_bytes                  that size (rdmarpc_echo_bench frame-size)
#   /out/echo.jsonl                   one JSON object per rdmarpc / gRPC point and idle probe
#   /out/liveness.jsonl               one JSON object per detection / failover run and heartbeat probe
#   /out/callgrind/rdmarpc.rdma.callback.<calls>.out
#                                     callgrind profiles of rdmarpc over rdma:// (event polling), two
#                                     call counts (BENCH_CG_CALLS), when bench/compare brought valgrind
#   /out/callgrind/transport_floor.rdma.<calls>.out
#                                     the same of rdmarpc's transport alone (bench/transport_floor)
#   /out/rounds/<r>/perftest/*.txt, /out/rounds/<r>/echo.jsonl, echo-coroutine.jsonl
#                                     the 64 B points the rxe targets compare, measured again in
#                                     ROUNDS more rounds (each baseline next to its rdmarpc point)
#   /out/rounds/<r>/transport_floor.jsonl
#                                     rdmarpc's transport alone (no rpc), busy-poll, the wire size
#   /out/log/*.log                    server logs, for post-mortems
# Servers run on vCPU 0, clients on vCPU 1: rxe peers sharing a vCPU wait for a timer tick.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BIN=${BENCH_BIN:-$here/bin}
IP=${BENCH_IP:-10.0.0.1}
SIZES=${BENCH_SIZES:-64 4096 65536 1048576}
CONC=${BENCH_CONCURRENCY:-1,8,64}
DURATION=${BENCH_DURATION:-1.5}
WARMUP=${BENCH_WARMUP:-0.3}
IDLE_SECONDS=${BENCH_IDLE_SECONDS:-5}
IDLE_RUNS=${BENCH_IDLE_RUNS:-3}  # runs of each targeted idle probe (the report takes the median)
PERFTEST_DELAY=${BENCH_PERFTEST_DELAY:-2}
STREAM_CONC=${BENCH_STREAM_CONCURRENCY:-1,8}
LIVENESS_RUNS=${BENCH_LIVENESS_RUNS:-3}
HEARTBEAT_SECONDS=${BENCH_HEARTBEAT_SECONDS:-3}
ROUNDS=${BENCH_ROUNDS:-4}
# Seconds a baseline waits after an rdmarpc point in the rounds (see there).
SETTLE=${BENCH_SETTLE:-10}
CG_CALLS=${BENCH_CG_CALLS:-200 1200}
PARTS=" ${BENCH_PARTS:-perftest ucx rdma busy adaptive tcp grpc capnp stream idle liveness rounds callgrind} "  # a subset, for debugging one part
part() { [[ $PARTS == *" $1 "* ]]; }
OUT=/out
mkdir -p $OUT/perftest $OUT/ucx $OUT/log
payloads=$(echo $SIZES | tr ' ' ',')
T0=$(date +%s)
step() { echo "[bench +$(( $(date +%s) - T0 ))s] $*"; }

# The bytes a 64 B echo puts on the wire per message (frame header + protobuf): perftest runs at
# that size too, next to 64 B, so the report can tell the header's cost on rxe from rdmarpc's own.
WIRE=$("$BIN/rdmarpc_echo_bench" frame-size --payload 64 2>/dev/null | awk '{print ($2 > $3 ? $2 : $3)}')
[[ $WIRE =~ ^[0-9]+$ && $WIRE != 64 ]] || WIRE=""
[[ -n $WIRE ]] && echo "$WIRE" > $OUT/frame_bytes
# perftest iterations per message size: enough samples, bounded time under TCG (~60 MB/s).
# lat_iters SIZE [busy|event]: at the targets' sizes (64 B and the wire size) perftest samples
# about as long as rdmarpc's points (DURATION): ~25-50 us a polling round trip, ~250-400 us with
# -e. (A/B in one boot showed no bias from the length itself: 2,000 and 30,000 read alike when run
# in the same place; the longer run only leaves a slow spell less chance to decide it.)
LAT_ITERS_BUSY=${BENCH_LAT_ITERS_BUSY:-30000}
LAT_ITERS_EVENT=${BENCH_LAT_ITERS_EVENT:-5000}
lat_iters() {
  case $1 in
    64|"$WIRE") if [ "${2:-event}" = busy ]; then echo "$LAT_ITERS_BUSY"; else echo "$LAT_ITERS_EVENT"; fi;;
    4096) echo 1000;; 65536) echo 200;; *) echo 30;;
  esac
}
bw_iters() { case $1 in 64) echo 10000;; 4096) echo 5000;; 65536) echo 500;; *) echo 50;; esac; }

# perftest_pair NAME TOOL ARGS...: server on vCPU 0, client on vCPU 1 after PERFTEST_DELAY s; the
# client's output goes to PERFTEST_OUT (default /out/perftest)/NAME.txt.
# perftest calibrates the CPU clock at start; under TCG that sometimes fails ("inf", r^2 < 0.9):
# such a run is retried, up to 3 attempts.
perftest_pair() {
  local name=$1 tool=$2; shift 2
  local attempt out=${PERFTEST_OUT:-$OUT/perftest}/$name.txt
  for attempt in 1 2 3; do
    timeout 60 taskset -c 0 "$tool" "$@" >$OUT/log/$name.server.log 2>&1 &
    local spid=$!
    sleep "$PERFTEST_DELAY"
    timeout 60 taskset -c 1 "$tool" "$@" "$IP" >"$out" 2>&1
    local rc=$?
    # A client that gave up early leaves its server waiting on perftest's fixed port, where it
    # would refuse every later run: never leave one behind.
    kill $spid 2>/dev/null
    wait $spid 2>/dev/null
    if [ $rc = 0 ] && ! grep -qE '(^|[[:space:]])(-?inf|nan)([[:space:]]|$)|r\^2' "$out"; then
      step "perftest $name ok$( [ $attempt -gt 1 ] && echo " (attempt $attempt)")"
      return 0
    fi
    step "perftest $name attempt $attempt failed (rc=$rc); retrying"
    sleep 1
  done
  step "perftest $name FAILED after 3 attempts"
  return 1
}

# ucx_pair NAME LAYER TLS -- ARGS...: UCX's ucx_perftest, server on vCPU 0 and client on vCPU 1
# like perftest_pair (the server takes the test from the client). LAYER "uct" runs a transport
# layer test on rc_verbs (-x/-d in ARGS); "ucp" a protocol layer one with UCX_TLS=TLS. One status
# line per run goes to /out/ucx/status.jsonl; the client output to /out/ucx/NAME.txt.
UCX_PORT=13337
ucx_pair() {
  local name=$1 layer=$2 tls=$3; shift 4
  local out=$OUT/ucx/$name.txt slog=$OUT/ucx/$name.server.txt attempt rc=1 tries=2
  [ "$layer" = ucp ] && tries=1  # a protocol-layer failure is a configuration answer, not noise
  for attempt in $(seq $tries); do
    UCX_PORT=$((UCX_PORT + 1))
    UCX_TLS=$tls UCX_NET_DEVICES=rxe0:1 timeout 60 taskset -c 0 ucx_perftest -p $UCX_PORT >"$slog" 2>&1 &
    local spid=$!
    sleep "$PERFTEST_DELAY"
    UCX_TLS=$tls UCX_NET_DEVICES=rxe0:1 timeout 45 taskset -c 1 ucx_perftest "$IP" -p $UCX_PORT "$@" >"$out" 2>&1
    rc=$?
    kill $spid 2>/dev/null
    wait $spid 2>/dev/null
    grep -q '^Final:' "$out" && [ $rc = 0 ] && break
    step "ucx $name attempt $attempt failed (rc=$rc)"
  done
  echo "{\"test\":\"${name%-*}\",\"size\":${name##*-},\"layer\":\"$layer\",\"tls\":\"$tls\",\"devices\":\"rxe0:1\",\"args\":\"$*\",\"rc\":$rc,\"file\":\"$name.txt\",\"server_log\":\"$name.server.txt\"}" >>$OUT/ucx/status.jsonl
  [ $rc = 0 ] && step "ucx $name ok ($layer, UCX_TLS=$tls)"
  return 0
}

# echo_pair NAME SERVER_CMD... -- CLIENT_CMD...: starts the server on vCPU 0, waits until it says
# it is listening, runs the client on vCPU 1 (at most CLIENT_TIMEOUT s, default 240), then stops
# the server.
echo_pair() {
  local name=$1; shift
  local srv=() cli=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
  shift
  cli=("$@")
  local log=$OUT/log/$name.server.log
  timeout 300 taskset -c 0 "${srv[@]}" >"$log" 2>&1 &
  local spid=$! i
  for i in $(seq 100); do grep -q 'listening' "$log" && break; kill -0 $spid 2>/dev/null || break; sleep 0.1; done
  if ! grep -q 'listening' "$log"; then
    step "$name: server did not start:"; sed 's/^/  | /' "$log"; kill $spid 2>/dev/null; wait $spid 2>/dev/null
    return 1
  fi
  step "$name"
  # Through a pipe, so the client prints one progress line per point instead of redrawing
  # a status line on the serial console.
  timeout "${CLIENT_TIMEOUT:-240}" taskset -c 1 "${cli[@]}" 2>&1 | cat
  local rc=${PIPESTATUS[0]}
  kill -TERM $spid 2>/dev/null; wait $spid 2>/dev/null
  [ $rc = 0 ] || step "$name: client exited $rc"
  return $rc
}

# Every latency here comes from the guest's clock. Under TCG on a loaded host the kernel may give
# up on the TSC and fall back to a 4 ms jiffies clock: latencies then come in 4 ms steps and
# perftest's calibration fails. Prefer the TSC when it is offered, and record what was used.
cs=/sys/devices/system/clocksource/clocksource0
if [ -r $cs/current_clocksource ]; then
  if [ "$(cat $cs/current_clocksource)" != tsc ] && grep -qw tsc $cs/available_clocksource; then
    echo tsc > $cs/current_clocksource 2>/dev/null
  fi
  echo "{\"kind\":\"clock\",\"clocksource\":\"$(cat $cs/current_clocksource)\",\"available\":\"$(cat $cs/available_clocksource | xargs)\"}" >>$OUT/echo.jsonl
  step "guest clocksource: $(cat $cs/current_clocksource) (available: $(cat $cs/available_clocksource | xargs))"
  # Without the TSC (its calibration fails when the host is overloaded) every latency would be
  # a multiple of 4 ms and perftest cannot calibrate: give up at once, bench/compare reboots.
  if [ "$(cat $cs/current_clocksource)" != tsc ] && [ -z "${BENCH_ANY_CLOCK:-}" ]; then
    step "no TSC clocksource in this boot: measuring would be meaningless; exiting 3"
    exit 3
  fi
fi

part perftest && step "perftest baselines on rxe0 (sizes: $SIZES)"
# latency_pair SIZE: ib_send_lat, polling and with -e, at SIZE bytes (into PERFTEST_OUT).
latency_pair() {
  perftest_pair "ib_send_lat-$1" ib_send_lat -R -d rxe0 -s $1 -n $(lat_iters $1 busy)
  perftest_pair "ib_send_lat_e-$1" ib_send_lat -R -e -d rxe0 -s $1 -n $(lat_iters $1 event)
}
# wire_latency: latency_pair at the 64 B echo's wire size (WIRE), if known.
wire_latency() { [[ -z $WIRE ]] || latency_pair $WIRE; }
part perftest && for s in $SIZES; do
  latency_pair $s
  perftest_pair "ib_send_bw-$s" ib_send_bw -R -d rxe0 -s $s -n $(bw_iters $s)
  # Right after 64 B, so the VM's drift does not skew their ratio.
  [[ $s == 64 ]] && wire_latency
done

# UCX on the same rxe0: active messages over rc_verbs at the transport layer (uct am_lat, am_bw:
# UCX's own busy-polling ping-pong and streaming), then the tag-matching protocol layer restricted
# to rc_verbs as well (ucp tag_lat, tag_bw), whose result or error message the report quotes.
if part ucx && command -v ucx_perftest >/dev/null; then
  step "UCX ucx_perftest on rxe0 (rc_verbs)"
  ucx_pair am_lat-64 uct rc_verbs -- -t am_lat -d rxe0:1 -x rc_verbs -s 64 -n 2000 -w 200
  ucx_pair am_bw-64 uct rc_verbs -- -t am_bw -d rxe0:1 -x rc_verbs -s 64 -n 20000 -w 1000
  ucx_pair tag_lat-64 ucp rc_verbs -- -t tag_lat -s 64 -n 2000 -w 200
  ucx_pair tag_bw-64 ucp rc_verbs -- -t tag_bw -s 64 -n 20000 -w 1000
  # rc_verbs alone gives UCP no transport to carry its wire-up messages: allow UD for those only.
  ucx_pair tag_lat_udaux-64 ucp rc_verbs,ud_verbs:aux -- -t tag_lat -s 64 -n 2000 -w 200
elif part ucx; then
  step "ucx_perftest not in the VM: no UCX peer"
fi

common=(--payload "$payloads" --concurrency "$CONC" --duration "$DURATION" --warmup "$WARMUP" --json $OUT/echo.jsonl)
part rdma && echo_pair rdmarpc-rdma "$BIN/rdmarpc_echo_bench" server --listen rdma://$IP:7471 -- \
  "$BIN/rdmarpc_echo_bench" client --target rdma://$IP:7471 "${common[@]}"
# The busy-poll and adaptive 64 B points are round 1 of targets against perftest, whose main
# points ran first on a quiet VM: like the rounds' baselines, each waits SETTLE seconds after the
# heavy run before it (the 64 KiB x 64 points; in 2026-12-06-1513 the busy point read 48.8 us
# there, 30-37 in the rounds). The event point follows UCX unpaused, which can only cost it.
part busy && sleep "$SETTLE"
part busy && CLIENT_TIMEOUT=60 echo_pair rdmarpc-rdma-busy "$BIN/rdmarpc_echo_bench" server --busy-poll --listen rdma://$IP:7473 -- \
  "$BIN/rdmarpc_echo_bench" client --busy-poll --target rdma://$IP:7473 --payload 64 --concurrency 1,64 \
  --duration "$DURATION" --warmup "$WARMUP" --json $OUT/echo.jsonl
part adaptive && sleep "$SETTLE"
part adaptive && CLIENT_TIMEOUT=60 echo_pair rdmarpc-rdma-adaptive "$BIN/rdmarpc_echo_bench" server --adaptive --listen rdma://$IP:7475 -- \
  "$BIN/rdmarpc_echo_bench" client --adaptive --target rdma://$IP:7475 --payload 64 --concurrency 1,64 \
  --duration "$DURATION" --warmup "$WARMUP" --json $OUT/echo.jsonl
part tcp && echo_pair rdmarpc-tcp "$BIN/rdmarpc_echo_bench" server --listen tcp://$IP:7472 -- \
  "$BIN/rdmarpc_echo_bench" client --target tcp://$IP:7472 "${common[@]}"
if ! part grpc; then
  :
elif [ -x "$BIN/grpc_echo_bench" ]; then
  echo_pair grpc-tcp "$BIN/grpc_echo_bench" server --listen $IP:7474 -- \
    "$BIN/grpc_echo_bench" client --target $IP:7474 "${common[@]}"
else
  step "grpc_echo_bench not built: no gRPC baseline"
fi

if ! part capnp; then
  :
elif [ -x "$BIN/capnp_echo_bench" ]; then
  echo_pair capnp-tcp "$BIN/capnp_echo_bench" server --listen $IP:7476 -- \
    "$BIN/capnp_echo_bench" client --target $IP:7476 "${common[@]}"
else
  step "capnp_echo_bench not built: no Cap'n Proto baseline"
fi

# Server streaming, 64 B: STREAM_CONC streams, each one write outstanding on the server and one
# read on the client; every message counts as a call. Over rxe in adaptive mode (the library
# default, as the 64-in-flight rate row) next to ib_send_bw's messages/s; over tcp next to gRPC's
# streaming.
stream_common=(--stream --payload 64 --concurrency "$STREAM_CONC" --duration "$DURATION" --warmup "$WARMUP"
               --json $OUT/echo.jsonl)
part stream && CLIENT_TIMEOUT=60 echo_pair rdmarpc-rdma-stream "$BIN/rdmarpc_echo_bench" server --adaptive \
  --listen rdma://$IP:7477 -- "$BIN/rdmarpc_echo_bench" client --adaptive --target rdma://$IP:7477 "${stream_common[@]}"
part stream && CLIENT_TIMEOUT=60 echo_pair rdmarpc-tcp-stream "$BIN/rdmarpc_echo_bench" server --listen tcp://$IP:7478 -- \
  "$BIN/rdmarpc_echo_bench" client --target tcp://$IP:7478 "${stream_common[@]}"
# The same with the server writing every message by co_await async_write (no try_write).
part stream && CLIENT_TIMEOUT=60 echo_pair rdmarpc-rdma-stream-async "$BIN/rdmarpc_echo_bench" server --adaptive \
  --listen rdma://$IP:7480 -- "$BIN/rdmarpc_echo_bench" client --adaptive --async-writes --target rdma://$IP:7480 \
  "${stream_common[@]}"
part stream && CLIENT_TIMEOUT=60 echo_pair rdmarpc-tcp-stream-async "$BIN/rdmarpc_echo_bench" server \
  --listen tcp://$IP:7481 -- "$BIN/rdmarpc_echo_bench" client --async-writes --target tcp://$IP:7481 "${stream_common[@]}"
if part stream && [ -x "$BIN/grpc_echo_bench" ]; then
  CLIENT_TIMEOUT=60 echo_pair grpc-tcp-stream "$BIN/grpc_echo_bench" server --listen $IP:7479 -- \
    "$BIN/grpc_echo_bench" client --target $IP:7479 "${stream_common[@]}"
fi

if part idle; then
  step "idle cost: a connected client+server doing nothing for ${IDLE_SECONDS}s"
  # The targeted pair, $IDLE_RUNS times each, interleaved so both modes see the same VM; the report
  # takes the median. One probe moves by 2x between runs.
  # Right after the parts before (streams), the first pairs read up to twice what they read later
  # or with the idle part alone (0.5 %): the VM's after-effects of a heavy run, as the rounds'
  # perftest shows them. So it waits SETTLE seconds first, as the rounds' baselines do. (Streams then
  # idle, adaptive's three runs: 0.85, 0.99, 0.91 % without the pause; 0.32, 0.46, 0.55 % with it.)
  sleep "$SETTLE"
  for ((run = 1; run <= IDLE_RUNS; ++run)); do
    timeout 60 "$BIN/rdmarpc_echo_bench" idle --listen rdma://$IP:0 --seconds $IDLE_SECONDS --json $OUT/echo.jsonl 2>&1 | cat
    timeout 60 "$BIN/rdmarpc_echo_bench" idle --adaptive --listen rdma://$IP:0 --seconds $IDLE_SECONDS --json $OUT/echo.jsonl 2>&1 | cat
  done
  # The same without heartbeats: what the polling modes themselves cost at rest (information; the
  # difference is the default heartbeats' one ping/pong per ~600 ms, each a few ms of CPU under TCG).
  timeout 60 "$BIN/rdmarpc_echo_bench" idle --no-heartbeats --listen rdma://$IP:0 --seconds $IDLE_SECONDS --json $OUT/echo.jsonl 2>&1 | cat
  timeout 60 "$BIN/rdmarpc_echo_bench" idle --no-heartbeats --adaptive --listen rdma://$IP:0 --seconds $IDLE_SECONDS --json $OUT/echo.jsonl 2>&1 | cat
  timeout 60 "$BIN/rdmarpc_echo_bench" idle --listen tcp://$IP:0 --seconds $IDLE_SECONDS --json $OUT/echo.jsonl 2>&1 | cat
  if [ -x "$BIN/grpc_echo_bench" ]; then
    timeout 60 "$BIN/grpc_echo_bench" idle --seconds $IDLE_SECONDS --json $OUT/echo.jsonl 2>&1 | cat
  fi
  if [ -x "$BIN/capnp_echo_bench" ]; then
    timeout 60 "$BIN/capnp_echo_bench" idle --seconds $IDLE_SECONDS --json $OUT/echo.jsonl 2>&1 | cat
  fi
fi

# heartbeat_probe TRANSPORT POLLING on|off: rdmarpc_echo_bench heartbeats, 100 idle connections
# (client and server in one process, each side on its own thread) for HEARTBEAT_SECONDS s, with
# the library's default heartbeats or without any (the baseline). Its JSON line goes to
# /out/liveness.jsonl as kind "heartbeats", with the polling mode and the counts the bench prints
# on stderr added (pings both ways as the channels count them, heartbeat timeouts, connects).
heartbeat_probe() {
  local transport=$1 polling=$2 hb=$3
  local name=heartbeats-$transport-$polling-$hb flags=()
  [ "$polling" = adaptive ] && flags+=(--adaptive)
  [ "$hb" = off ] && flags+=(--no-heartbeats)
  rm -f $OUT/log/$name.json
  timeout 120 "$BIN/rdmarpc_echo_bench" heartbeats --listen $transport://$IP:0 --connections 100 \
    --seconds $HEARTBEAT_SECONDS "${flags[@]}" --json $OUT/log/$name.json >/dev/null 2>$OUT/log/$name.log
  local rc=$? counts extra
  counts=$(sed -n 's/.* \([0-9]*\) pings, \([0-9]*\) heartbeat timeouts, \([0-9]*\) connects.*/"pings":\1,"heartbeat_timeouts":\2,"connects":\3/p' \
    $OUT/log/$name.log | tail -n1)
  extra="\"polling\":\"$polling\",\"heartbeats\":$([ $hb = on ] && echo true || echo false),\"connections\":100,\"rc\":$rc${counts:+,$counts}"
  if [ -s $OUT/log/$name.json ]; then
    sed -n '1{s/"kind":"idle"/"kind":"heartbeats"/;s/}[[:space:]]*$/,'"$extra"'}/;p}' $OUT/log/$name.json >>$OUT/liveness.jsonl
    step "  $transport ($polling), heartbeats $hb: $(sed -n 's/^rdmarpc_echo_bench: //p' $OUT/log/$name.log | tail -n1)"
  else
    echo "{\"kind\":\"heartbeats\",\"system\":\"rdmarpc\",\"transport\":\"$transport\",$extra}" >>$OUT/liveness.jsonl
    step "  $transport ($polling), heartbeats $hb: FAILED (rc=$rc)"
    tail -n 5 $OUT/log/$name.log | sed 's/^/  | /'
  fi
}

# Liveness (issue 11), with the library's default settings: how fast a hung server is noticed
# (idle, and with 8 calls in flight), how fast wait_for_ready calls move from a hung server to a
# healthy one (both load-balancing policies), over rdma:// (adaptive polling, the default) and
# tcp://; then what heartbeats cost on 100 idle connections, next to the same connections without
# heartbeats (rdma in adaptive and in event mode, tcp): information only, since TCG inflates every
# CPU share; bench/compare judges the heartbeat target on its own tcp probe on the host.
if part liveness; then
  if [ -x "$BIN/rdmarpc_failover_bench" ]; then
    for t in rdma tcp; do
      step "liveness: detecting a hung server over $t ($LIVENESS_RUNS runs idle, $LIVENESS_RUNS with 8 calls in flight)"
      timeout 120 "$BIN/rdmarpc_failover_bench" detect --listen $t://$IP:0 --runs $LIVENESS_RUNS \
        --json $OUT/liveness.jsonl 2>&1 | grep -v '^{"kind"'
      for policy in round_robin pick_first; do
        step "liveness: failover over $t, $policy ($LIVENESS_RUNS runs, 16 wait_for_ready calls in flight)"
        timeout 120 "$BIN/rdmarpc_failover_bench" failover --listen $t://$IP:0 --runs $LIVENESS_RUNS \
          --policy $policy --json $OUT/liveness.jsonl 2>&1 | grep -v '^{"kind"'
      done
    done
  else
    step "rdmarpc_failover_bench not built: no detection or failover figures"
  fi
  step "liveness: heartbeat CPU, 100 idle connections for ${HEARTBEAT_SECONDS}s, with and without heartbeats"
  heartbeat_probe rdma adaptive on
  heartbeat_probe rdma adaptive off
  heartbeat_probe rdma event on
  heartbeat_probe rdma event off
  heartbeat_probe tcp event on
  heartbeat_probe tcp event off
fi
# The rxe targets are ratios of two figures measured seconds apart in a VM whose speed drifts by
# tens of percent within one boot. So the 64 B points behind them are measured ROUNDS more times,
# each baseline right next to its rdmarpc point (in alternating order), and bench/make_report.py
# judges the median of the per-round ratios (the first round being the points above).
if part rounds; then
  busy_callback() {
    CLIENT_TIMEOUT=60 echo_pair round$r-rdma-busy "$BIN/rdmarpc_echo_bench" server --busy-poll --listen rdma://$IP:7483 -- \
      "$BIN/rdmarpc_echo_bench" client --busy-poll --target rdma://$IP:7483 --concurrency 1 "${round_common[@]}"
  }
  # The same point with the server's coroutine handler (more instructions per call, counted by
  # callgrind on the host): what an instruction on the round trip costs here (make_report.py).
  busy_coroutine() {
    CLIENT_TIMEOUT=60 echo_pair round$r-rdma-busy-coroutine "$BIN/rdmarpc_echo_bench" server --busy-poll \
      --handler coroutine --listen rdma://$IP:7485 -- "$BIN/rdmarpc_echo_bench" client --busy-poll \
      --target rdma://$IP:7485 --concurrency 1 --payload 64 --duration "$DURATION" --warmup "$WARMUP" \
      --json "$d/echo-coroutine.jsonl"
  }
  # rdmarpc's transport alone (bench/transport_floor.cpp: no rpc layer) carrying the echo's frame
  # size both ways: which share of the busy-poll point's distance from perftest is the transport's
  # and which the rpc layer's (make_report.py). As many round trips as perftest's polling runs.
  busy_transport() {
    [ -x "$BIN/transport_floor" ] && [ -n "$WIRE" ] || return 0  # (the report compares it at the wire size)
    CLIENT_TIMEOUT=60 echo_pair round$r-transport-busy "$BIN/transport_floor" server --busy-poll \
      --listen rdma://$IP:7486 -- "$BIN/transport_floor" client --busy-poll --target rdma://$IP:7486 \
      --payload "$WIRE" --calls $(lat_iters 64 busy) \
      --warmup-calls 3000 --json "$d/transport_floor.jsonl"
  }
  for r in $(seq "$ROUNDS"); do
    d=$OUT/rounds/$r
    mkdir -p "$d/perftest"
    step "round $r of $ROUNDS: the 64 B points of the rxe targets again"
    round_common=(--payload 64 --duration "$DURATION" --warmup "$WARMUP" --json "$d/echo.jsonl")
    event_pt() { PERFTEST_OUT=$d/perftest perftest_pair ib_send_lat_e-64 ib_send_lat -R -e -d rxe0 -s 64 -n $(lat_iters 64 event); }
    event_rdmarpc() {
      CLIENT_TIMEOUT=60 echo_pair round$r-rdma "$BIN/rdmarpc_echo_bench" server --listen rdma://$IP:7482 -- \
        "$BIN/rdmarpc_echo_bench" client --target rdma://$IP:7482 --concurrency 1 "${round_common[@]}"
    }
    busy_pt() { PERFTEST_OUT=$d/perftest perftest_pair ib_send_lat-64 ib_send_lat -R -d rxe0 -s 64 -n $(lat_iters 64 busy); }
    # Each target's baseline right next to its rdmarpc point, the order alternating by round: the
    # VM's drift (tens of percent within a minute) then neither sits between them nor biases
    # their ratio one way. The coroutine point (the per-instruction estimate) alternates with the
    # callback one the same way (the two stay next to each other: their difference is the finest
    # figure here); the transport alone goes on the far side of the pair, first or last; the
    # frame-size latency (76 B) goes right after the 64 B one.
    # A perftest run that starts within seconds of an rdmarpc run's end reads slower (in A/B runs
    # 2 s after it: 30-45 us where perftest after perftest read 24-25; 10 s after it: 25). So
    # every baseline that follows an rdmarpc point waits SETTLE seconds first; rdmarpc after
    # perftest showed no such effect.
    if [ $((r % 2)) -eq 1 ]; then
      sleep "$SETTLE"; event_pt; event_rdmarpc
      sleep "$SETTLE"; PERFTEST_OUT=$d/perftest wire_latency; busy_pt; busy_callback; busy_coroutine; busy_transport
      sleep "$SETTLE"
    else
      event_rdmarpc; sleep "$SETTLE"; event_pt
      busy_transport; busy_coroutine; busy_callback; sleep "$SETTLE"; busy_pt; PERFTEST_OUT=$d/perftest wire_latency
    fi
    PERFTEST_OUT=$d/perftest perftest_pair ib_send_bw-64 ib_send_bw -R -d rxe0 -s 64 -n $(bw_iters 64)
    CLIENT_TIMEOUT=60 echo_pair round$r-rdma-adaptive "$BIN/rdmarpc_echo_bench" server --adaptive --listen rdma://$IP:7484 -- \
      "$BIN/rdmarpc_echo_bench" client --adaptive --target rdma://$IP:7484 --concurrency 1,64 "${round_common[@]}"
  done
fi
# User-space instructions per call over rdma://, the figure that carries over to real NICs:
# client and server in one process on rxe0, event polling (the spinning modes would count their
# empty polls), runs of each CG_CALLS count for bench/compare to difference. Last, so the slow
# emulation under valgrind disturbs no timing.
if part callgrind && command -v valgrind >/dev/null; then
  mkdir -p $OUT/callgrind
  step "callgrind: rdmarpc over rdma:// (event polling), 64 B echo, $CG_CALLS calls"
  for n in $CG_CALLS; do
    # 150 s each (a run takes ~30 s): a hang must not push the guest past bench/compare's VM limit,
    # which would lose every result above.
    timeout 150 valgrind --tool=callgrind --separate-callers8='operator new*' --separate-callers8=malloc \
      --separate-callers8=calloc --separate-callers8=realloc --separate-callers8=posix_memalign \
      --separate-callers8=aligned_alloc --callgrind-out-file=$OUT/callgrind/rdmarpc.rdma.callback.$n.out \
      "$BIN/rdmarpc_echo_bench" inproc --listen rdma://$IP:0 --handler callback --payload 64 --concurrency 1 \
      --calls $n --warmup 0 --warmup-calls 200 --quiet >$OUT/log/callgrind-$n.log 2>&1 ||
      step "callgrind of $n calls failed (rc=$?): $(tail -n 2 $OUT/log/callgrind-$n.log | tr '\n' ' ')"
    # rdmarpc's transport alone, the same round trips: the rpc layer's share of the instructions.
    [ -x "$BIN/transport_floor" ] || continue
    timeout 150 valgrind --tool=callgrind --callgrind-out-file=$OUT/callgrind/transport_floor.rdma.$n.out \
      "$BIN/transport_floor" inproc --listen rdma://$IP:0 --payload 64 --concurrency 1 --calls $n \
      --warmup-calls 200 --quiet >$OUT/log/callgrind-transport-$n.log 2>&1 ||
      step "callgrind of the transport alone, $n round trips, failed (rc=$?): $(tail -n 2 $OUT/log/callgrind-transport-$n.log | tr '\n' ' ')"
  done
elif part callgrind; then
  step "valgrind not in the VM: no instructions per call over rdma://"
fi
step "done"
exit 0
