#!/usr/bin/env bash
# soak_multihost.sh - the soak with faults across the multi-host bed (two VMs, each with its own
# kernel and rxe0, joined by a virtual link; tools/rxe-vm/run-in-vm.sh --hosts 2). Host 1 runs
# `rdmarpc_soak run` with two server processes of its own; host 2's agent runs two more; every
# channel spreads calls over all four (round_robin). Faults: a local server SIGKILLed and restarted
# or SIGSTOPped, and every third fault host 2's link cut for 1.5 s (calls to its servers fail,
# channels move to the others and come back). Every call accounted for, local servers' memory
# sampled.
#
#   tests/soak/soak_multihost.sh [BUILD_DIR] [SECONDS] [rdmarpc_soak run options...]  (build, 1800)
#
# Output, JSON and logs in BUILD_DIR/soak/multihost/. Exit status: the VM run's (rdmarpc_soak's on
# host 1, or 124 on a timeout).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
SECONDS_TO_RUN=${2:-1800}
shift $(($# < 2 ? $# : 2))
for f in tests/soak/rdmarpc_soak tests/multihost/rdmarpc_testbed_agent run_multihost_suite.sh; do
  [[ -e $BUILD/$f ]] || { echo "soak_multihost.sh: $BUILD/$f is not built (ninja -C $BUILD)" >&2; exit 2; }
done
OUT=$BUILD/soak/multihost
rm -rf "$OUT"; mkdir -p "$OUT"
echo "== soak with faults across two hosts over rdma, $SECONDS_TO_RUN s (a link cut every third fault)"
"$ROOT/tools/rxe-vm/run-in-vm.sh" --hosts 2 --peer "bash $BUILD/run_multihost_suite.sh agent" \
  --timeout $((SECONDS_TO_RUN + 900)) --exclude '*.a' --exclude '*.o' --out "$OUT" --log "$OUT/console.log" \
  "$BUILD" -- "$BUILD/tests/soak/rdmarpc_soak" run --target rdma --address 10.0.0.1 --servers 2 \
  --agent tcp://10.0.0.2:7400 --remote-servers rdma://10.0.0.2:7476,rdma://10.0.0.2:7477 \
  --seconds "$SECONDS_TO_RUN" --fault-interval 5 --cut-every 3 --sample-interval 10 --min-kills 1 \
  --log-dir /out/logs --json /out/soak-multihost.json "$@"
rc=$?
echo "soak_multihost.sh: exit $rc; output in $OUT (console.log, soak-multihost.json, logs/)"
exit $rc
