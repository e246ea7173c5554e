#!/usr/bin/env bash
# run-in-vm.sh - run a command inside a throw-away qemu VM that has a Soft-RoCE RDMA device
# (rdma_rxe, "rxe0" on dummy0 = 10.0.0.1/24), so rdmarpc's real-verbs tests run on machines
# without an RDMA NIC and without RDMA support in their own kernel.
#
#   tools/rxe-vm/run-in-vm.sh [options] [DIR] -- COMMAND [ARG...]
#   e.g. tools/rxe-vm/run-in-vm.sh build -- ctest -L rdma --output-on-failure
#
# The guest is Debian's stock amd64 kernel (fetched with `apt-get download` and unpacked into the
# cache, never installed on the host) with a busybox initramfs carrying rdma-core, the stock RDMA
# tools (ibverbs-utils, rdmacm-utils, perftest), iproute2 and bash, all copied from the host.
# DIR is copied into the guest at the SAME absolute path and is COMMAND's working directory, so a
# CMake build tree works as is; the shared libraries of its programs come along. The VM has no
# network device to the host at all (-nodefaults -nic none): nothing leaves the machine.
#
# Exit status: COMMAND's own; 124 = --timeout hit; 125 = harness or VM failure (including failed
# --stock-checks, i.e. a broken test bed rather than a broken project). See README.md here.
set -euo pipefail

HARNESS_VERSION=1  # bump to rebuild every cached initramfs
SELF=$(readlink -f "${BASH_SOURCE[0]}")
REPO_ROOT=$(cd "$(dirname "$SELF")/../.." && pwd)
T_START=$SECONDS

# Every option also has an environment variable, so CI can set them once.
CACHE=${RXE_VM_CACHE:-$REPO_ROOT/build/rxe-vm-cache}  # kernel, modules, base initramfs
TIMEOUT=${RXE_VM_TIMEOUT:-900}
ACCEL=${RXE_VM_ACCEL:-auto}
KVM_PROBE=${RXE_VM_KVM_PROBE:-30}     # seconds for a KVM guest to reach /init before falling back
MEM=${RXE_VM_MEM:-auto}               # auto = 2 GiB, more when DIR is large (it lives in guest RAM)
SMP=${RXE_VM_SMP:-2}                  # >= 2: rxe peers sharing one vCPU stall 4 ms per wake-up
KERNEL_PKG=${RXE_VM_KERNEL:-linux-image-amd64}
GUEST_IP=${RXE_VM_IP:-10.0.0.1/24}
GUEST_MTU=${RXE_VM_MTU:-1500}         # netdev MTU 1500 gives RDMA MTU 1024; 4200 gives 4096
LOGFILE=${RXE_VM_LOG:-}
QUIET=${RXE_VM_QUIET:-0}
STOCK_CHECKS=${RXE_VM_STOCK_CHECKS:-0}
STRIP_DEBUG=${RXE_VM_STRIP_DEBUG:-1}  # drop debug info from the guest's copies of DIR's programs
HOSTS=${RXE_VM_HOSTS:-1}              # 2: two VMs joined by a virtual link (the multi-host bed)
PEER_CMD=${RXE_VM_PEER_CMD:-}         # what host 2 runs (bash -c) in the multi-host bed

log() { printf '[rxe-vm +%ss] %s\n' "$((SECONDS - T_START))" "$*" >&2; }
die() { log "ERROR: $*"; exit 125; }

usage() {
  cat <<'EOF'
usage: tools/rxe-vm/run-in-vm.sh [options] [DIR] -- COMMAND [ARG...]
       tools/rxe-vm/run-in-vm.sh --prepare
Runs COMMAND (cwd = DIR, or / without DIR) in a qemu VM with the Soft-RoCE device rxe0 on dummy0
(10.0.0.1/24) and exits with COMMAND's status (124 timeout, 125 harness/VM failure).
DIR is copied to the same absolute path in the guest (without *.o, .git and the cache).
options:
  --include PATH   also copy PATH (file or directory) to the same path in the guest (repeatable)
  --exclude GLOB   leave out files/dirs whose name matches GLOB from DIR/--include (repeatable)
  --env NAME=VAL   export NAME=VAL into COMMAND's environment (repeatable)
  --out HOSTDIR    copy the guest's /out directory to HOSTDIR after COMMAND ends
  --stock-checks   before COMMAND, check the bed with stock tools (ibv_devinfo: rxe0
                   PORT_ACTIVE; rping client/server); a failure ends the run with 125
  --timeout SEC    wall-clock limit of the VM run (default 900)
  --accel MODE     auto|kvm|tcg (default auto: KVM when it can boot the guest, else TCG)
  --mem MB         guest RAM (default: 2048, raised for a large DIR)
  --smp N          guest vCPUs (default 2)
  --mtu N          MTU of dummy0 under rxe0 (default 1500 -> active RDMA MTU 1024)
  --kernel PKG     Debian kernel package (default linux-image-amd64; e.g. linux-image-6.12-amd64)
  --keep-debug     keep debug info in the copied programs (default: stripped, symbols kept)
  --log FILE       keep the whole guest console in FILE
  --quiet          do not stream the guest console (progress lines still appear)
  --prepare        only fetch the kernel and build the cached base initramfs
  --hosts N        1 (default) or 2: the multi-host bed. Each host is its own VM with its own
                   kernel and rxe0 on a virtio-net NIC eth0 (host H is 10.0.0.H/24, name hostH);
                   the two NICs are joined by qemu dgram netdevs (unix sockets on the host,
                   no host network device). COMMAND runs on host 1 and decides the exit status;
                   host 2 runs --peer and is powered off when COMMAND ends. A guest line
                   "RXE-VM-HOST: freeze H MS" on any console (the rxe-vm-host helper in the
                   guest writes it) makes the harness SIGSTOP host H's qemu for MS ms: a hung host;
                   "RXE-VM-HOST: poweroff H" (H >= 2) SIGKILLs it: a power loss
  --peer CMD       the shell command host 2 runs (default: sleep until powered off)
environment: RXE_VM_CACHE (default <repo>/build/rxe-vm-cache), RXE_VM_TIMEOUT, RXE_VM_ACCEL,
  RXE_VM_MEM, RXE_VM_SMP, RXE_VM_MTU, RXE_VM_KERNEL, RXE_VM_LOG, RXE_VM_QUIET, RXE_VM_STOCK_CHECKS,
  RXE_VM_STRIP_DEBUG, RXE_VM_HOSTS, RXE_VM_PEER_CMD
EOF
}

# ================================================================ command line
DIR=""; INCLUDES=(); EXCLUDES=('*.o' '.git'); ENVS=(); OUTDIR=""; PREPARE_ONLY=0
need_arg() { (($1 >= 2)) || die "$2 needs a value"; }
while (($#)); do
  case $1 in
    --include) need_arg $# "$1"; INCLUDES+=("$2"); shift 2;;
    --exclude) need_arg $# "$1"; EXCLUDES+=("$2"); shift 2;;
    --env) need_arg $# "$1"; [[ $2 == [A-Za-z_]*=* ]] || die "--env wants NAME=VALUE, got '$2'"; ENVS+=("$2"); shift 2;;
    --out) need_arg $# "$1"; OUTDIR=$2; shift 2;;
    --stock-checks) STOCK_CHECKS=1; shift;;
    --timeout) need_arg $# "$1"; TIMEOUT=$2; shift 2;;
    --accel) need_arg $# "$1"; ACCEL=$2; shift 2;;
    --mem) need_arg $# "$1"; MEM=$2; shift 2;;
    --smp) need_arg $# "$1"; SMP=$2; shift 2;;
    --mtu) need_arg $# "$1"; GUEST_MTU=$2; shift 2;;
    --kernel) need_arg $# "$1"; KERNEL_PKG=$2; shift 2;;
    --log) need_arg $# "$1"; LOGFILE=$2; shift 2;;
    --keep-debug) STRIP_DEBUG=0; shift;;
    --quiet) QUIET=1; shift;;
    --prepare) PREPARE_ONLY=1; shift;;
    --hosts) need_arg $# "$1"; HOSTS=$2; shift 2;;
    --peer) need_arg $# "$1"; PEER_CMD=$2; shift 2;;
    -h|--help) usage; exit 0;;
    --) shift; break;;
    -*) usage >&2; die "unknown option $1";;
    *) [[ -z $DIR ]] || die "only one DIR (got '$DIR' and '$1'); use --include for more"; DIR=$1; shift;;
  esac
done
CMD=("$@")
((PREPARE_ONLY)) || ((${#CMD[@]})) || { usage >&2; die "no COMMAND (put it after --)"; }
case $ACCEL in auto|kvm|tcg) ;; *) die "--accel must be auto, kvm or tcg";; esac
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "--timeout wants seconds, got '$TIMEOUT'"
[[ $MEM == auto || $MEM =~ ^[1-9][0-9]*$ ]] || die "--mem wants MB, got '$MEM'"
[[ $HOSTS == 1 || $HOSTS == 2 ]] || die "--hosts must be 1 or 2, got '$HOSTS'"
if [[ -n $DIR ]]; then [[ -d $DIR ]] || die "DIR '$DIR' is not a directory"; DIR=$(readlink -f "$DIR"); fi
[[ $(id -u) == 0 ]] || die "needs root (installs host packages, reads /dev/kvm)"
mkdir -p "$CACHE"
CACHE=$(readlink -f "$CACHE")

# ================================================================ host packages
# What the harness runs on the host, and what it copies into the guest image.
HOST_PACKAGES=(qemu-system-x86 qemu-system-data busybox-static cpio kmod xz-utils zstd iproute2
               ibverbs-utils rdmacm-utils perftest ibverbs-providers librdmacm1 bash)
APT_UPDATED=0
apt_update_once() {
  ((APT_UPDATED)) && return 0
  log "apt-get update"
  timeout 600 apt-get update -q >&2 || return 1
  APT_UPDATED=1
}
ensure_host_packages() {
  local missing=() p
  for p in "${HOST_PACKAGES[@]}"; do
    [[ $(dpkg-query -W -f '${Status}' "$p" 2>/dev/null) == "install ok installed" ]] || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  log "installing host packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Try with the current package lists first: an update costs time and may not be needed.
  timeout 900 apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 ||
    { apt_update_once && timeout 900 apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; } ||
    die "apt-get install ${missing[*]} failed"
}

# ================================================================ guest kernel
# The kernel .deb is unpacked into the cache; only vmlinuz and the modules rxe needs (and their
# dependencies, in load order, decompressed) are kept. The package ships no modules.dep (its
# postinst makes it), so depmod runs on the unpacked tree.
# virtio_pci and virtio_net: the multi-host bed's NIC; sch_netem: `tc qdisc ... netem loss 100%`,
# a silent link cut.
GUEST_MODULES=(rdma_rxe rdma_ucm ib_uverbs ib_umad dummy crc32_generic crc32-pclmul virtio_pci virtio_net
               sch_netem)
resolve_kernel_pkg() {  # KERNEL_PKG (meta or concrete) -> KPKG (concrete), empty if apt cannot say
  KPKG=$(apt-cache depends "$KERNEL_PKG" 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}') || true
  if [[ -z $KPKG ]] && apt-cache show "$KERNEL_PKG" >/dev/null 2>&1; then KPKG=$KERNEL_PKG; fi
}
ensure_kernel() {
  resolve_kernel_pkg
  if [[ -z $KPKG ]]; then apt_update_once || true; resolve_kernel_pkg; fi
  if [[ -z $KPKG ]]; then  # offline, no lists: fall back to the newest kernel already cached
    KPKG=$(ls -1t "$CACHE"/kernel/*/.done 2>/dev/null | head -n1 | xargs -r dirname | xargs -r basename) || true
    [[ -n $KPKG ]] || die "apt-cache cannot resolve $KERNEL_PKG and no kernel is cached"
    log "apt-cache cannot resolve $KERNEL_PKG; using the cached $KPKG"
  fi
  KDIR=$CACHE/kernel/$KPKG
  if [[ ! -f $KDIR/.done || $(cat "$KDIR/modules.req" 2>/dev/null) != "${GUEST_MODULES[*]}" ]]; then
    unpack_kernel
  fi
  KVER=$(cat "$KDIR/kver")
  KERNEL=$KDIR/vmlinuz-$KVER
}
unpack_kernel() {
  local t0=$SECONDS deb full try
  rm -rf "$KDIR"; mkdir -p "$KDIR" "$CACHE/debs"
  log "downloading $KPKG (unpacked into the cache, not installed)"
  for try in 1 2; do
    (cd "$CACHE/debs" && timeout 900 apt-get download -q -o APT::Sandbox::User=root "$KPKG" >&2) && break
    # stale lists: the mirror may have moved to a newer ABI package; refresh and resolve again
    ((try == 1)) && apt_update_once && resolve_kernel_pkg && KDIR=$CACHE/kernel/$KPKG && mkdir -p "$KDIR" ||
      die "apt-get download $KPKG failed"
  done
  deb=$(ls "$CACHE/debs/${KPKG}_"*.deb 2>/dev/null | head -n1)
  [[ -n $deb ]] || die "apt-get download $KPKG left no .deb"
  full=$KDIR/full; mkdir -p "$full"
  dpkg-deb -x "$deb" "$full"
  KVER=$(ls "$full/lib/modules" | head -n1)
  [[ -n $KVER && -f $full/boot/vmlinuz-$KVER ]] || die "unexpected layout in $deb"
  grep -qE '^CONFIG_RDMA_RXE=[ym]' "$full/boot/config-$KVER" || die "$KPKG has no CONFIG_RDMA_RXE (cloud kernels lack it)"
  cp "$full/boot/vmlinuz-$KVER" "$KDIR/"
  depmod -b "$full" "$KVER"
  local m line f rel seen=" " order=()
  for m in "${GUEST_MODULES[@]}"; do
    # `--show-depends` lists "insmod FILE" in load order; built-in or absent modules list nothing
    while read -r line; do
      [[ $line == insmod\ * ]] || continue
      f=$(awk '{print $2}' <<<"$line")
      rel=${f#"$full/lib/modules/$KVER/"}; rel=${rel%.xz}; rel=${rel%.zst}; rel=${rel%.gz}
      [[ $seen == *" $rel "* ]] && continue
      seen+="$rel "; order+=("$rel")
      mkdir -p "$KDIR/modules/$KVER/$(dirname "$rel")"
      case $f in
        *.xz) xz -dc "$f" >"$KDIR/modules/$KVER/$rel";;
        *.zst) zstd -qdc "$f" >"$KDIR/modules/$KVER/$rel";;
        *.gz) gzip -dc "$f" >"$KDIR/modules/$KVER/$rel";;
        *) cp "$f" "$KDIR/modules/$KVER/$rel";;
      esac
    done < <(modprobe -d "$full" -S "$KVER" -C /dev/null --show-depends "$m" 2>/dev/null || true)
  done
  printf '%s\n' "${order[@]}" >"$KDIR/modules.load"
  grep -q 'rdma_rxe.ko$' "$KDIR/modules.load" || die "rdma_rxe not found in $KPKG"
  cp "$full/lib/modules/$KVER"/modules.{builtin,builtin.modinfo,order} "$KDIR/modules/$KVER/"
  echo "$KVER" >"$KDIR/kver"
  echo "${GUEST_MODULES[*]}" >"$KDIR/modules.req"
  rm -rf "$full" "$deb"
  touch "$KDIR/.done"
  log "kernel $KVER ready in $((SECONDS - t0)) s ($(wc -l <"$KDIR/modules.load") modules)"
}

# ================================================================ base initramfs
copy_into() {  # ROOT SRC [DEST]: copy SRC (symlinks followed) to DEST (default SRC) under ROOT
  local root=$1 src=$2 dest=${3:-$2} ddir
  ddir=$(readlink -f "$(dirname "$dest")")  # canonical: the image mirrors the host's merged /usr
  mkdir -p "$root$ddir"
  [[ -e $root$ddir/${dest##*/} ]] || cp -L --preserve=mode "$src" "$root$ddir/${dest##*/}"
}
shared_libs() {  # FILE... -> the shared libraries (and ELF interpreter) they load, from ldd
  local f
  for f in "$@"; do
    LC_ALL=C ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3; next} $1 ~ /^\// {print $1}' || true
  done | sort -u
}
is_elf() { [[ -f $1 && ! -L $1 && $(head -c4 "$1" 2>/dev/null | od -An -c | tr -d ' ') == '177ELF' ]]; }

GUEST_TOOL_PACKAGES=(ibverbs-utils rdmacm-utils perftest)
GUEST_EXTRA_PROGRAMS=(/usr/bin/rdma /usr/bin/ip /usr/sbin/tc /usr/bin/bash)
base_image_key() {  # changes when this script, the kernel or any copied package changes
  {
    echo "v$HARNESS_VERSION $KPKG $KVER"
    cat "$SELF"
    dpkg-query -W -f '${Package} ${Version}\n' busybox-static iproute2 libibverbs1 ibverbs-providers \
      librdmacm1 "${GUEST_TOOL_PACKAGES[@]}" libc6 bash 2>/dev/null || true
  } | sha256sum | cut -c1-16
}

write_init() {  # ROOT: the guest's /init (busybox sh)
  cat >"$1/init" <<'INIT'
#!/usr/bin/busybox sh
# /init of the rdmarpc rxe-vm image (written by tools/rxe-vm/run-in-vm.sh).
# Debian's busybox sh prefers its own applets (ip, tc, ...) to PATH, so iproute2 is called by
# absolute path here, and /bin/sh in the image is bash, so user commands get the real tools.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm /tmp /run /out /root
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
chmod 1777 /tmp  # no tmpfs on /tmp: it would hide a DIR that lives under /tmp
echo "RXE-VM-INIT: $(cut -d' ' -f1 /proc/uptime)s kernel $(uname -r)"
finish() {  # EXIT-CODE: send /out back, print the marker the host waits for, power off
  if [ -f /etc/rxe-vm/want-out ]; then
    # microvm has a single UART, so /out travels as base64 between markers on the console
    echo "RXE-VM-OUT-BEGIN"; tar -cf - -C /out . | gzip -1 | base64; echo "RXE-VM-OUT-END"
  fi
  echo "RXE-VM-EXIT-CODE: $1"; sync; reboot -f
}
fail() { echo "RXE-VM-SETUP-FAILED: $*"; finish 125; }
. /etc/rxe-vm/config
IP=/usr/bin/ip; [ -x $IP ] || IP=/usr/sbin/ip
while read -r m; do
  insmod "/lib/modules/$(uname -r)/$m" || echo "RXE-VM: warning: insmod $m failed"
done </etc/rxe-vm/modules.load
$IP link set lo up
# The multi-host bed names each VM on the kernel command line (rxe_vm.host=H): rxe0 then sits on
# the virtio NIC eth0 at 10.0.0.H. A single VM puts rxe0 on a dummy netdev: rdma_rxe loops
# traffic between local addresses back internally (the dummy module creates dummy0 by default).
HOSTNUM=$(sed -n 's/.*rxe_vm\.host=\([0-9]*\).*/\1/p' /proc/cmdline)
if [ -n "$HOSTNUM" ]; then
  NETDEV=eth0; RXE_IP=10.0.0.$HOSTNUM/24
  echo "host$HOSTNUM" >/proc/sys/kernel/hostname
  printf '10.0.0.1 host1\n10.0.0.2 host2\n' >>/etc/hosts
  i=0
  until [ -e /sys/class/net/eth0 ]; do
    i=$((i + 1)); [ $i -gt 100 ] && fail "no eth0 (virtio-net) after 10 s"
    sleep 0.1
  done
else
  NETDEV=dummy0
  $IP link show dummy0 >/dev/null 2>&1 || $IP link add dummy0 type dummy || fail "ip link add dummy0"
fi
$IP link set $NETDEV mtu "$RXE_MTU" || fail "mtu $RXE_MTU on $NETDEV"
$IP addr add "$RXE_IP" dev $NETDEV || fail "ip addr add $RXE_IP"
$IP link set $NETDEV up
rdma link add rxe0 type rxe netdev $NETDEV 2>/dev/null ||
  echo $NETDEV >/sys/module/rdma_rxe/parameters/add || fail "rdma link add rxe0"
i=0
until [ -e /dev/infiniband/uverbs0 ] && [ -e /dev/infiniband/rdma_cm ]; do
  i=$((i + 1)); [ $i -gt 100 ] && fail "no /dev/infiniband/uverbs0 or rdma_cm after 10 s"
  sleep 0.1
done
ulimit -l unlimited
echo "RXE-VM-READY: $(cut -d' ' -f1 /proc/uptime)s"
if [ "$RXE_STOCK_CHECKS" = 1 ]; then
  # Unmodified rdma-core tools: if these fail the test bed is broken, not the project.
  addr=${RXE_IP%/*}; bad=0
  if ibv_devinfo -d rxe0 >/tmp/check.log 2>&1 && grep -q PORT_ACTIVE /tmp/check.log; then
    echo "RXE-VM-CHECK: PASS ibv_devinfo (rxe0 PORT_ACTIVE)"
  else
    echo "RXE-VM-CHECK: FAIL ibv_devinfo (rxe0 not PORT_ACTIVE)"; sed 's/^/  | /' /tmp/check.log; bad=1
  fi
  timeout 60 rping -s -a "$addr" -p 7174 -C 10 >/tmp/rping-server.log 2>&1 &
  server=$!
  # start the client only once the server's cm_id listens (a too-early client is rejected)
  i=0
  until rdma resource show cm_id 2>/dev/null | grep -q 'state LISTEN .*src-addr [^ ]*:7174 '; do
    i=$((i + 1)); [ $i -gt 100 ] && break
    sleep 0.1
  done
  if timeout 60 rping -c -a "$addr" -p 7174 -C 10 -v >/tmp/rping-client.log 2>&1 && wait $server &&
     [ "$(grep -c 'ping data' /tmp/rping-client.log)" = 10 ]; then
    echo "RXE-VM-CHECK: PASS rping (10 ping-pongs over rdma_cm)"
  else
    echo "RXE-VM-CHECK: FAIL rping"; sed 's/^/  | /' /tmp/rping-client.log /tmp/rping-server.log; bad=1
    kill $server 2>/dev/null
  fi
  [ $bad = 0 ] || fail "stock tool checks failed: the VM's RDMA device is broken"
fi
[ -f /etc/rxe-vm/env ] && . /etc/rxe-vm/env
export RXE_VM_HOST=${HOSTNUM:-1}
cd "$RXE_WORKDIR" || fail "cd $RXE_WORKDIR"
if [ "${HOSTNUM:-1}" = 1 ]; then
  /usr/bin/bash /etc/rxe-vm/cmd.sh </dev/null
else
  rm -f /etc/rxe-vm/want-out  # only host 1 sends /out back
  /usr/bin/bash /etc/rxe-vm/peer.sh </dev/null
fi
rc=$?
cd /
if [ $rc != 0 ]; then
  echo "RXE-VM: command exited $rc; last guest kernel messages:"
  dmesg | tail -n 20 | sed 's/^/RXE-VM-KMSG: /'
fi
finish $rc
INIT
  chmod 755 "$1/init"
}

build_base_image() {
  local key root t0=$SECONDS d p b progs=() provider
  key=$(base_image_key)
  BASE=$CACHE/initramfs/$KVER/base-$key.cpio.gz
  BASE_FILES=$CACHE/initramfs/$KVER/base-$key.files  # what the image holds, to skip in payloads
  [[ -f $BASE && -f $BASE_FILES ]] && return 0
  log "building the base initramfs ($KVER, key $key)"
  mkdir -p "$CACHE/initramfs/$KVER"
  root=$(mktemp -d "$CACHE/initramfs/root.XXXXXX")
  for d in bin sbin lib lib64; do  # the host's merged-/usr symlinks, so ldd paths match
    if [[ -L /$d ]]; then ln -s "$(readlink "/$d")" "$root/$d"; else mkdir -p "$root/$d"; fi
  done
  mkdir -p "$root"/{usr/bin,usr/sbin,usr/lib,proc,sys,dev,tmp,run,root,out,mnt,etc/rxe-vm,etc/libibverbs.d}
  copy_into "$root" "$(readlink -f "$(command -v busybox)")" /usr/bin/busybox
  for p in "${GUEST_TOOL_PACKAGES[@]}"; do
    while read -r b; do [[ -f $b && -x $b ]] && progs+=("$b"); done < <(dpkg -L "$p" | grep -E '^/usr/s?bin/')
  done
  for b in "${GUEST_EXTRA_PROGRAMS[@]}"; do [[ -x $b ]] && progs+=("$b"); done
  # rdma-core dlopen()s its providers: the rxe one and its driver file; glibc dlopen()s libgcc_s
  provider=$(ls /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so 2>/dev/null | head -n1)
  [[ -n $provider ]] || die "no librxe provider (package ibverbs-providers)"
  cp /etc/libibverbs.d/rxe.driver "$root/etc/libibverbs.d/"
  for p in "${progs[@]}" "$provider" /lib/x86_64-linux-gnu/libgcc_s.so.1 \
           $(shared_libs "${progs[@]}" "$provider" /lib/x86_64-linux-gnu/libgcc_s.so.1); do
    copy_into "$root" "$p"
  done
  while read -r p; do  # busybox applets, where no real program of that name was copied
    [[ -e $root/usr/bin/${p##*/} || -e $root/usr/sbin/${p##*/} || -e $root/$p ]] && continue
    ln -s /usr/bin/busybox "$root/$p" 2>/dev/null || true
  done < <(busybox --list-full)
  ln -sfn bash "$root/usr/bin/sh"
  mkdir -p "$root/usr/lib/modules"
  cp -a "$KDIR/modules/$KVER" "$root/usr/lib/modules/"
  depmod -b "$root" "$KVER" 2>/dev/null || true  # the kernel's request_module -> busybox modprobe
  cp "$KDIR/modules.load" "$root/etc/rxe-vm/modules.load"
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
  printf '127.0.0.1 localhost\n::1 localhost\n%s rxe-vm\n' "${GUEST_IP%/*}" >"$root/etc/hosts"
  printf 'hosts: files\npasswd: files\ngroup: files\n' >"$root/etc/nsswitch.conf"
  echo rxe-vm >"$root/etc/hostname"
  write_init "$root"
  cat >"$root/usr/bin/rxe-vm-host" <<'HELPER'
#!/bin/sh
# rxe-vm-host freeze H MS: asks the harness (multi-host bed) to SIGSTOP host H's VM for MS ms.
# rxe-vm-host poweroff H: asks it to SIGKILL host H's VM (H >= 2), a power loss.
echo "RXE-VM-HOST: $*" >/dev/console
HELPER
  chmod 755 "$root/usr/bin/rxe-vm-host"
  (cd "$root" && find . -mindepth 1 | sed 's#^\.##' | sort) >"$BASE_FILES.tmp"
  (cd "$root" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) | gzip -1 >"$BASE.tmp"
  mv "$BASE.tmp" "$BASE"; mv "$BASE_FILES.tmp" "$BASE_FILES"
  find "$CACHE/initramfs/$KVER" -maxdepth 1 -name 'base-*' ! -name "base-$key.*" -delete  # older keys
  rm -rf "$root"
  log "base initramfs $(du -h "$BASE" | cut -f1) built in $((SECONDS - t0)) s"
}

# ================================================================ per-run payload
# A second gzip cpio appended after the base image (the kernel unpacks both): DIR, --include
# paths, libraries they need that the base lacks, the command, its environment and settings.
sh_quote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
build_payload() {
  local root=$RUNDIR/payload srcs=() prune=() p e list=$RUNDIR/files elfs=() f real
  mkdir -p "$root/etc/rxe-vm"
  [[ -n $DIR ]] && srcs+=("$DIR")
  # ctest comes along with a CMake build tree, and so does a host program named as COMMAND
  # when the image lacks it.
  if [[ -n $DIR && -f $DIR/CTestTestfile.cmake ]] && p=$(command -v ctest); then INCLUDES+=("$p"); fi
  if [[ ${CMD[0]:-} != */* ]] && ! grep -qE "^/usr/s?bin/${CMD[0]:-}\$" "$BASE_FILES" &&
     [[ -z $DIR || ! -e $DIR/${CMD[0]:-} ]] && p=$(command -v "${CMD[0]:-}" 2>/dev/null) && [[ $p == /* ]]; then
    INCLUDES+=("$p")
  fi
  for p in "${INCLUDES[@]}"; do [[ -e $p ]] || die "--include $p does not exist"; srcs+=("$(readlink -f "$p")"); done
  prune=(-path "${CACHE#/}" -prune -o)  # the cache may sit inside DIR (build/rxe-vm-cache)
  for e in "${EXCLUDES[@]}"; do prune+=(-name "$e" -prune -o); done
  : >"$list"
  for p in "${srcs[@]}"; do (cd / && find "${p#/}" "${prune[@]}" -print0) >>"$list"; done
  if [[ -s $list ]]; then
    tar -C / --null --no-recursion -T "$list" -cf - | tar -C "$root" -xf - || die "copying DIR/--include failed"
  fi
  while IFS= read -r -d '' f; do
    is_elf "$f" && elfs+=("${f#"$root"}")
  done < <(find "$root" -type f \( -perm /111 -o -name '*.so' -o -name '*.so.*' \) -print0)
  if ((${#elfs[@]})); then
    # The guest has no debugger: dropping debug info (on the copies) shrinks a RelWithDebInfo
    # build tree several times over, and with it the guest's RAM and boot time. Symbols stay.
    if ((STRIP_DEBUG)) && command -v objcopy >/dev/null; then
      (cd "$root" && printf '.%s\0' "${elfs[@]}" | xargs -0 -r -n 1 -P "$(nproc)" objcopy --strip-debug 2>/dev/null) || true
    fi
    for p in $(shared_libs "${elfs[@]}"); do
      real=$(readlink -f "$(dirname "$p")")/${p##*/}
      grep -qxF "$real" "$BASE_FILES" && continue
      [[ -n $DIR && $p == "$DIR"/* ]] && continue
      copy_into "$root" "$p"
    done
  fi
  {
    echo '#!/bin/sh'
    printf 'exec'; for p in "${CMD[@]}"; do printf ' %s' "$(sh_quote "$p")"; done; echo
  } >"$root/etc/rxe-vm/cmd.sh"
  {
    echo '#!/bin/sh'
    if [[ -n $PEER_CMD ]]; then printf 'exec /usr/bin/bash -c %s\n' "$(sh_quote "$PEER_CMD")"; else echo 'exec sleep 1000000'; fi
  } >"$root/etc/rxe-vm/peer.sh"
  {
    echo "RXE_IP=$(sh_quote "$GUEST_IP")"
    echo "RXE_MTU=$(sh_quote "$GUEST_MTU")"
    echo "RXE_WORKDIR=$(sh_quote "${DIR:-/}")"
    echo "RXE_STOCK_CHECKS=$STOCK_CHECKS"
  } >"$root/etc/rxe-vm/config"
  for e in "${ENVS[@]}"; do echo "export ${e%%=*}=$(sh_quote "${e#*=}")"; done >"$root/etc/rxe-vm/env"
  [[ -n $OUTDIR ]] && : >"$root/etc/rxe-vm/want-out"
  PAYLOAD_MB=$(du -sm "$root" | cut -f1)
  PAYLOAD=$RUNDIR/payload.cpio.gz
  (cd "$root" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) | gzip -1 >"$PAYLOAD"
  rm -rf "$root"
}

# ================================================================ qemu
QEMU_PID=""; QEMU_PIDS=(); TAIL_PID=""; TAIL_PIDS=(); FREEZE_PIDS=(); RUNDIR=""
cleanup() {
  local p
  for p in $QEMU_PID "${QEMU_PIDS[@]}" "${FREEZE_PIDS[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  for p in $TAIL_PID "${TAIL_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  [[ -n $RUNDIR && -d $RUNDIR ]] && rm -rf "$RUNDIR"
  return 0
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM
# Any harness step that fails unexpectedly (unpacking, cpio, depmod, copying...) is the test bed's
# failure, not the command's: 125, never a stray 1 or 2 that would look like the command's status.
set -E
trap 'harness_rc=$?; log "ERROR: harness step failed (line $LINENO: $BASH_COMMAND, exit $harness_rc)"; exit 125' ERR

# KVM only helps when it can run a stock kernel. Under PVM (kvm_pvm: nested KVM without VMX/SVM,
# as on Firecracker-style cloud guests) a stock Debian kernel either aborts qemu or crawls
# forever in the decompressor, so auto mode goes straight to TCG there instead of probing.
kvm_worth_trying() {
  [[ -r /dev/kvm && -w /dev/kvm ]] || { log "no usable /dev/kvm: TCG"; return 1; }
  if [[ $ACCEL == auto ]] && ! grep -qwE 'vmx|svm' /proc/cpuinfo && [[ -d /sys/module/kvm_pvm ]]; then
    log "/dev/kvm is PVM (kvm_pvm, no VMX/SVM) and cannot boot a stock kernel: TCG (--accel kvm forces a try)"
    return 1
  fi
  KVM_NOTE=$CACHE/kvm-broken-$(printf '%s ' "$(uname -r)" "$KPKG" "$(qemu-system-x86_64 --version | head -n1)" |
                               sha256sum | cut -c1-12)
  if [[ $ACCEL == auto && -f $KVM_NOTE ]]; then log "KVM failed to boot the guest here before: TCG"; return 1; fi
  return 0
}

console_of() { if (($1 == 1)); then echo "$RUNDIR/console.log"; else echo "$RUNDIR/console-$1.log"; fi; }

# The multi-host bed's requests to the harness: "RXE-VM-HOST: freeze H MS" and
# "RXE-VM-HOST: poweroff H" lines on any console.
HOST_REQUESTS_DONE=()
serve_host_requests() {
  local h i lines
  for ((h = 1; h <= HOSTS; h++)); do
    # complete lines only: qemu writes the console a character at a time
    mapfile -t lines < <(head -n "$(wc -l <"$(console_of "$h")")" "$(console_of "$h")" | tr -d '\r' |
                         grep '^RXE-VM-HOST: ' || true)
    for ((i = ${HOST_REQUESTS_DONE[h]:-0}; i < ${#lines[@]}; i++)); do
      host_request "$h" ${lines[i]#RXE-VM-HOST: }
    done
    HOST_REQUESTS_DONE[h]=${#lines[@]}
  done
}
host_request() {  # FROM VERB [ARG...]
  local from=$1 verb=${2:-} target=${3:-} ms=${4:-} pid
  if [[ $verb == freeze && $target =~ ^[1-9]$ && $target -le $HOSTS && $ms =~ ^[0-9]+$ ]]; then
    pid=${QEMU_PIDS[target - 1]}
    log "host $from asks: freeze host $target for $ms ms (SIGSTOP of its qemu: a hung host)"
    (trap - ERR; kill -STOP "$pid" 2>/dev/null; sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
     kill -CONT "$pid" 2>/dev/null || true) &
    FREEZE_PIDS+=($!)
  elif [[ $verb == poweroff && $target =~ ^[2-9]$ && $target -le $HOSTS && -z $ms ]]; then
    # Host 1 runs the command and decides the exit status, so only the others can lose power.
    pid=${QEMU_PIDS[target - 1]}
    log "host $from asks: power off host $target (SIGKILL of its qemu: a power loss)"
    kill -CONT "$pid" 2>/dev/null || true  # a frozen host loses power too
    kill -KILL "$pid" 2>/dev/null || true
  else
    log "ignoring a malformed request from host $from: ${*:2}"
  fi
}

# The host's TSC rate in kHz, or nothing. Under TCG the guest reads the host's TSC, and the guest
# kernel's own calibration against the emulated PIT fails now and then ("tsc: Unable to calibrate
# against PIT"): the guest then keeps a jiffies clock (4 ms ticks) and every latency it measures is
# 0 or inf. Telling it the rate (tsc_early_khz) skips that calibration. RXE_VM_TSC_KHZ overrides.
host_tsc_khz() {
  # Nothing here may fail: the ERR trap (set -E) would end the whole run (dmesg is refused without
  # CAP_SYSLOG when kernel.dmesg_restrict is set).
  local mhz
  if [[ -n ${RXE_VM_TSC_KHZ:-} ]]; then echo "$RXE_VM_TSC_KHZ"; return 0; fi
  mhz=$( { dmesg 2>/dev/null || true; } |
           sed -n -e 's/.*tsc: Refined TSC clocksource calibration: \([0-9.]*\) MHz.*/\1/p' \
                  -e 's/.*tsc: Detected \([0-9.]*\) MHz.*/\1/p' | tail -n1)
  if [[ -z $mhz ]]; then
    # cpu MHz is the current clock, the TSC's only on CPUs without frequency scaling: a fallback
    mhz=$(awk -F': *' '/^cpu MHz/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
    [[ -z $mhz ]] || log "the host's TSC rate is not in its kernel log; using cpu MHz ($mhz) for the guest's clock"
  fi
  [[ -z $mhz ]] || awk -v m="$mhz" 'BEGIN { if (m > 0) printf "%d\n", m * 1000 }'
  return 0
}

# boot ACCEL PROBE -> VM_RESULT: ok | noboot (no /init within PROBE s) | timeout | died
# With --hosts 2 both VMs boot; host 1's qemu decides (host 2's is ended when it exits).
boot() {
  local accel=$1 probe=$2 start=$SECONDS args=() cmdline booted=0 ready=0 last_beat=$SECONDS h console
  local host_args=() pid machine poll=0.2 tsc_khz
  CONSOLE=$(console_of 1)
  cmdline="console=ttyS0 quiet loglevel=3 panic=-1 oops=panic mitigations=off nokaslr tsc=reliable reboot=t rdinit=/init"
  case $accel in
    kvm) args+=(-accel kvm -cpu "${RXE_VM_KVM_CPU:-host}");;
    tcg) args+=(-accel tcg,thread=multi -cpu max)
         tsc_khz=$(host_tsc_khz)
         if [[ -n $tsc_khz ]]; then
           cmdline+=" tsc_early_khz=$tsc_khz"
         else
           log "WARNING: the host's TSC rate is unknown; the guest may fall back to a jiffies clock (set RXE_VM_TSC_KHZ)"
         fi;;
  esac
  # microvm boots fastest, but its NIC would be a virtio-mmio device, which Debian's kernel finds
  # only through ACPI, and with ACPI on, microvm's TCG guests hung in TSC calibration here. The
  # multi-host bed takes the pc machine (virtio-net-pci; about 2 s more to boot).
  machine=microvm,x-option-roms=off,rtc=on,acpi=off,pic=on,pit=on,isa-serial=on
  ((HOSTS > 1)) && { machine=pc; poll=0.05; }
  # `reboot -f` + reboot=t + -no-reboot is how the guest makes qemu exit
  args+=(-M "$machine" -m "$GUEST_MEM" -smp "$SMP" -nodefaults -no-user-config -display none -vga none
         -monitor none -no-reboot -kernel "$KERNEL" -initrd "$INITRD")
  if ((HOSTS > 1)); then
    log "booting $HOSTS hosts ($accel, ${GUEST_MEM} MB and $SMP vCPUs each, joined by a virtual link, timeout ${TIMEOUT} s)"
  else
    log "booting ($accel, ${GUEST_MEM} MB, $SMP vCPUs, no network device, timeout ${TIMEOUT} s)"
  fi
  QEMU_PIDS=(); TAIL_PIDS=(); HOST_REQUESTS_DONE=()
  for ((h = 1; h <= HOSTS; h++)); do
    console=$(console_of "$h"); : >"$console"
    if ((HOSTS > 1)); then
      # The link's Ethernet frames travel as datagrams between two unix sockets on the host
      # (qemu 7.2's stream netdev hung both guests at boot here).
      host_args=(-netdev "dgram,id=link,local.type=unix,local.path=$RUNDIR/link-$h.sock,remote.type=unix,remote.path=$RUNDIR/link-$((3 - h)).sock"
                 -device "virtio-net-pci,netdev=link,mac=52:54:00:00:00:0$h" -append "$cmdline rxe_vm.host=$h")
    else
      host_args=(-nic none -append "$cmdline")
    fi
    qemu-system-x86_64 "${args[@]}" "${host_args[@]}" -serial "file:$console" >"$RUNDIR/qemu-$h.err" 2>&1 </dev/null &
    QEMU_PIDS+=($!)
    if ((!QUIET)); then
      # the guest console, minus the harness's own markers and the base64 of /out
      tail -n +1 -f -s 0.2 --pid="${QEMU_PIDS[h - 1]}" "$console" 2>/dev/null |
        sed -u -e 's/\r$//' -e '/^RXE-VM-\(INIT\|READY\|EXIT-CODE\|HOST\): /d' -e '/^RXE-VM-OUT-BEGIN$/,/^RXE-VM-OUT-END$/d' \
               -e '/reboot: Restarting system$/d' -e "$( ((HOSTS > 1)) && echo "s/^/[host$h] /" || echo 's/^//')" &
      TAIL_PIDS+=($!)
    fi
  done
  QEMU_PID=${QEMU_PIDS[0]}
  VM_RESULT=""
  while kill -0 "$QEMU_PID" 2>/dev/null; do
    if ((!booted)) && grep -q '^RXE-VM-INIT:' "$CONSOLE"; then
      booted=1; log "guest kernel up after $((SECONDS - start)) s"
    fi
    if ((!ready)) && grep -q '^RXE-VM-READY:' "$CONSOLE"; then
      ready=1
      if ((STOCK_CHECKS)); then log "rxe0 up (${GUEST_IP%/*}); stock tool checks, then: ${CMD[*]}"
      else log "rxe0 up; running: ${CMD[*]}"; fi
    fi
    ((HOSTS > 1)) && serve_host_requests
    ((!booted && probe > 0 && SECONDS - start >= probe)) && { VM_RESULT=noboot; break; }
    ((SECONDS - start >= TIMEOUT)) && { VM_RESULT=timeout; break; }
    if ((QUIET && SECONDS - last_beat >= 30)); then last_beat=$SECONDS; log "still running ($((SECONDS - start)) s)"; fi
    sleep $poll
  done
  if [[ -n $VM_RESULT ]]; then
    kill "$QEMU_PID" 2>/dev/null || true; sleep 0.5; kill -9 "$QEMU_PID" 2>/dev/null || true
  fi
  for pid in "${QEMU_PIDS[@]:1}"; do  # the other hosts end with host 1 (thawed first, if frozen)
    kill -CONT "$pid" 2>/dev/null || true; kill "$pid" 2>/dev/null || true
  done
  for pid in "${QEMU_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  cp "$RUNDIR/qemu-1.err" "$RUNDIR/qemu.err"
  QEMU_PID=""; QEMU_PIDS=()
  for pid in "${TAIL_PIDS[@]}"; do  # tail ends by itself once qemu is gone (--pid); let it drain
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
  done
  TAIL_PIDS=()
  grep -q '^RXE-VM-INIT:' "$CONSOLE" && booted=1
  VM_SECONDS=$((SECONDS - start))
  [[ -n $VM_RESULT ]] || { ((booted)) && VM_RESULT=ok || VM_RESULT=died; }
}

# ================================================================ main
prepare() {  # host packages, kernel, base image; serialized so parallel runs share one cache
  local lock
  exec {lock}>"$CACHE/.lock"
  flock "$lock"
  ensure_host_packages
  ensure_kernel
  build_base_image
  exec {lock}>&-
}
prepare
((PREPARE_ONLY)) && { log "ready: $KERNEL and $BASE"; exit 0; }

RUNDIR=$(mktemp -d "${TMPDIR:-/tmp}/rxe-vm.XXXXXX")
t0=$SECONDS
build_payload
INITRD=$RUNDIR/initrd.img
cat "$BASE" "$PAYLOAD" >"$INITRD"
rm -f "$PAYLOAD"
if [[ $MEM == auto ]]; then  # the initramfs (compressed + unpacked) lives in guest RAM
  GUEST_MEM=$((1024 + 3 * PAYLOAD_MB)); ((GUEST_MEM >= 2048)) || GUEST_MEM=2048
else
  GUEST_MEM=$MEM
fi
log "payload ready in $((SECONDS - t0)) s (${PAYLOAD_MB} MB unpacked${DIR:+ from $DIR})"

USED=""
if [[ $ACCEL != tcg ]] && kvm_worth_trying; then
  boot kvm "$KVM_PROBE"
  if [[ $VM_RESULT == noboot || $VM_RESULT == died ]]; then
    log "KVM did not boot the guest ($VM_RESULT): $(head -c 300 "$RUNDIR/qemu.err" | tr '\n' ' ')"
    [[ $ACCEL == kvm ]] && die "--accel kvm was asked for but the guest did not boot"
    date >"$KVM_NOTE"  # remembered, so later runs skip the probe
    log "falling back to TCG"
  else
    USED=kvm
  fi
fi
[[ -n $USED ]] || { boot tcg 0; USED=tcg; }

if [[ -n $LOGFILE ]]; then
  tr -d '\r' <"$CONSOLE" >"$LOGFILE"
  ((HOSTS > 1)) && tr -d '\r' <"$(console_of 2)" | sed 's/^/[host2] /' >>"$LOGFILE"
fi
rc=$(tr -d '\r' <"$CONSOLE" | sed -n 's/^RXE-VM-EXIT-CODE: \([0-9]*\)$/\1/p' | tail -n1)
if [[ -n $OUTDIR && -n $rc ]]; then
  tr -d '\r' <"$CONSOLE" | sed -n '/^RXE-VM-OUT-BEGIN$/,/^RXE-VM-OUT-END$/p' | grep -E '^[A-Za-z0-9+/=]+$' >"$RUNDIR/out.b64" || true
  if mkdir -p "$OUTDIR" && base64 -d "$RUNDIR/out.b64" | tar -xzf - -C "$OUTDIR"; then
    log "guest /out copied to $OUTDIR"
  else
    log "ERROR: could not bring the guest's /out back"; rc=125
  fi
fi
log "accel $USED, VM ran $VM_SECONDS s, result $VM_RESULT, exit ${rc:-none}"
if [[ $VM_RESULT == timeout ]]; then
  log "TIMEOUT after $TIMEOUT s; last console lines:"; tr -d '\r' <"$CONSOLE" | tail -n 20 >&2
  exit 124
fi
if [[ -z $rc ]]; then
  log "the guest ended without an exit marker; last console lines:"
  tr -d '\r' <"$CONSOLE" | tail -n 30 >&2
  ((HOSTS > 1)) && { log "host 2's last console lines:"; tr -d '\r' <"$(console_of 2)" | tail -n 15 >&2; }
  [[ -s $RUNDIR/qemu.err ]] && { log "qemu stderr:"; cat "$RUNDIR/qemu.err" >&2; }
  exit 125
fi
if ((QUIET)); then  # otherwise they were streamed already
  tr -d '\r' <"$CONSOLE" | { grep -E '^(RXE-VM-CHECK|RXE-VM-SETUP-FAILED):' || true; } |
    while read -r line; do log "$line"; done
fi
if grep -q '^RXE-VM-SETUP-FAILED:' "$CONSOLE"; then
  log "$(grep -m1 '^RXE-VM-SETUP-FAILED:' "$CONSOLE" | tr -d '\r')"
fi
exit "$rc"
