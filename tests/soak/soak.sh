#!/usr/bin/env bash
# soak.sh - the soak with faults of issue 12 (deliverable 5), the long run: rdmarpc_soak over tcp
# on the host for SECONDS while one of three server processes is SIGKILLed and restarted (or, every
# third fault, SIGSTOPped and resumed) every 5 s; every call accounted for, server memory sampled.
# CI runs a 12 s version (ctest -R soak_faults); this is the run whose result a note quotes.
#
#   tests/soak/soak.sh [BUILD_DIR] [SECONDS] [rdmarpc_soak run options...]   (defaults: build, 1800)
#
# Prints a progress line every 10 s and the final table; writes BUILD_DIR/soak/soak-tcp.json, the
# whole output to BUILD_DIR/soak/soak-tcp.txt and the servers' logs to BUILD_DIR/soak/soak-tcp-logs/.
# Exit status: rdmarpc_soak's (0 only when no call hung, was late or got a wrong reply). Over rdma
# in the Soft-RoCE VM: see tests/soak/README.md.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
SECONDS_TO_RUN=${2:-1800}
shift $(($# < 2 ? $# : 2))
TOOL=$BUILD/tests/soak/rdmarpc_soak
[[ -x $TOOL ]] || { echo "soak.sh: $TOOL is not built (ninja -C $BUILD rdmarpc_soak)" >&2; exit 2; }
OUT=$BUILD/soak
mkdir -p "$OUT"
rm -rf "$OUT/soak-tcp-logs"

echo "== soak with faults over tcp on the host, $SECONDS_TO_RUN s"
"$TOOL" run --target tcp --seconds "$SECONDS_TO_RUN" --servers 3 --fault-interval 5 --sample-interval 10 \
  --min-kills 1 --log-dir "$OUT/soak-tcp-logs" --json "$OUT/soak-tcp.json" "$@" 2>&1 | tee "$OUT/soak-tcp.txt"
