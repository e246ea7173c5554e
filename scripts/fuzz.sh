#!/usr/bin/env bash
# fuzz.sh [SECONDS_PER_TARGET] - builds the libFuzzer targets of tests/fuzz with clang (ASan+UBSan,
# RDMARPC_FUZZ=ON) in build-fuzz/ and runs each for SECONDS_PER_TARGET (default 20), one per core at
# a time, over a copy of its committed seed corpus (tests/fuzz/corpus/<target>). Fails on the first crash, leak, sanitizer
# report, timeout or out-of-memory; the input that did it is kept in build-fuzz/fuzz-results/.
# Prints execs/s and total execs per target. A long campaign: tests/fuzz/README.md.
#
#   scripts/fuzz.sh --seeds   rewrites tests/fuzz/corpus from real encoded frames (make_seeds)
#
# Environment: RDMARPC_BUILD_LOCK=FILE runs the build and each target under `flock FILE`.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build-fuzz
RESULTS=$BUILD/fuzz-results
source "$ROOT/scripts/sanitizer-env.sh"  # ASAN_OPTIONS, UBSAN_OPTIONS
TARGETS=(frame extras rdma_wire handshake tcp_framer server message_parser)
locked() {
  if [[ -n ${RDMARPC_BUILD_LOCK:-} ]]; then flock "$RDMARPC_BUILD_LOCK" "$@"; else "$@"; fi
}

SEEDS=0
SECONDS_PER_TARGET=20
case ${1:-} in
  --seeds) SEEDS=1 ;;
  '') ;;
  *[!0-9]*) echo "usage: $0 [SECONDS_PER_TARGET | --seeds]" >&2; exit 2 ;;
  *) SECONDS_PER_TARGET=$1 ;;
esac

# clang and libFuzzer's runtime (libclang-rt-14-dev ships libclang_rt.fuzzer) come from Debian;
# install-deps.sh installs them with everything else (a no-op when present).
bash "$ROOT/scripts/install-deps.sh"

# -O1 with line tables only, as libFuzzer's authors advise: much cheaper to build than -O2 -g.
locked cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DRDMARPC_FUZZ=ON \
  '-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG' \
  -DRDMARPC_WERROR=ON -DRDMARPC_BUILD_TESTS=OFF -DRDMARPC_BUILD_EXAMPLES=OFF -DRDMARPC_BUILD_BENCH=OFF >/dev/null
locked ninja -C "$BUILD" fuzz

if ((SEEDS)); then
  rm -rf "$ROOT/tests/fuzz/corpus"
  "$BUILD/tests/fuzz/fuzz_make_seeds" "$ROOT/tests/fuzz/corpus"
  echo "fuzz: seeds written to tests/fuzz/corpus"
  exit 0
fi

rm -rf "$RESULTS"; mkdir -p "$RESULTS"
# fuzz_one TARGET: runs it over a scratch copy of its seeds (the run adds what it finds, the
# committed seeds stay small); its summary line goes to $RESULTS/TARGET.line.
fuzz_one() {
  local t=$1 corpus=$RESULTS/corpus-$1 log=$RESULTS/$1.log rc=0 execs rate result
  mkdir -p "$corpus" "$RESULTS/$t"
  cp "$ROOT/tests/fuzz/corpus/$t"/* "$corpus"/
  echo "---- fuzz_$t: ${SECONDS_PER_TARGET}s"
  # -timeout: one input may take at most 10 s (a hang); -rss_limit_mb: memory per process.
  locked "$BUILD/tests/fuzz/fuzz_$t" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$RESULTS/$t/" "$corpus" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n1)
  if ((rc == 0)); then result=ok; else result=FAILED; fi
  printf '%-12s %-8s %10s %12s\n' "$t" "$result" "${rate:-?}" "${execs:-?}" >"$RESULTS/$t.line"
  if ((rc != 0)); then
    grep -E 'ERROR|SUMMARY|invariant|Test unit written' "$log" | head -n 20 || true
    echo "fuzz_$t FAILED (exit $rc): log $log, input in $RESULTS/$t/"
  fi
  return $rc
}
# One target per core at a time: each is a single process, and CI's share stays short.
jobs_at_once=$(nproc)
failed=0
running=0
for t in "${TARGETS[@]}"; do
  if ((running >= jobs_at_once)); then
    wait -n || failed=1
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
while ((running > 0)); do
  wait -n || failed=1
  running=$((running - 1))
done
printf '%-12s %-8s %10s %12s\n' target result execs/s "total execs" >"$RESULTS/summary.txt"
for t in "${TARGETS[@]}"; do
  cat "$RESULTS/$t.line" 2>/dev/null || printf '%-12s %-8s\n' "$t" FAILED
done >>"$RESULTS/summary.txt"
echo
cat "$RESULTS/summary.txt"
exit $failed
