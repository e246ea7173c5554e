#!/usr/bin/env bash
# demo.sh - the README's "main job": installs what is missing, builds rdmarpc's example, boots the
# Soft-RoCE VM (tools/rxe-vm) and runs the example's server and client there on rxe0, printing
# what happened. Exit status: the demo's (0 = the exchange completed and was verified).
#
# The example is examples/kv: kv_server and kv_client's scripted session (every method, the status
# codes, timings), over rdma:// (a real RDMA device when the host has one, else rxe0 in the VM) and
# then over tcp:// on the host.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
T0=$SECONDS
step() { printf '\n==== [%4ds] %s\n' "$((SECONDS - T0))" "$*"; }
locked() {  # like scripts/test.sh: RDMARPC_BUILD_LOCK=FILE serializes builds/VMs on shared machines
  if [[ -n ${RDMARPC_BUILD_LOCK:-} ]]; then flock "$RDMARPC_BUILD_LOCK" "$@"; else "$@"; fi
}

# ---- the demo itself ---------------------------------------------------------------------------
DEMO_TARGETS=(kv_server kv_client)  # what the demo needs built (examples/kv)
KV_RUN=examples/kv/run_kv_example.sh  # in the build tree: starts kv_server, waits, runs kv_client

# Runs INSIDE the VM (bash, cwd = the build tree, rxe0 = 10.0.0.1). It is shipped as source with
# `declare -f`, so it may use only its own locals and the guest's tools (busybox, rdma-core, bash).
run_demo_in_vm() {
  echo "demo: the KV example over rdma:// on rxe0 (Soft-RoCE): kv_server, then kv_client's scripted session"
  bash examples/kv/run_kv_example.sh examples/kv/kv_server examples/kv/kv_client rdma://10.0.0.1:0
}

# The IPv4 address of the first RDMA device's network interface, when this host has a real one
# (ibv_devices lists it); RDMARPC_DEMO_RDMA_ADDR overrides. Empty: no usable device.
host_rdma_address() {
  if [[ -n ${RDMARPC_DEMO_RDMA_ADDR:-} ]]; then echo "$RDMARPC_DEMO_RDMA_ADDR"; return; fi
  local dev netdev
  dev=$(ibv_devices 2>/dev/null | awk 'NR > 2 && NF { print $1; exit }')
  [[ -n $dev ]] || return 0
  netdev=$(cat "/sys/class/infiniband/$dev/ports/1/gid_attrs/ndevs/0" 2>/dev/null || ls "/sys/class/infiniband/$dev/device/net" 2>/dev/null | head -n 1)
  [[ -n $netdev ]] && ip -4 -o addr show dev "$netdev" 2>/dev/null | awk '{ sub("/.*", "", $4); print $4; exit }'
}
# ------------------------------------------------------------------------------------------------

step "install dependencies"
bash "$ROOT/scripts/install-deps.sh"
step "configure and build ${DEMO_TARGETS[*]} in build/"
# Same settings as scripts/test.sh, so both share build/ without rebuilding everything.
locked cmake -S "$ROOT" -B "$BUILD" -G Ninja -DRDMARPC_WERROR=ON >/dev/null
locked ninja -C "$BUILD" "${DEMO_TARGETS[@]}"
rc=0
rdma_addr=$(host_rdma_address || true)
if [[ -n $rdma_addr ]]; then
  step "this host has an RDMA device: run the KV example over rdma://$rdma_addr directly"
  (cd "$BUILD" && bash "$KV_RUN" examples/kv/kv_server examples/kv/kv_client "rdma://$rdma_addr:0") || rc=$?
else
  step "boot the Soft-RoCE VM and run the demo (tools/rxe-vm/run-in-vm.sh)"
  locked "$ROOT/tools/rxe-vm/run-in-vm.sh" --stock-checks --exclude '*.a' --timeout 600 "$BUILD" -- \
    bash -c "$(declare -f run_demo_in_vm); run_demo_in_vm" || rc=$?
fi
step "the same KV session over tcp:// on this host"
(cd "$BUILD" && bash "$KV_RUN" examples/kv/kv_server examples/kv/kv_client tcp://127.0.0.1:0) || { ((rc != 0)) || rc=1; }
case $rc in
  0) step "demo finished: OK";;
  124) step "demo FAILED: the VM run timed out";;
  125) step "demo FAILED: the VM or its stock tool checks failed (the test bed, not rdmarpc)";;
  *) step "demo FAILED (exit $rc)";;
esac
exit "$rc"
