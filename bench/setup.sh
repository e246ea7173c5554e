#!/usr/bin/env bash
# bench/setup.sh: installs what the benchmarks need beyond the library's own dependencies
# (Debian 12 packages). The gRPC, Cap'n Proto and UCX baselines are only ever benchmark dependencies,
# never the library's.
#   libgrpc++-dev protobuf-compiler-grpc  the gRPC C++ echo baseline (async completion-queue API)
#   libcapnp-dev capnproto                the Cap'n Proto RPC echo baseline (EzRpc over TCP)
#   ucx-utils                             ucx_perftest, the UCX peer on rxe0 in the VM (rc_verbs)
#   valgrind                              instructions per call (callgrind)
#   gnuplot-nox                           bench/results/<date>/latency.png
#   perftest                              raw-verbs baselines (ib_send_lat / ib_send_bw) in the VM
#   python3 binutils                      the report (make_report.py) and objcopy for the VM stage
set -euo pipefail
pkgs=(libgrpc++-dev protobuf-compiler-grpc libcapnp-dev capnproto ucx-utils valgrind gnuplot-nox perftest python3 binutils)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
((${#missing[@]})) || { echo "bench/setup.sh: all benchmark packages present" >&2; exit 0; }
echo "bench/setup.sh: installing ${missing[*]}" >&2
SUDO=""; [[ $(id -u) == 0 ]] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y --no-install-recommends "${missing[@]}" ||
  { $SUDO apt-get update && $SUDO apt-get install -y --no-install-recommends "${missing[@]}"; }
