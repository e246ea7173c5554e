#!/usr/bin/env bash
# stall-hunt.sh [BUILD_DIR] [RUNS] [STALL_SECONDS]: runs BUILD_DIR's host tests (default build/,
# everything but the rdma and cluster labels, and STALL_HUNT_EXCLUDE below) RUNS times (default 5)
# while, about once a second, one random process of that tree is stopped (SIGSTOP) for STALL_SECONDS
# (default 0.7) and then continued: what a loaded CI machine does to a test now and then, every
# second. A test that fails here and not in a quiet run leans on its processes being scheduled
# promptly: a timing bound counted from the wrong instant, a wait that returns before the condition
# it means, or a peer declared dead because the defaults (heartbeats answered within 0.3 s) were
# left on in a test of something else. Prints a line per run, each failure's digest, and a table of
# the tests that failed with how often. Exit 0 when every run passed. For developers; CI does not
# run it (a heartbeat test whose subject is detection may still fail when the stall outlasts its
# timeout).
#
# Environment: ASAN_OPTIONS, UBSAN_OPTIONS and TSAN_OPTIONS, when unset, as every script sets them
# (scripts/sanitizer-env.sh). STALL_HUNT_SUITE=rdma runs the rdma suite instead of the host tests,
# inside the VM (README, Testing; a TSan tree also needs --include "$PWD/tests/tsan.supp").
# STALL_HUNT_EXCLUDE: a ctest -E regex of tests left out, "" for none; default the end-to-end
# tests of programs that keep the library's default heartbeats (answered within 0.3 s) as the
# README shows them: the examples (greeter, auth, tracing, kv) and cli_kv (kv_client). A 0.7 s stop
# of one process makes its peer declare it lost, by design. (cli_tool runs the CLI and kv_server
# with --heartbeat-timeout 5 and stays in.)
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=$(cd "${1:-$ROOT/build}" && pwd) || exit 2
RUNS=${2:-5}
STALL=${3:-0.7}
source "$ROOT/scripts/junit-digest.sh"  # junit_failures, junit_failed_names
source "$ROOT/scripts/sanitizer-env.sh"  # ASAN_OPTIONS, UBSAN_OPTIONS, TSAN_OPTIONS
case ${STALL_HUNT_SUITE:-host} in
  host) SUITE=(-LE 'rdma|cluster') ;;
  rdma) SUITE=(-L rdma) ;;
  *) echo "stall-hunt: STALL_HUNT_SUITE is host or rdma" >&2; exit 2 ;;
esac
EXCLUDE=${STALL_HUNT_EXCLUDE-_example:|^cli_kv:}
[[ -n $EXCLUDE ]] && SUITE+=(-E "$EXCLUDE")
OUT=$DIR/stall-hunt
rm -rf "$OUT"; mkdir -p "$OUT"

# Stops one random process run from DIR for STALL seconds, about once a second, and logs which:
# what ctest starts there (test programs, examples, tools, the scripts that run them); never ctest
# or this script, whose arguments may name DIR too.
# Reads /proc rather than asking pgrep: the VM has none (busybox's has no -f).
run_from_dir() {  # prints the pids whose command is a program under DIR, or a shell running one
  local d args
  for d in /proc/[0-9]*; do
    mapfile -t -d '' args 2>/dev/null <"$d/cmdline" || continue  # gone meanwhile
    ((${#args[@]})) || continue
    [[ ${args[0]} == */bash || ${args[0]} == bash || ${args[0]} == */sh || ${args[0]} == sh ]] && args=("${args[@]:1}")
    [[ ${args[0]:-} == "$DIR"/* ]] && echo "${d#/proc/}"
  done
}

staller() {
  local pids p="" what self=$BASHPID
  # Stopped while a process is: continue it, or it would stay stopped for good.
  trap '[[ -n $p ]] && kill -CONT "$p" 2>/dev/null; exit 0' TERM
  while :; do
    # A here-string, not <(...): the VM has no /dev/fd.
    pids=()
    read -r -a pids <<<"$(run_from_dir | grep -vxF -e "$$" -e "$self" | tr '\n' ' ')"
    if ((${#pids[@]})); then
      p=${pids[RANDOM % ${#pids[@]}]}
      what=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-160)
      if kill -STOP "$p" 2>/dev/null; then
        sleep "$STALL"
        kill -CONT "$p" 2>/dev/null
        p=""
        echo "$(date +%T.%N | cut -c1-12) stopped for ${STALL}s: $what"
      fi
    fi
    sleep 0.3
  done
}

staller >"$OUT/stalls.log" 2>&1 &
staller_pid=$!
trap 'kill "$staller_pid" 2>/dev/null; wait "$staller_pid" 2>/dev/null' EXIT  # it continues what it stopped

failed_runs=0
for ((run = 1; run <= RUNS; run++)); do
  start=$SECONDS
  ctest --test-dir "$DIR" "${SUITE[@]}" -j "$(nproc)" --output-junit "$OUT/run$run.xml" >"$OUT/run$run.log" 2>&1
  rc=$?
  printf 'run %d/%d: %s in %ds, %s stalls so far\n' "$run" "$RUNS" \
    "$(grep -Eo '[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' "$OUT/run$run.log" || echo "ctest exit $rc")" \
    $((SECONDS - start)) "$(wc -l <"$OUT/stalls.log")"
  if ((rc != 0)); then
    failed_runs=$((failed_runs + 1))
    junit_failures "$OUT/run$run.xml"
  fi
done

echo
echo "stall-hunt: $failed_runs of $RUNS runs failed (stalls of ${STALL}s: $OUT/stalls.log)"
if ((failed_runs > 0)); then
  printf '%6s  %s\n' runs "test that failed"
  junit_failed_names "$OUT"/run*.xml | sort | uniq -c | sort -rn
fi
((failed_runs == 0))
