#!/usr/bin/env bash
# rdma_suite.sh: what scripts/test.sh runs inside the Soft-RoCE VM, from the build tree (configured
# there as run_rdma_suite.sh, since only the build tree travels into the VM). Runs the `rdma`-labelled
# CTest suite (junit to /out/rdma.xml), then, for information only, the transport's 64 B ping-pong
# RTT next to perftest's ib_send_lat on the same rxe0 in the same boot (lines "RTT-COMPARE: ...";
# never asserted: TCG timings are noise-prone). Exits with ctest's status.
# Environment: RDMA_SUITE_JUNIT (default /out/rdma.xml); RDMA_SUITE_RTT=0 skips the RTT report
# (the sanitizer runs: their timings would mean nothing); RDMA_SUITE_JOBS (default: the guest's
# vCPUs) tests at a time. No test asserts a time, and the ones that count the device's QPs and MRs
# are RUN_SERIAL (rdmarpc_add_test's SERIAL).
set -u
cd "$(dirname "$0")"
ctest -L rdma -j "${RDMA_SUITE_JOBS:-$(nproc)}" --output-on-failure --output-junit "${RDMA_SUITE_JUNIT:-/out/rdma.xml}"
rc=$?
[[ ${RDMA_SUITE_RTT:-1} == 1 ]] || exit $rc

ip=${RDMA_SUITE_IP:-10.0.0.1}
compare() { echo "RTT-COMPARE: $*"; }
# Under TCG on a loaded host the guest kernel may fall back from the TSC to a 4 ms jiffies clock:
# every latency would then read 0 or 4000 us. Prefer the TSC when offered; otherwise say so.
cs=/sys/devices/system/clocksource/clocksource0
if [[ -r $cs/current_clocksource ]]; then
  if [[ $(cat $cs/current_clocksource) != tsc ]] && grep -qw tsc $cs/available_clocksource; then
    echo tsc >$cs/current_clocksource 2>/dev/null
  fi
  if [[ $(cat $cs/current_clocksource) != tsc ]]; then
    compare "no RTT figures in this boot: the guest clock is $(cat $cs/current_clocksource) (4 ms ticks), not the TSC"
    exit $rc
  fi
fi
# ib_send_lat prints one-way latency (half a round trip); report the round trip: 2 x "t_typical".
ib_rtt() {  # ARGS... -> round trip in us, or n/a
  timeout 60 taskset -c 0 ib_send_lat -R -d rxe0 -s 64 -n 2000 -p 18515 "$@" >/tmp/ibl-server.log 2>&1 &
  local spid=$! out
  sleep 1
  out=$(timeout 60 taskset -c 1 ib_send_lat -R -d rxe0 -s 64 -n 2000 -p 18515 "$@" "$ip" 2>&1)
  kill $spid 2>/dev/null; wait $spid 2>/dev/null
  awk '$1 == 64 && NF >= 5 { printf "%.1f", 2 * $5; found = 1 } END { if (!found) printf "n/a" }' <<<"$out"
}
if command -v ib_send_lat >/dev/null; then
  compare "ib_send_lat -R -e (event), 64 B round trip: $(ib_rtt -e) us (2 x typical one-way)"
  compare "ib_send_lat -R (polling), 64 B round trip: $(ib_rtt) us (2 x typical one-way)"
else
  compare "ib_send_lat not installed (perftest): no raw-verbs baseline"
fi
# One process per case, as under ctest: each forks its peer, and a child must not inherit the
# verbs contexts an earlier case opened (librdmacm caches them per process; see the fork note in
# transport/rdma/rdma_transport.hpp).
for mode in "event mode" "busy poll" "adaptive"; do
  tests/transport_rdma/transport_rdma_rtt_tests "rdma 64 B ping-pong RTT between two processes ($mode)" 2>&1 |
    sed -n 's/^rdmarpc 64 B ping-pong RTT/rdmarpc transport 64 B ping-pong RTT/p' |
    while IFS= read -r line; do compare "$line"; done
done
exit $rc
