#!/usr/bin/env bash
# churn.sh - the full churn soak of issue 12: 10^4 connect/call/disconnect cycles over tcp on the
# host and over rdma on rxe0 inside the Soft-RoCE VM, each ending with fds, heap, QPs, MRs, CQs,
# PDs and rdma_cm ids back at their counts after the warm-up. CI runs shorter counts as tests
# (soak_churn_tests, soak_churn_rdma_tests); this is the long run whose result a note quotes.
#
#   tests/soak/churn.sh [BUILD_DIR] [CYCLES]     (defaults: build, 10000)
#
# Prints each run's progress and table; writes BUILD_DIR/soak/churn-{tcp,rdma}.json.
# Exit 0 only when both runs passed. RDMARPC_BUILD_LOCK=FILE runs the VM under `flock FILE`.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
CYCLES=${2:-10000}
TOOL=$BUILD/tests/soak/rdmarpc_churn
[[ -x $TOOL ]] || { echo "churn.sh: $TOOL is not built (ninja -C $BUILD rdmarpc_churn_tool)" >&2; exit 2; }
mkdir -p "$BUILD/soak"
locked() { if [[ -n ${RDMARPC_BUILD_LOCK:-} ]]; then flock "$RDMARPC_BUILD_LOCK" "$@"; else "$@"; fi; }

echo "== churn over tcp on the host, $CYCLES cycles"
"$TOOL" --target tcp --cycles "$CYCLES" --json "$BUILD/soak/churn-tcp.json"
tcp=$?

echo "== churn over rdma on rxe0 in the VM, $CYCLES cycles"
# The VM writes its JSON into /out, which run-in-vm.sh copies back to --out.
locked "$ROOT/tools/rxe-vm/run-in-vm.sh" --timeout $((600 + CYCLES / 4)) --out "$BUILD/soak" "$BUILD" -- \
  "$TOOL" --target rdma --cycles "$CYCLES" --json /out/churn-rdma.json
rdma=$?

echo
printf '%-6s %s\n' tcp "$( ((tcp == 0)) && echo ok || echo FAILED)" rdma "$( ((rdma == 0)) && echo ok || echo FAILED)"
((tcp == 0 && rdma == 0))
