#!/usr/bin/env bash
# install-deps.sh - installs every Debian 12 package rdmarpc needs to build, test and run its
# Soft-RoCE VM. Idempotent: when everything is present it does not touch apt at all.
# Needs root when something is missing. The VM's kernel is not installed here:
# tools/rxe-vm/run-in-vm.sh downloads and unpacks it into its cache.
set -euo pipefail

PACKAGES=(
  # RDMA: libraries, headers, the rxe provider and the stock tools the test bed checks with
  rdma-core libibverbs-dev librdmacm-dev ibverbs-providers ibverbs-utils rdmacm-utils perftest
  # C++ dependencies (Boost 1.81 = Asio 1.26; the default libboost-dev is 1.74 and too old)
  libboost1.81-dev libprotobuf-dev libprotoc-dev protobuf-compiler libspdlog-dev catch2
  # toolchain (clang-format: scripts/check-format.sh, a stage of scripts/test.sh; clang and
  # libclang-rt-14-dev, which ships libFuzzer's runtime: scripts/fuzz.sh)
  cmake ninja-build g++ pkg-config clang-format clang libclang-rt-14-dev
  # promtool validates the metrics endpoint's output (tests/rpc metrics_http test)
  prometheus
  # the Soft-RoCE VM (tools/rxe-vm)
  qemu-system-x86 qemu-system-data busybox-static cpio kmod xz-utils zstd iproute2
)

missing=()
for p in "${PACKAGES[@]}"; do
  [[ $(dpkg-query -W -f '${Status}' "$p" 2>/dev/null) == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PACKAGES[@]} packages are installed"
  exit 0
fi
if [[ $(id -u) != 0 ]]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root (or: sudo apt-get install ${missing[*]})" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "install-deps: done"
