#!/bin/bash
# bench/vm/guest_bench.sh: runs INSIDE the Soft-RoCE VM (started by bench/compare through
# tools/rxe-vm/run-in-vm.sh). Runs the raw-verbs baselines (perftest over rdma_cm), rdmarpc over
# rdma:// and tcp://, the gRPC baseline over TCP, and the idle-cost probes, all on one rxe0 in one
# VM boot, and leaves raw results in /out for bench/make_report.py:
#   /out/perftest/<test>-<size>.txt   perftest client output (ib_send_lat[_e], ib_send_bw)
#   /out/echo.jsonl                   one JSON object per rdmarpc / gRPC point and idle probe
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
PERFTEST_DELAY=${BENCH_PERFTEST_DELAY:-2}
PARTS=" ${BENCH_PARTS:-perftest rdma busy adaptive tcp grpc idle} "  # a subset, for debugging one part
part() { [[ $PARTS == *" $1 "* ]]; }
OUT=/out
mkdir -p $OUT/perftest $OUT/log
payloads=$(echo $SIZES | tr ' ' ',')
T0=$(date +%s)
step() { echo "[bench +$(( $(date +%s) - T0 ))s] $*"; }

# perftest iterations per message size: enough samples, bounded time under TCG (~60 MB/s).
lat_iters() { case $1 in 64) echo 2000;; 4096) echo 1000;; 65536) echo 200;; *) echo 30;; esac; }
bw_iters() { case $1 in 64) echo 10000;; 4096) echo 5000;; 65536) echo 500;; *) echo 50;; esac; }

# perftest_pair NAME TOOL ARGS...: server on vCPU 0, client on vCPU 1 after PERFTEST_DELAY s.
# perftest calibrates the CPU clock at start; under TCG that sometimes fails ("inf", r^2 < 0.9):
# such a run is retried, up to 3 attempts.
perftest_pair() {
  local name=$1 tool=$2; shift 2
  local attempt out=$OUT/perftest/$name.txt
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
part perftest && for s in $SIZES; do
  perftest_pair "ib_send_lat-$s" ib_send_lat -R -d rxe0 -s $s -n $(lat_iters $s)
  perftest_pair "ib_send_lat_e-$s" ib_send_lat -R -e -d rxe0 -s $s -n $(lat_iters $s)
  perftest_pair "ib_send_bw-$s" ib_send_bw -R -d rxe0 -s $s -n $(bw_iters $s)
done

common=(--payload "$payloads" --concurrency "$CONC" --duration "$DURATION" --warmup "$WARMUP" --json $OUT/echo.jsonl)
part rdma && echo_pair rdmarpc-rdma "$BIN/rdmarpc_echo_bench" server --listen rdma://$IP:7471 -- \
  "$BIN/rdmarpc_echo_bench" client --target rdma://$IP:7471 "${common[@]}"
part busy && CLIENT_TIMEOUT=60 echo_pair rdmarpc-rdma-busy "$BIN/rdmarpc_echo_bench" server --busy-poll --listen rdma://$IP:7473 -- \
  "$BIN/rdmarpc_echo_bench" client --busy-poll --target rdma://$IP:7473 --payload 64 --concurrency 1,64 \
  --duration "$DURATION" --warmup "$WARMUP" --json $OUT/echo.jsonl
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

part idle || { step "done"; exit 0; }
step "idle cost: a connected client+server doing nothing for ${IDLE_SECONDS}s"
timeout 60 "$BIN/rdmarpc_echo_bench" idle --listen rdma://$IP:0 --seconds $IDLE_SECONDS --json $OUT/echo.jsonl 2>&1 | cat
timeout 60 "$BIN/rdmarpc_echo_bench" idle --adaptive --listen rdma://$IP:0 --seconds $IDLE_SECONDS --json $OUT/echo.jsonl 2>&1 | cat
timeout 60 "$BIN/rdmarpc_echo_bench" idle --listen tcp://$IP:0 --seconds $IDLE_SECONDS --json $OUT/echo.jsonl 2>&1 | cat
if [ -x "$BIN/grpc_echo_bench" ]; then
  timeout 60 "$BIN/grpc_echo_bench" idle --seconds $IDLE_SECONDS --json $OUT/echo.jsonl 2>&1 | cat
fi
step "done"
exit 0
