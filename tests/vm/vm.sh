#!/usr/bin/env bash
# vm.sh -- a QEMU guest (TCG, no KVM needed) with a pure cgroup v2 hierarchy,
# for running Slurm with CgroupPlugin=cgroup/v2 where the host cannot (a
# hybrid v1/v2 layout).  See tests/vm/README.md.
#
#   vm.sh build [--force]     install QEMU and debootstrap on this host, then
#                             build the guest under SK_VM_DIR: a Debian
#                             bookworm minbase rootfs image (Slurm, munge, the
#                             project's runtime libraries), Debian's kernel
#                             and a busybox initramfs.  A second build only
#                             checks the cache (--force rebuilds everything).
#   vm.sh run SCRIPT [ARGS]   boot the guest (building it first if needed),
#                             run SCRIPT (a file inside SK_VM_SHARE, shared
#                             read-only at the same path) as root with ARGS,
#                             stream its stdout+stderr here, power off; exit
#                             with SCRIPT's exit code
#   vm.sh clean               remove SK_VM_DIR
#
# Settings (environment):
#   SK_VM_DIR      cache and run directories (/var/tmp/slurm-k8s-vm)
#   SK_VM_SHARE    host tree shared at the same path (the repository root)
#   SK_VM_TIMEOUT  seconds for the whole run, boot included (1800); 124 after
#   SK_VM_BOOT_TIMEOUT  seconds until the guest is up (600)
#   SK_VM_MEM, SK_VM_CPUS  guest memory in MiB (2048) and vCPUs (2)
#   SK_VM_FWD      "HOSTPORT:GUESTPORT ..." TCP forwards from 127.0.0.1 of this
#                  host into the guest ("20250:10250 20080:8080"; "" for none).
#                  The guest reaches this host's 127.0.0.1 at 10.0.2.2.
#   SK_VM_ENV      names of variables to pass to SCRIPT ("" by default)
#   SK_VM_KEEP     1: keep the run directory (console log, output) on success
#
# Exit codes of run: SCRIPT's own; 124 timeout; 125 the guest did not boot,
# panicked or powered off without a result (the console log's tail is shown).
# QEMU is killed when this script ends in any way.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SK_VM_DIR="${SK_VM_DIR:-/var/tmp/slurm-k8s-vm}"
SK_VM_SHARE="${SK_VM_SHARE:-$(cd "$HERE/../.." && pwd)}"
SK_VM_TIMEOUT="${SK_VM_TIMEOUT:-1800}"
SK_VM_BOOT_TIMEOUT="${SK_VM_BOOT_TIMEOUT:-600}"
SK_VM_MEM="${SK_VM_MEM:-2048}"
SK_VM_CPUS="${SK_VM_CPUS:-2}"
SK_VM_FWD="${SK_VM_FWD-20250:10250 20080:8080}"
SK_VM_ENV="${SK_VM_ENV:-}"
SK_VM_KEEP="${SK_VM_KEEP:-0}"

# Bump when the build below changes in a way that needs a rebuild.
BUILD_REV=1
SUITE=bookworm
# Host tools.
HOST_PKGS=(qemu-system-x86 debootstrap busybox-static e2fsprogs xz-utils zstd)
# Guest packages: Slurm and munge (as in scripts/install-deps.sh); the
# runtime libraries of the -dev packages there (json-c, libuv, libcurl,
# jsoncpp, libmicrohttpd, GnuTLS, zlib, libseccomp, libyaml); the test
# harness's tools (python3 for tests/kube and the stub agent); bpftool (the
# cgroup device programs); libsubunit0 (the Check unit tests run in the
# guest: tests/vm/smoke.sh); kmod (depmod for the initramfs).
GUEST_PKGS=(
  slurmd slurmctld slurm-client munge slurm-wlm-basic-plugins
  libjson-c5 libuv1 libcurl4 libjsoncpp25 libmicrohttpd12 libgnutls30 zlib1g libseccomp2 libyaml-0-2 libstdc++6
  python3 python3-yaml openssl curl ca-certificates procps psmisc iproute2
  libsubunit0
  bpftool kmod
)
# Kernel modules the initramfs loads (with their dependencies) to reach the
# root disk, the 9p shares and the network.
INITRD_MODULES=(virtio_pci virtio_blk crc32c_generic ext4 9pnet_virtio 9p virtio_net)
TEST_USER="${TEST_USER:-k8suser}"
TEST_UID="${TEST_UID:-2001}"
GUEST_HOSTNAME=sk-vm
GUEST_OUT=/sk-vm-out           # the run directory's share, in the guest

ROOTFS="$SK_VM_DIR/rootfs"
IMAGE="$SK_VM_DIR/rootfs.img"
KERNEL="$SK_VM_DIR/vmlinuz"
INITRD="$SK_VM_DIR/initrd.img"
STAMP="$SK_VM_DIR/built"

log() { echo "[vm.sh] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
need_root() { [ "$(id -u)" = 0 ] || die "'$1' needs root"; }
first() { if [ -e "$1" ]; then echo "$1"; fi; }   # first match of a glob, or nothing

# ------------------------------------------------------------------ build --
# The host's kubectl (a static binary; the e2e in the guest, tests/vm/e2e-v2.sh,
# runs the same one as the e2e on the host).
host_kubectl() { readlink -f "$(command -v kubectl 2>/dev/null || echo /nonexistent)"; }

stamp_text() {
  local k kc=none
  k="$(host_kubectl)"
  [ -f "$k" ] && kc="$(sha256sum "$k" | cut -c1-16)"
  printf 'rev=%s suite=%s\nguest=%s\nmodules=%s\nuser=%s:%s\nkubectl=/usr/bin/kubectl:%s\n' "$BUILD_REV" "$SUITE" \
    "${GUEST_PKGS[*]}" "${INITRD_MODULES[*]}" "$TEST_USER" "$TEST_UID" "$kc"
}

is_built() {
  [ -s "$STAMP" ] && [ "$(cat "$STAMP")" = "$(stamp_text)" ] &&
    [ -s "$IMAGE" ] && [ -s "$KERNEL" ] && [ -s "$INITRD" ]
}

install_host_pkgs() {
  local p missing=()
  for p in "${HOST_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  log "installing on the host: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q \
    --no-install-recommends "${missing[@]}" >&2 \
    || { log "apt-get install failed; trying once more after apt-get update";
         apt-get -o DPkg::Lock::Timeout=600 update -q >&2;
         DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q \
           --no-install-recommends "${missing[@]}" >&2; }
}

# The system's apt sources, as one-line entries: "deb URI RELEASE COMPONENT".
host_sources() {
  # shellcheck disable=SC2016  # apt's own $(FIELD) placeholders
  apt-get indextargets --format '$(TARGET_OF) $(REPO_URI) $(RELEASE) $(COMPONENT)' \
    'Identifier: Packages' 2>/dev/null | awk '$1 == "deb" && NF == 4' | sort -u
}

# Chroot helpers: /proc mounted while packages install, unmounted after.
CHROOT_PROC=""
chroot_begin() {
  mountpoint -q "$ROOTFS/proc" || { mount -t proc proc "$ROOTFS/proc"; CHROOT_PROC="$ROOTFS/proc"; }
}
chroot_end() {
  if [ -n "$CHROOT_PROC" ]; then umount "$CHROOT_PROC" 2>/dev/null || umount -l "$CHROOT_PROC" || true; fi
  CHROOT_PROC=""
}
# rm -rf of a rootfs tree, never into a file system mounted in it (a
# build killed while /proc was mounted there).
remove_tree() {
  [ -e "$1" ] || return 0
  if mountpoint -q "$1/proc" 2>/dev/null; then umount "$1/proc" 2>/dev/null || umount -l "$1/proc"; fi
  rm -rf --one-file-system "$1"
}
in_chroot() {
  chroot "$ROOTFS" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive "$@"
}

build_rootfs() {
  local mirror t0=$SECONDS
  if [ ! -e "$ROOTFS/.sk-debootstrap-done" ]; then
    mirror="$(host_sources | awk -v s="$SUITE" '$3 == s && $4 == "main" { print $2; exit }')"
    [ -n "$mirror" ] || die "no '$SUITE main' entry in this system's apt sources (apt-get indextargets)"
    remove_tree "$ROOTFS"; mkdir -p "$SK_VM_DIR/debs"
    log "debootstrap --variant=minbase $SUITE from $mirror (the system's apt source)"
    debootstrap --variant=minbase --cache-dir="$SK_VM_DIR/debs" "$SUITE" "$ROOTFS" "$mirror" \
      > "$SK_VM_DIR/debootstrap.log" 2>&1 \
      || { tail -n 30 "$SK_VM_DIR/debootstrap.log" >&2; die "debootstrap failed (log: $SK_VM_DIR/debootstrap.log)"; }
    touch "$ROOTFS/.sk-debootstrap-done"
    log "debootstrap done ($((SECONDS - t0))s)"
  fi
  t0=$SECONDS
  # The same sources as the host (security updates included): the guest's
  # Slurm is the host's version.
  host_sources | awk '{ print "deb " $2 " " $3 " " $4 }' > "$ROOTFS/etc/apt/sources.list"
  # No daemon may start while packages install (there is no init anyway).
  printf '#!/bin/sh\nexit 101\n' > "$ROOTFS/usr/sbin/policy-rc.d"; chmod 755 "$ROOTFS/usr/sbin/policy-rc.d"
  trap chroot_end EXIT
  chroot_begin
  in_chroot apt-get -q update > "$SK_VM_DIR/apt.log" 2>&1 \
    || { tail -n 30 "$SK_VM_DIR/apt.log" >&2; die "apt-get update in the rootfs failed"; }
  in_chroot apt-get -q -y --no-install-recommends install "${GUEST_PKGS[@]}" >> "$SK_VM_DIR/apt.log" 2>&1 \
    || { tail -n 30 "$SK_VM_DIR/apt.log" >&2; die "apt-get install in the rootfs failed (log: $SK_VM_DIR/apt.log)"; }
  # Debian's kernel (linux-image-amd64 has 9p), unpacked without its
  # maintainer scripts: the image and modules only, no initramfs-tools.
  local kpkg deb kver
  kpkg="$(in_chroot apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')"
  [ -n "$kpkg" ] || die "cannot resolve linux-image-amd64"
  in_chroot sh -c "cd /tmp && apt-get -q download $kpkg" >> "$SK_VM_DIR/apt.log" 2>&1 || true
  deb="$(first "$ROOTFS"/tmp/"${kpkg}"_*.deb)"
  [ -f "$deb" ] || die "apt-get download $kpkg failed (log: $SK_VM_DIR/apt.log)"
  # Into a scratch directory first: dpkg-deb -x would replace the rootfs's
  # /lib -> usr/lib symlink by a directory.
  local kx="$SK_VM_DIR/kernel.x"
  rm -rf "$kx" "$ROOTFS"/usr/lib/modules/*; mkdir -p "$kx" "$ROOTFS/usr/lib/modules"
  dpkg-deb -x "$deb" "$kx"
  rm -f "$deb"
  kver="$(first "$kx"/lib/modules/*)"; kver="${kver##*/}"
  if [ -z "$kver" ] || [ ! -f "$kx/boot/vmlinuz-$kver" ]; then die "no kernel in $kpkg"; fi
  mv "$kx/lib/modules/$kver" "$ROOTFS/usr/lib/modules/"
  cp "$kx/boot/vmlinuz-$kver" "$kx/boot/config-$kver" "$ROOTFS/boot/"
  rm -rf "$kx"
  # Drop what a headless VM never loads (sound, GPU, wireless, media, ...).
  local d
  for d in sound drivers/gpu drivers/media drivers/net/wireless drivers/infiniband \
           drivers/staging drivers/bluetooth drivers/iio drivers/usb drivers/hid \
           drivers/input drivers/isdn drivers/mmc drivers/mtd drivers/net/ethernet \
           drivers/scsi drivers/hwmon net/wireless net/mac80211 net/bluetooth; do
    rm -rf "$ROOTFS/lib/modules/$kver/kernel/$d"
  done
  in_chroot depmod "$kver"
  cp "$ROOTFS/boot/vmlinuz-$kver" "$KERNEL.new" && mv -f "$KERNEL.new" "$KERNEL"
  in_chroot apt-get -q clean
  chroot_end; trap - EXIT
  # The test user (cluster.sh install makes the same one on a host), the
  # host name, the mount point of the run directory, busybox for poweroff.
  if ! in_chroot id -u "$TEST_USER" >/dev/null 2>&1; then
    in_chroot useradd -m -u "$TEST_UID" -s /bin/bash "$TEST_USER"
  fi
  echo "$GUEST_HOSTNAME" > "$ROOTFS/etc/hostname"
  printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' \
    "$GUEST_HOSTNAME" > "$ROOTFS/etc/hosts"
  mkdir -p "$ROOTFS$GUEST_OUT" "$ROOTFS/opt/sk-vm"
  install -m 755 /bin/busybox "$ROOTFS/opt/sk-vm/busybox"
  local k
  k="$(host_kubectl)"
  if [ -f "$k" ]; then rm -f "$ROOTFS/usr/local/bin/kubectl"; install -m 755 "$k" "$ROOTFS/usr/bin/kubectl"; else rm -f "$ROOTFS/usr/bin/kubectl"; fi
  log "guest packages and kernel $kver ($((SECONDS - t0))s)"
}

# The modules (relative paths under lib/modules/KVER) to load for $@, each
# after its dependencies; builtin ones are skipped.
module_closure() {
  local kdir="$1"; shift
  local m line path deps i
  local -A seen=()
  for m in "$@"; do
    line="$(awk -v m="${m//-/_}" '{ n = $1; sub(/:$/, "", n); sub(/.*\//, "", n); sub(/\.ko.*/, "", n);
              gsub(/-/, "_", n); if (n == m) { print; exit } }' "$kdir/modules.dep")"
    if [ -z "$line" ]; then
      grep -q "/${m//_/[_-]}\.ko" "$kdir/modules.builtin" || die "module $m: neither in modules.dep nor builtin"
      continue
    fi
    path="${line%%:*}"
    read -r -a deps <<<"${line#*:}"
    for ((i = ${#deps[@]} - 1; i >= 0; i--)); do
      [ -n "${seen[${deps[i]}]:-}" ] || { seen[${deps[i]}]=1; echo "${deps[i]}"; }
    done
    [ -n "${seen[$path]:-}" ] || { seen[$path]=1; echo "$path"; }
  done
}

build_initrd() {
  local kver kdir t p name
  kver="$(first "$ROOTFS"/lib/modules/*)"; kver="${kver##*/}"; kdir="$ROOTFS/lib/modules/$kver"
  t="$(mktemp -d "$SK_VM_DIR/initrd.XXXXXX")"
  mkdir -p "$t"/{bin,dev,proc,sys,newroot,modules}
  install -m 755 /bin/busybox "$t/bin/busybox"
  : > "$t/modules.list"
  while read -r p; do
    name="$(basename "$p")"
    case "$name" in
      *.ko.xz)  xz -dc "$kdir/$p" > "$t/modules/${name%.xz}"; name="${name%.xz}" ;;
      *.ko.zst) zstd -qdc "$kdir/$p" > "$t/modules/${name%.zst}"; name="${name%.zst}" ;;
      *.ko.gz)  gzip -dc "$kdir/$p" > "$t/modules/${name%.gz}"; name="${name%.gz}" ;;
      *)        cp "$kdir/$p" "$t/modules/$name" ;;
    esac
    echo "$name" >> "$t/modules.list"
  done < <(module_closure "$kdir" "${INITRD_MODULES[@]}")
  write_init > "$t/init"; chmod 755 "$t/init"
  ( cd "$t" && find . | sort | /bin/busybox cpio -o -H newc 2>/dev/null ) | gzip -1 > "$INITRD.new"
  mv -f "$INITRD.new" "$INITRD"
  log "initramfs: busybox and $(wc -l < "$t/modules.list") modules ($(paste -sd' ' "$t/modules.list"))"
  rm -rf "$t"
}

# PID 1 of the initramfs: load the modules, mount the root disk and the two
# 9p shares (the source tree read-only at its own path, the run directory at
# GUEST_OUT), configure the network, and switch to the rootfs, where this
# script's guest-init continues (from the share, so it needs no rebuild).
write_init() {
  cat <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
fail() { echo "sk-vm: BOOT FAILED: $*"; sleep 1; poweroff -f; sleep 10; }
echo "sk-vm: initramfs at $(cut -d' ' -f1 /proc/uptime)s"
for m in $(cat /modules.list); do insmod "/modules/$m" || echo "sk-vm: insmod $m failed"; done
share=""; out=""
for a in $(cat /proc/cmdline); do
  case "$a" in sk.share=*) share="${a#sk.share=}" ;; sk.out=*) out="${a#sk.out=}" ;; esac
done
[ -n "$share" ] && [ -n "$out" ] || fail "no sk.share= or sk.out= on the kernel command line"
i=0; while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
mount -t ext4 /dev/vda /newroot || fail "mount of the root disk /dev/vda"
mkdir -p "/newroot$share" "/newroot$out"
o=trans=virtio,version=9p2000.L,msize=262144
mount -t 9p -o "$o,ro,cache=loose" sk_share "/newroot$share" || fail "9p mount of sk_share at $share"
mount -t 9p -o "$o" sk_out "/newroot$out" || fail "9p mount of sk_out at $out"
ip link set lo up
ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 && ip route add default via 10.0.2.2 \
  || echo "sk-vm: WARNING: no network (eth0)"
echo "nameserver 10.0.2.3" > /newroot/etc/resolv.conf
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /bin/bash "$share/tests/vm/vm.sh" guest-init "$share" "$out"
fail "switch_root"
EOF
}

cmd_build() {
  need_root build
  local force=0 t0=$SECONDS
  [ "${1:-}" = --force ] && force=1
  install_host_pkgs
  if [ "$force" = 0 ] && is_built; then
    log "guest is built and cached in $SK_VM_DIR ($((SECONDS - t0))s)"
    return 0
  fi
  mkdir -p "$SK_VM_DIR"
  exec 9> "$SK_VM_DIR/build.lock"
  flock -w 3600 9 || die "another build holds $SK_VM_DIR/build.lock"
  if [ "$force" = 1 ]; then remove_tree "$ROOTFS"; rm -f "$STAMP"; fi
  rm -f "$STAMP"
  build_rootfs
  build_initrd
  local mb t1=$SECONDS
  mb="$(du -sm --exclude=./proc "$ROOTFS" | cut -f1)"
  # snapshot=on at run time: the image itself never changes.
  rm -f "$IMAGE.new"
  mke2fs -q -F -t ext4 -L sk-vm-root -d "$ROOTFS" "$IMAGE.new" "$((mb + 1024))M" \
    || die "mke2fs -d failed"
  mv -f "$IMAGE.new" "$IMAGE"
  log "rootfs image: $((mb + 1024)) MiB, ${mb} MiB used ($((SECONDS - t1))s)"
  stamp_text > "$STAMP"
  log "built in $((SECONDS - t0))s: $KERNEL $INITRD $IMAGE"
}

# -------------------------------------------------------------------- run --
QEMU_PID=""; TAIL_PID=""
stop_qemu() {
  local i
  if [ -n "$QEMU_PID" ] && kill -0 "$QEMU_PID" 2>/dev/null; then
    kill -TERM "$QEMU_PID" 2>/dev/null || true
    for ((i = 0; i < 30; i++)); do kill -0 "$QEMU_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$QEMU_PID" 2>/dev/null || true
    wait "$QEMU_PID" 2>/dev/null || true
  fi
  QEMU_PID=""
  if [ -n "$TAIL_PID" ]; then kill "$TAIL_PID" 2>/dev/null || true; wait "$TAIL_PID" 2>/dev/null || true; fi
  TAIL_PID=""
}

console_tail() {
  log "--- last lines of the guest console ($1)"
  tail -n "${2:-40}" "$1" | sed 's/^/  | /' >&2 || true
}

cmd_run() {
  need_root run
  [ $# -ge 1 ] || die "usage: vm.sh run SCRIPT [ARGS]"
  local script share t0=$SECONDS
  share="$(realpath "$SK_VM_SHARE")"
  script="$(realpath -m "$1")"; shift
  case "$script" in "$share"/*) ;; *) die "$script is not inside the shared tree $share" ;; esac
  [ -f "$script" ] || die "no such file: $script"
  is_built || cmd_build
  command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing (run: vm.sh build)"

  mkdir -p "$SK_VM_DIR/runs"
  # Run directories kept after a failure go after a day.
  find "$SK_VM_DIR/runs" -mindepth 1 -maxdepth 1 -name 'run.*' -mtime +0 -exec rm -rf {} + 2>/dev/null || true
  local run; run="$(mktemp -d "$SK_VM_DIR/runs/run.XXXXXX")"
  mkdir -p "$run/out"; chmod 755 "$run" "$run/out"
  {
    printf 'SK_VM_SCRIPT=%q\n' "$script"
    printf 'SK_VM_ARGS=('; [ $# -eq 0 ] || printf '%q ' "$@"; printf ')\n'
    printf 'SK_VM_ENVS=()\n'
    local v
    for v in $SK_VM_ENV; do
      [[ $v =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || die "SK_VM_ENV: bad name '$v'"
      [ -z "${!v+x}" ] || printf 'SK_VM_ENVS+=(%q)\n' "$v=${!v}"
    done
  } > "$run/out/job"
  : > "$run/out/output"

  local fwd="" f
  for f in $SK_VM_FWD; do
    [[ $f =~ ^[0-9]+:[0-9]+$ ]] || die "SK_VM_FWD: '$f' is not HOSTPORT:GUESTPORT"
    fwd="$fwd,hostfwd=tcp:127.0.0.1:${f%%:*}-:${f##*:}"
  done
  local append="console=ttyS0 panic=-1 loglevel=4 cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1"
  append="$append sk.share=$share sk.out=$GUEST_OUT"

  trap 'stop_qemu' EXIT
  trap 'log "interrupted"; stop_qemu; exit 130' INT
  trap 'log "terminated"; stop_qemu; exit 143' TERM HUP
  log "booting (TCG, ${SK_VM_CPUS} vCPU, ${SK_VM_MEM} MiB; run dir $run)"
  qemu-system-x86_64 -name sk-vm -machine q35 -accel tcg,thread=multi -cpu max \
    -smp "$SK_VM_CPUS" -m "$SK_VM_MEM" -nodefaults -no-user-config -display none \
    -monitor none -no-reboot \
    -kernel "$KERNEL" -initrd "$INITRD" -append "$append" \
    -serial "file:$run/console.log" \
    -drive "file=$IMAGE,if=virtio,format=raw,snapshot=on,cache=unsafe" \
    -virtfs "local,path=$share,mount_tag=sk_share,security_model=none,readonly=on" \
    -virtfs "local,path=$run/out,mount_tag=sk_out,security_model=none" \
    -netdev "user,id=n0$fwd" -device virtio-net-pci,netdev=n0,romfile= \
    </dev/null >"$run/qemu.log" 2>&1 &
  QEMU_PID=$!
  tail -n +1 -F --pid="$QEMU_PID" "$run/out/output" 2>/dev/null &
  TAIL_PID=$!

  local state=boot booted_at="" why="" rc=""
  while kill -0 "$QEMU_PID" 2>/dev/null; do
    if [ "$state" = boot ] && grep -q '^sk-vm: guest ready' "$run/console.log" 2>/dev/null; then
      state=script; booted_at=$SECONDS
      log "guest up in $((SECONDS - t0))s; running $script"
    fi
    if grep -q -e 'Kernel panic' -e '^sk-vm: BOOT FAILED' "$run/console.log" 2>/dev/null; then
      sleep 1
      why="the guest failed: $(grep -m1 -e 'Kernel panic' -e '^sk-vm: BOOT FAILED' "$run/console.log" | tr -d '\r')"
      break
    fi
    if [ -s "$run/out/rc" ] && [ "$state" != ended ]; then state=ended; rc_at=$SECONDS; fi
    if [ "$state" = ended ] && [ $((SECONDS - rc_at)) -gt 60 ]; then
      log "WARNING: the guest did not power off 60s after the script ended"; break
    fi
    if [ "$state" = boot ] && [ $((SECONDS - t0)) -ge "$SK_VM_BOOT_TIMEOUT" ]; then
      why="the guest did not come up within SK_VM_BOOT_TIMEOUT=${SK_VM_BOOT_TIMEOUT}s"; break
    fi
    if [ $((SECONDS - t0)) -ge "$SK_VM_TIMEOUT" ]; then
      why="timeout: SK_VM_TIMEOUT=${SK_VM_TIMEOUT}s passed"; break
    fi
    sleep 0.5
  done
  local qemu_alive=0
  kill -0 "$QEMU_PID" 2>/dev/null && qemu_alive=1
  if [ "$qemu_alive" = 1 ]; then
    stop_qemu
  else
    wait "$QEMU_PID" 2>/dev/null || true; QEMU_PID=""
    wait "$TAIL_PID" 2>/dev/null || true; TAIL_PID=""
  fi
  trap - EXIT INT TERM HUP
  [ -s "$run/out/rc" ] && rc="$(tr -dc '0-9' < "$run/out/rc")"
  # The script's checks as records of the one result protocol
  # (tests/lib/report.sh): written in the guest to the run directory, added
  # to the caller's result file here.
  if [ -n "${SK_RESULT_FILE:-}" ] && [ -s "$run/out/results.tap" ]; then
    cat "$run/out/results.tap" >>"$SK_RESULT_FILE"
  fi
  if [ -n "$rc" ] && [ -z "$why" ]; then
    log "script exited $rc after $((SECONDS - ${booted_at:-$t0}))s; total $((SECONDS - t0))s"
    if [ "$rc" = 0 ] && [ "$SK_VM_KEEP" != 1 ]; then rm -rf "$run"; else log "run dir kept: $run"; fi
    exit "$rc"
  fi
  if [ -z "$why" ]; then
    if grep -q 'Kernel panic' "$run/console.log" 2>/dev/null; then
      why="the guest kernel panicked: $(grep -m1 'Kernel panic' "$run/console.log" | tr -d '\r')"
    elif [ -s "$run/qemu.log" ]; then why="QEMU exited: $(head -c 500 "$run/qemu.log")"
    else why="the guest powered off without a result"; fi
  fi
  log "ERROR: $why"
  console_tail "$run/console.log"
  log "run dir kept: $run"
  if [[ $why == timeout* ]]; then exit 124; fi
  exit 125
}

# ------------------------------------------------------------- guest side --
# PID 1 in the guest, after switch_root (bash, from the share): mount the
# kernel file systems (cgroup2 as systemd mounts it), run the job, write its
# exit code into the run directory, power off.  It must never exit.
guest_init() {
  local share="$1" out="$2"
  set +e
  export PATH=/usr/sbin:/usr/bin:/sbin:/bin
  mount -t proc -o nosuid,nodev,noexec proc /proc
  mount -t sysfs -o nosuid,nodev,noexec sysfs /sys
  mkdir -p /dev/pts /dev/shm
  # What udev would add to devtmpfs (bash's <(...) needs /dev/fd).
  ln -sfn /proc/self/fd /dev/fd
  ln -sf /proc/self/fd/0 /dev/stdin; ln -sf /proc/self/fd/1 /dev/stdout; ln -sf /proc/self/fd/2 /dev/stderr
  mount -t devpts -o gid=5,mode=620,ptmxmode=000 devpts /dev/pts
  mount -t tmpfs -o nosuid,nodev tmpfs /dev/shm
  mount -t tmpfs -o nosuid,nodev,mode=755 tmpfs /run
  mount -t cgroup2 -o nosuid,nodev,noexec,nsdelegate,memory_recursiveprot cgroup2 /sys/fs/cgroup
  mount -t bpf -o nosuid,nodev,noexec,mode=700 bpf /sys/fs/bpf 2>/dev/null
  hostname -F /etc/hostname
  local SK_VM_SCRIPT="" SK_VM_ARGS=() SK_VM_ENVS=()
  # shellcheck disable=SC1090,SC1091
  . "$out/job"
  echo "sk-vm: guest ready at $(cut -d' ' -f1 /proc/uptime)s (cgroup: $(tr '\n' ' ' < /proc/self/cgroup))"
  local cmd=(bash "$SK_VM_SCRIPT")
  [ -x "$SK_VM_SCRIPT" ] && cmd=("$SK_VM_SCRIPT")
  ( cd "$share" && exec setsid env -i PATH="$PATH" HOME=/root LANG=C.UTF-8 TERM=dumb SK_VM=1 \
      SK_VM_OUT="$out" SK_RESULT_FILE="$out/results.tap" "${SK_VM_ENVS[@]}" "${cmd[@]}" "${SK_VM_ARGS[@]}" ) </dev/null >>"$out/output" 2>&1 &
  wait $!
  local rc=$?
  echo "sk-vm: script exited $rc at $(cut -d' ' -f1 /proc/uptime)s"
  echo "$rc" > "$out/rc.tmp" && mv -f "$out/rc.tmp" "$out/rc"
  kill -TERM -1 2>/dev/null; sleep 1; kill -KILL -1 2>/dev/null
  sync
  umount "$out" 2>/dev/null
  echo "sk-vm: power off"
  /opt/sk-vm/busybox poweroff -f
  while :; do sleep 100; done
}

case "${1:-}" in
  build)      shift; cmd_build "$@" ;;
  run)        shift; cmd_run "$@" ;;
  clean)      need_root clean; remove_tree "$ROOTFS"; rm -rf "${SK_VM_DIR:?}"; log "removed $SK_VM_DIR" ;;
  guest-init) shift; guest_init "$@" ;;
  *)          sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0" >&2; exit 2 ;;
esac
