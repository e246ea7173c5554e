# sanitizer-env.sh - sourced by the scripts that run sanitizer builds (test.sh, fuzz.sh,
# stall-hunt.sh): exports the runtime options they run them with, each only when the caller has not
# set it. One place, so the host stages, the VM stages (passed on with --env) and the developer
# tools cannot drift apart. Needs ROOT, the repository (TSan's suppressions, tests/tsan.supp, by
# their physical path: the VM gets that file at that path). A TSAN_OPTIONS of the caller's own
# naming another suppressions file reaches the VM only if that file is --include'd too.
#   ASan:  leaks are errors; abort on the first report (a core and a non-zero exit under ctest).
#   UBSan: stack trace, and stop at the first report instead of printing and going on.
#   TSan:  the suppressions (each with its reason there), stop at the first report, and both
#          stacks of a lock-order inversion.
TSAN_SUPPRESSIONS=$(cd "$ROOT" && pwd -P)/tests/tsan.supp  # test.sh --include's it into the VM
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-suppressions=$TSAN_SUPPRESSIONS halt_on_error=1 second_deadlock_stack=1}
