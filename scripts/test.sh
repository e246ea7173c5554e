#!/usr/bin/env bash
# test.sh - runs every rdmarpc test: installs what is missing, checks the formatting
# (scripts/check-format.sh), builds build/ with warnings as errors, runs the host tests, boots
# the Soft-RoCE VM once for the stock tool checks and the `rdma`-labelled suite on rxe0 (between the
# two, scripts/install-check.sh installs build/ and builds and runs the greeter against it), then
# builds build-asan/ with ASan+UBSan and runs the host tests and (in a second VM boot) the rdma
# suite there, then builds build-tsan/ with ThreadSanitizer and runs the host tests and (in a third
# VM boot) the rdma suite there (channels are used from several threads, servers run several
# io_contexts), then builds the libFuzzer targets in build-fuzz/ with clang and runs each briefly
# over its seed corpus (scripts/fuzz.sh). Prints the failed and skipped tests with an excerpt of
# each failure's output, then a summary table and, on the last line, "N passed, N failed". Exit 0
# only when every stage passed and each rdma suite really ran (no skipped rdma tests, count > 0).
#
# Environment:
#   RDMARPC_SKIP_ASAN=1       skip the ASan+UBSan stage (quick local runs; ignored when CI=true)
#   RDMARPC_SKIP_TSAN=1       skip the ThreadSanitizer stage (the same)
#   RDMARPC_SKIP_FUZZ=1       skip the libFuzzer stage (the same)
#   RDMARPC_FUZZ_SECONDS=SEC  run time of each fuzz target (default 20; scripts/fuzz.sh)
#   RDMARPC_VM_TIMEOUT=SEC    limit of the VM run (default 2400)
#   RDMARPC_BUILD_LOCK=FILE   run builds, ctest and the VM under `flock FILE` (shared machines)
#   RXE_VM_CACHE, RXE_VM_*    passed on to tools/rxe-vm/run-in-vm.sh (cache: build/rxe-vm-cache)
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
ASAN_BUILD=$ROOT/build-asan
TSAN_BUILD=$ROOT/build-tsan
RESULTS=$BUILD/test-results
VM_TIMEOUT=${RDMARPC_VM_TIMEOUT:-2400}
# Line tables only (-g1) in every build: enough for stack traces, sanitizer reports and callgrind's
# per-line costs (-g never changes the code), and much cheaper to build, link and copy into the VM
# than full debug info. The sanitizer trees at -O1, as ASan's and TSan's authors recommend: a third
# less to compile than -O2. (Test code is at -Og in every tree: tests/CMakeLists.txt.) And without
# NDEBUG: the library's asserts state contracts (a lent server_done invoked on its handler's thread,
# no write to a finished server_context) that only a build with them on can catch a test breaking.
LINE_TABLES='-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG'
SANITIZER_FLAGS='-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1'
T0=$SECONDS
cd "$ROOT"
source "$ROOT/scripts/junit-digest.sh"  # junit_failures
source "$ROOT/scripts/sanitizer-env.sh"  # ASAN_OPTIONS, UBSAN_OPTIONS, TSAN_OPTIONS, TSAN_SUPPRESSIONS

# ---------------------------------------------------------------- bookkeeping
STAGE_NAMES=(); STAGE_RESULTS=(); STAGE_SECONDS=(); STAGE_TESTS=()
JUNIT_STAGES=(); JUNIT_FILES=()  # every junit a stage wrote, for the failed-test digest
TOTAL_PASSED=0; TOTAL_FAILED=0; FAILED_STAGES=0

banner() { printf '\n==== [%4ds] %s\n' "$((SECONDS - T0))" "$*"; }
note() { printf -- '---- [%4ds] %s\n' "$((SECONDS - T0))" "$*"; }
locked() {  # CMD...: run CMD, under the shared build lock when one is configured
  if [[ -n ${RDMARPC_BUILD_LOCK:-} ]]; then flock "$RDMARPC_BUILD_LOCK" "$@"; else "$@"; fi
}

# record NAME STATUS SECONDS [TESTS]: STATUS is ok | FAILED | skipped
record() {
  STAGE_NAMES+=("$1"); STAGE_RESULTS+=("$2"); STAGE_SECONDS+=("$3"); STAGE_TESTS+=("${4:-}")
  if [[ $2 == FAILED ]]; then
    FAILED_STAGES=$((FAILED_STAGES + 1))
    # A stage that fails without a test count (a build, the VM) still counts as one failure,
    # so the last line can never read "0 failed" for a failed run.
    [[ -n ${4:-} ]] || TOTAL_FAILED=$((TOTAL_FAILED + 1))
  fi
}

# run_stage NAME CMD...: banner, run, record ok/FAILED with the time taken
run_stage() {
  local name=$1 start=$SECONDS rc
  shift
  banner "$name"
  "$@"; rc=$?
  if ((rc == 0)); then record "$name" ok $((SECONDS - start)); else
    note "$name FAILED (exit $rc)"; record "$name" FAILED $((SECONDS - start))
  fi
  return $rc
}

# junit_counts FILE -> "TESTS FAILED SKIPPED" from ctest's --output-junit (0 0 0 if absent)
junit_counts() {
  local head tests failures skipped disabled
  if [[ ! -s $1 ]]; then echo "0 0 0"; return; fi
  head=$(sed '/<testcase/,$d' "$1")
  tests=$(sed -n 's/.*tests="\([0-9]*\)".*/\1/p' <<<"$head" | head -n1)
  failures=$(sed -n 's/.*failures="\([0-9]*\)".*/\1/p' <<<"$head" | head -n1)
  skipped=$(sed -n 's/.*skipped="\([0-9]*\)".*/\1/p' <<<"$head" | head -n1)
  disabled=$(sed -n 's/.*disabled="\([0-9]*\)".*/\1/p' <<<"$head" | head -n1)
  echo "${tests:-0} ${failures:-0} $((${skipped:-0} + ${disabled:-0}))"
}

# ctest_stage NAME BUILD_DIR JUNIT CTEST_ARGS...: host tests of one build tree
ctest_stage() {
  local name=$1 dir=$2 junit=$3 start=$SECONDS rc n f s p
  shift 3
  banner "$name"
  rm -f "$junit"
  # As many tests at a time as there are cores: no test asserts a time (those live in bench/).
  locked ctest --test-dir "$dir" -j "$(nproc)" --output-on-failure --output-junit "$junit" "$@"; rc=$?
  read -r n f s < <(junit_counts "$junit")
  p=$((n - f - s))
  JUNIT_STAGES+=("$name"); JUNIT_FILES+=("$junit")
  TOTAL_PASSED=$((TOTAL_PASSED + p)); TOTAL_FAILED=$((TOTAL_FAILED + f))
  note "$name: $n tests ($p passed, $f failed, $s skipped)"
  if ((rc != 0 || n == 0 || f > 0)); then
    ((n == 0)) && note "$name: no tests ran"
    record "$name" FAILED $((SECONDS - start)) "$p/$f/$s"
  else
    record "$name" ok $((SECONDS - start)) "$p/$f/$s"
  fi
}

# ---------------------------------------------------------------- stages
configure_and_build() {  # DIR NAME CMAKE_ARGS...: configure + build; false if either failed
  local dir=$1 name=$2
  shift 2
  run_stage "configure $name" locked cmake -S "$ROOT" -B "$dir" -G Ninja "$@" || return 1
  # -k 0: build everything that can be built, so one broken file does not hide every other result
  run_stage "build $name" locked ninja -C "$dir" -k 0
}

# host_only_test_programs DIR: names of DIR's test programs (*_test, *_tests) that no rdma-labelled
# test runs, directly or as an argument of its command.
host_only_test_programs() {
  local dir=$1 needed f
  needed=$(cd "$dir" && ctest -N -V -L rdma 2>/dev/null | sed -n 's/^.*Test command: //p' | tr ' ' '\n' | tr -d '"' |
    sed -n 's|.*/||p' | sort -u)
  [[ -n $needed ]] || return 0  # no rdma tests listed: leave everything in (the stage reports it)
  find "$dir" -path "$dir/rxe-vm-cache" -prune -o -type f -perm /111 \( -name '*_test' -o -name '*_tests' \) \
    -printf '%f\n' | sort -u | while IFS= read -r f; do
    grep -qxF "$f" <<<"$needed" || printf '%s\n' "$f"
  done
}

# rdma_in_vm DIR NAME JUNIT [run-in-vm options...]: boots the VM once with DIR and runs its
# run_rdma_suite.sh there (the rdma ctest suite, junit to /out/JUNIT). Counts a skipped rdma test,
# zero tests, a timeout or a harness failure as a failure of the stage.
rdma_in_vm() {
  local dir=$1 name=$2 junit_name=$3 start=$SECONDS rc n f s p
  shift 3
  local junit=$dir/test-results/vm/$junit_name console=$dir/test-results/vm-console.log
  banner "$name"
  rm -rf "$dir/test-results/vm" "$console"; mkdir -p "$dir/test-results"
  # Static libraries, object files and the test programs no rdma test runs stay behind: under ASan
  # the whole tree made a 2.5 GB payload, about 160 s of packing and of unpacking in the guest.
  local skip=(--exclude '*.a' --exclude '*.o')
  for p in $(host_only_test_programs "$dir"); do skip+=(--exclude "$p"); done
  locked "$ROOT/tools/rxe-vm/run-in-vm.sh" "$@" --timeout "$VM_TIMEOUT" "${skip[@]}" \
    --env "RDMA_SUITE_JUNIT=/out/$junit_name" --out "$dir/test-results/vm" --log "$console" "$dir" -- \
    bash "$dir/run_rdma_suite.sh"
  rc=$?  # the guest's /out/JUNIT is now $junit
  echo
  grep -h '^RXE-VM-CHECK:' "$console" 2>/dev/null | sed 's/^RXE-VM-CHECK: /stock tool check: /'
  # Information, not a verdict: the transport's RTT beside raw verbs on the same rxe0, same boot.
  tr -d '\r' <"$console" 2>/dev/null | sed -n 's/^RTT-COMPARE: /rtt (not asserted): /p'
  vm_verdict "$name" "$junit" "$rc" "rdma" "inside the VM on rxe0" $start
}

# vm_verdict NAME JUNIT RC KIND WHERE START: counts a VM suite's junit, records the stage; a skipped
# test, zero tests, a timeout or a harness failure fail it.
vm_verdict() {
  local name=$1 junit=$2 rc=$3 kind=$4 where=$5 start=$6 n f s p
  read -r n f s < <(junit_counts "$junit")
  p=$((n - f - s))
  JUNIT_STAGES+=("$name"); JUNIT_FILES+=("$junit")
  echo "$kind suite: $n tests ran $where ($p passed, $f failed, $s skipped) [$name]"
  TOTAL_PASSED=$((TOTAL_PASSED + p)); TOTAL_FAILED=$((TOTAL_FAILED + f + s))
  local why=()
  ((rc == 124)) && why+=("the VM run timed out")
  ((rc == 125)) && why+=("the VM or its stock tool checks failed (exit 125): the test bed, not the project")
  ((n == 0)) && why+=("no $kind test ran")
  ((s > 0)) && why+=("$s $kind tests were skipped (no RDMA device?)")
  ((f > 0)) && why+=("$f $kind tests failed")
  ((rc != 0 && rc != 124 && rc != 125 && f == 0)) && why+=("ctest in the VM exited $rc")
  if ((${#why[@]})); then
    note "$name FAILED: $(IFS=';'; echo "${why[*]}")"
    record "$name" FAILED $((SECONDS - start)) "$p/$f/$s"
  else
    record "$name" ok $((SECONDS - start)) "$p/$f/$s"
  fi
}

# multihost_in_vm DIR NAME: boots the multi-host bed (two VMs, tools/rxe-vm --hosts 2) with DIR;
# host 2 runs the testbed agent, host 1 the `cluster` suite (junit to /out/multihost.xml).
multihost_in_vm() {
  local dir=$1 name=$2 start=$SECONDS rc
  local junit=$dir/test-results/vm-multihost/multihost.xml console=$dir/test-results/vm-multihost-console.log
  banner "$name"
  rm -rf "$dir/test-results/vm-multihost" "$console"; mkdir -p "$dir/test-results"
  locked "$ROOT/tools/rxe-vm/run-in-vm.sh" --hosts 2 --peer "bash $dir/run_multihost_suite.sh agent" \
    --timeout "$VM_TIMEOUT" --exclude '*.a' --out "$dir/test-results/vm-multihost" --log "$console" "$dir" -- \
    bash "$dir/run_multihost_suite.sh" tests
  rc=$?
  echo
  # Information, not a verdict: detection and failover times between two emulated hosts.
  sed 's/^/multihost (not asserted): /' "$dir/test-results/vm-multihost/multihost-times.txt" 2>/dev/null
  vm_verdict "$name" "$junit" "$rc" "multihost" "across two VMs" $start
}

# fuzz_stage: scripts/fuzz.sh (clang build in build-fuzz/, each target for RDMARPC_FUZZ_SECONDS);
# one "test" per target in the counts.
fuzz_stage() {
  local name="fuzz (build-fuzz/, libFuzzer, ${RDMARPC_FUZZ_SECONDS:-20}s per target)" start=$SECONDS rc p f
  banner "$name"
  bash "$ROOT/scripts/fuzz.sh" "${RDMARPC_FUZZ_SECONDS:-20}"; rc=$?
  p=$(grep -c ' ok ' "$ROOT/build-fuzz/fuzz-results/summary.txt" 2>/dev/null) || p=0
  f=$(grep -c ' FAILED ' "$ROOT/build-fuzz/fuzz-results/summary.txt" 2>/dev/null) || f=0
  TOTAL_PASSED=$((TOTAL_PASSED + p)); TOTAL_FAILED=$((TOTAL_FAILED + f))
  if ((rc != 0 || p == 0)); then
    note "$name FAILED (exit $rc)"
    # A build failure has no target counts: record() then counts the stage as one failure.
    if ((f > 0)); then record "$name" FAILED $((SECONDS - start)) "$p/$f/0"; else record "$name" FAILED $((SECONDS - start)); fi
  else
    record "$name" ok $((SECONDS - start)) "$p/$f/0"
  fi
}

summary() {
  local i listed=0
  for i in "${!JUNIT_FILES[@]}"; do
    [[ -s ${JUNIT_FILES[$i]} ]] && grep -qE 'status="(fail|notrun)"' "${JUNIT_FILES[$i]}" || continue
    ((listed++)) || banner "failed or skipped tests"
    echo "${JUNIT_STAGES[$i]}:"
    junit_failures "${JUNIT_FILES[$i]}"
  done
  banner "summary"
  printf '%-40s %-8s %7s  %s\n' "stage" "result" "time" "tests passed/failed/skipped"
  for i in "${!STAGE_NAMES[@]}"; do
    printf '%-40s %-8s %6ss  %s\n' "${STAGE_NAMES[$i]}" "${STAGE_RESULTS[$i]}" "${STAGE_SECONDS[$i]}" "${STAGE_TESTS[$i]}"
  done
  printf '%-40s %-8s %6ss\n' "total" "$( ((FAILED_STAGES == 0)) && echo ok || echo FAILED)" "$((SECONDS - T0))"
  echo
  echo "$TOTAL_PASSED passed, $TOTAL_FAILED failed"
}

# ---------------------------------------------------------------- main
if run_stage "install dependencies" bash "$ROOT/scripts/install-deps.sh"; then
  rm -rf "$RESULTS"; mkdir -p "$RESULTS"
  run_stage "format (clang-format, .clang-format)" bash "$ROOT/scripts/check-format.sh"
  if configure_and_build "$BUILD" "build/ (-Werror)" -DRDMARPC_WERROR=ON "$LINE_TABLES"; then :; fi
  if [[ -f $BUILD/CTestTestfile.cmake ]]; then
    ctest_stage "host tests (build/)" "$BUILD" "$RESULTS/host.xml" -LE 'rdma|cluster'
    # As a user would: cmake --install into a temporary prefix, then examples/greeter built as its
    # own project with find_package(rdmarpc) (and once with pkg-config) and run over tcp.
    run_stage "install check (find_package, pkg-config)" locked bash "$ROOT/scripts/install-check.sh" "$BUILD"
    rdma_in_vm "$BUILD" "rdma suite in the VM (rxe0)" rdma.xml --stock-checks
    multihost_in_vm "$BUILD" "multi-host suite (two VMs)"
  fi

  if [[ ${RDMARPC_SKIP_ASAN:-0} == 1 && ${CI:-} != true ]]; then
    banner "ASan+UBSan stage skipped (RDMARPC_SKIP_ASAN=1)"
    record "ASan+UBSan (build-asan/)" skipped 0
  else
    [[ ${RDMARPC_SKIP_ASAN:-0} == 1 ]] && note "CI=true: RDMARPC_SKIP_ASAN is ignored"
    # Without the benchmarks and the multi-host suite (neither runs under ASan) and the code
    # generator's tests (compile-time checks of generated code, run by the plain build).
    configure_and_build "$ASAN_BUILD" "build-asan/ (ASan+UBSan, -Werror)" -DRDMARPC_SANITIZE=ON -DRDMARPC_WERROR=ON \
      -DRDMARPC_BUILD_BENCH=OFF -DRDMARPC_BUILD_CLUSTER_TESTS=OFF -DRDMARPC_BUILD_CODEGEN_TESTS=OFF "$SANITIZER_FLAGS"
    if [[ -f $ASAN_BUILD/CTestTestfile.cmake ]]; then
      mkdir -p "$ASAN_BUILD/test-results"
      ctest_stage "host tests (build-asan/, ASan+UBSan)" "$ASAN_BUILD" "$ASAN_BUILD/test-results/host.xml" -LE 'rdma|cluster'
      # The rdma suite under ASan+UBSan too: leaks and memory errors on the verbs paths (the
      # stock tools were proven by the first boot).
      rdma_in_vm "$ASAN_BUILD" "rdma suite in the VM (rxe0, ASan+UBSan)" rdma-asan.xml \
        --env "ASAN_OPTIONS=$ASAN_OPTIONS" --env "UBSAN_OPTIONS=$UBSAN_OPTIONS" --env RDMA_SUITE_RTT=0
    fi
  fi

  if [[ ${RDMARPC_SKIP_TSAN:-0} == 1 && ${CI:-} != true ]]; then
    banner "ThreadSanitizer stage skipped (RDMARPC_SKIP_TSAN=1)"
    record "ThreadSanitizer (build-tsan/)" skipped 0
  else
    [[ ${RDMARPC_SKIP_TSAN:-0} == 1 ]] && note "CI=true: RDMARPC_SKIP_TSAN is ignored"
    # The library's tests only: no benchmarks, examples, command-line tool, code generator or
    # multi-host tests. Those are single-threaded or run the library's code that the rpc and
    # transport tests already run here; the plain and ASan builds run them all.
    configure_and_build "$TSAN_BUILD" "build-tsan/ (ThreadSanitizer, -Werror)" -DRDMARPC_TSAN=ON -DRDMARPC_WERROR=ON \
      -DRDMARPC_BUILD_BENCH=OFF -DRDMARPC_BUILD_EXAMPLES=OFF -DRDMARPC_BUILD_TOOLS=OFF \
      -DRDMARPC_BUILD_CODEGEN_TESTS=OFF -DRDMARPC_BUILD_CLUSTER_TESTS=OFF "$SANITIZER_FLAGS"
    if [[ -f $TSAN_BUILD/CTestTestfile.cmake ]]; then
      mkdir -p "$TSAN_BUILD/test-results"
      ctest_stage "host tests (build-tsan/, ThreadSanitizer)" "$TSAN_BUILD" "$TSAN_BUILD/test-results/host.xml" -LE 'rdma|cluster'
      # And the rdma suite: the transport's threads (an io_context per connection group, the cm
      # event pump, device event monitors, calls started from other threads) on real verbs.
      # rdma-core itself is not instrumented: TSan sees our side of each verbs call, not the
      # provider's memory shared with the kernel, which no second thread of ours touches; what a
      # message orders between sender and receiver the transport tells it (message_ordering.hpp).
      # --keep-debug: a suppression names a function Asio inlines, which a report shows only from
      # the debug info's records of inlining (reports get file:line from it too).
      rdma_in_vm "$TSAN_BUILD" "rdma suite in the VM (rxe0, ThreadSanitizer)" rdma-tsan.xml --keep-debug \
        --include "$TSAN_SUPPRESSIONS" --env "TSAN_OPTIONS=$TSAN_OPTIONS" --env RDMA_SUITE_RTT=0
    fi
  fi

  if [[ ${RDMARPC_SKIP_FUZZ:-0} == 1 && ${CI:-} != true ]]; then
    banner "fuzz stage skipped (RDMARPC_SKIP_FUZZ=1)"
    record "fuzz (build-fuzz/, libFuzzer)" skipped 0
  else
    [[ ${RDMARPC_SKIP_FUZZ:-0} == 1 ]] && note "CI=true: RDMARPC_SKIP_FUZZ is ignored"
    fuzz_stage
  fi
fi
summary
((FAILED_STAGES == 0))
