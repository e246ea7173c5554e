#!/usr/bin/env bash
# demo.sh - the README's "main job": installs what is missing, builds rdmarpc's example, boots the
# Soft-RoCE VM (tools/rxe-vm) and runs the example's server and client there on rxe0, printing
# what happened. Exit status: the demo's (0 = the exchange completed and was verified).
#
# Today the example is cm_pingpong (raw rdma_cm send/recv). To switch the demo to another example,
# change DEMO_TARGETS and the body of run_demo_in_vm below; nothing else needs to change.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
T0=$SECONDS
step() { printf '\n==== [%4ds] %s\n' "$((SECONDS - T0))" "$*"; }
locked() {  # like scripts/test.sh: RDMARPC_BUILD_LOCK=FILE serializes builds/VMs on shared machines
  if [[ -n ${RDMARPC_BUILD_LOCK:-} ]]; then flock "$RDMARPC_BUILD_LOCK" "$@"; else "$@"; fi
}

# ---- the demo itself ---------------------------------------------------------------------------
DEMO_TARGETS=(cm_pingpong)  # what run_demo_in_vm needs built

# Runs INSIDE the VM (bash, cwd = the build tree, rxe0 = 10.0.0.1). It is shipped as source with
# `declare -f`, so it may use only its own locals and the guest's tools (busybox, rdma-core, bash).
run_demo_in_vm() {
  local exe=examples/cm_pingpong/cm_pingpong addr=10.0.0.1 n=1000 size=64 i rc_client rc_server
  echo "demo: rdma_cm RC send/recv ping-pong on rxe0 (Soft-RoCE), $n round trips of $size bytes"
  echo "demo: 1) server: $exe server -a $addr -p 0 -n $n -s $size   (port 0: it picks one)"
  "$exe" server -a "$addr" -p 0 -n "$n" -s "$size" >/tmp/server.log 2>&1 &
  local server=$!
  # start the client only once the server listens: a client that is too early gets rejected
  for i in $(seq 100); do grep -q 'listening on' /tmp/server.log && break; sleep 0.1; done
  local port
  port=$(sed -n 's/.*listening on [0-9.]*:\([0-9]*\).*/\1/p' /tmp/server.log)
  if [[ -z $port ]]; then
    echo "demo: the server did not start listening:"; cat /tmp/server.log; kill "$server"; return 1
  fi
  echo "demo:    server is listening on $addr:$port"
  echo "demo: 2) client: $exe client -a $addr -p $port -n $n -s $size"
  timeout 120 "$exe" client -a "$addr" -p "$port" -n "$n" -s "$size" | sed 's/^/demo:    | /'
  rc_client=${PIPESTATUS[0]}
  wait "$server"; rc_server=$?
  echo "demo: 3) server said:"; sed 's/^/demo:    | /' /tmp/server.log
  if ((rc_client == 0 && rc_server == 0)); then
    echo "demo: OK: every ping was checked by the server and every echo by the client"
  else
    echo "demo: FAILED: client exit $rc_client, server exit $rc_server"; return 1
  fi
}
# ------------------------------------------------------------------------------------------------

step "install dependencies"
bash "$ROOT/scripts/install-deps.sh"
step "configure and build ${DEMO_TARGETS[*]} in build/"
# Same settings as scripts/test.sh, so both share build/ without rebuilding everything.
locked cmake -S "$ROOT" -B "$BUILD" -G Ninja -DRDMARPC_WERROR=ON >/dev/null
locked ninja -C "$BUILD" "${DEMO_TARGETS[@]}"
step "boot the Soft-RoCE VM and run the demo (tools/rxe-vm/run-in-vm.sh)"
rc=0
locked "$ROOT/tools/rxe-vm/run-in-vm.sh" --stock-checks --exclude '*.a' --timeout 600 "$BUILD" -- \
  bash -c "$(declare -f run_demo_in_vm); run_demo_in_vm" || rc=$?
case $rc in
  0) step "demo finished: OK";;
  124) step "demo FAILED: the VM run timed out";;
  125) step "demo FAILED: the VM or its stock tool checks failed (the test bed, not rdmarpc)";;
  *) step "demo FAILED (exit $rc)";;
esac
exit "$rc"
