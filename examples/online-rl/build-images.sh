#!/usr/bin/env bash
# The online-RL example's service images, built offline from this machine's
# Debian packages and pushed to a registry:
#
#   build-images.sh REGISTRY [--tls-verify=false] [--root DIR]
#
#   REGISTRY/rl/rollout:1.0   ENTRYPOINT ["python3", "/app/rollout.py"]
#   REGISTRY/rl/reward:1.0    ENTRYPOINT ["python3", "/app/reward.py"]
#
# Both hold python3 (python3.11-minimal, libpython3.11-stdlib) and numpy
# (python3-numpy), the shared libraries they link (ldd, BLAS and LAPACK
# included), and the example's rollout.py, reward.py and rlcore.py in /app
# (WorkingDir); Env PATH=/usr/bin:/bin, PYTHONUNBUFFERED=1 (log lines as they
# are printed), PYTHONDONTWRITEBYTECODE=1 (the image is read-only to the
# job's user). What a site with access to a public registry writes as
# "FROM debian:12-slim; apt-get install python3-numpy; COPY *.py /app/",
# without fetching anything. Pods start them by their ENTRYPOINT
# (rollout-image.yaml, reward-image.yaml).
#
# Needs root and buildah (its own storage under --root, default a temporary
# directory removed at exit). --tls-verify=false for a plain-HTTP registry
# such as the harness's on loopback. Prints the two image names.
set -euo pipefail

die() { echo "build-images.sh: $*" >&2; exit 1; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
reg="" tls=() root=""
while [ $# -gt 0 ]; do
  case $1 in
    --tls-verify=*) tls=("$1"); shift ;;
    --root) root=$2; shift 2 ;;
    -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
    -*) die "unknown option $1" ;;
    *) [ -z "$reg" ] || die "one registry only (got $reg and $1)"; reg=$1; shift ;;
  esac
done
[ -n "$reg" ] || die "usage: build-images.sh REGISTRY [--tls-verify=false] [--root DIR]"
[ "$(id -u)" = 0 ] || die "run as root (buildah with a storage of its own)"
command -v buildah >/dev/null || die "buildah is not installed (scripts/install-deps.sh)"
pkgs=(python3-minimal python3.11-minimal libpython3.11-minimal libpython3.11-stdlib python3-numpy)
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || die "the Debian package $p is not installed (scripts/install-deps.sh)"
done

work=$(mktemp -d)
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
if [ -z "$root" ]; then root="$work/storage"; fi
b=(buildah --root "$root/root" --runroot "$root/run" --storage-driver vfs)
fs="$work/rootfs"

# A merged-/usr layout as Debian 12's, so that every path a package or ldd
# names (/lib/..., /usr/lib/...) is the same file.
mkdir -p "$fs/usr/bin" "$fs/usr/lib" "$fs/usr/lib64" "$fs/etc" "$fs/tmp" "$fs/app"
ln -s usr/bin "$fs/bin"; ln -s usr/lib "$fs/lib"; ln -s usr/lib64 "$fs/lib64"
chmod 1777 "$fs/tmp"

# add PATH: the file at PATH on this machine, at the same path in the image,
# symlinks kept as symlinks (their targets are added too when packaged).
add() {
  local f=$1
  [ -e "$fs$f" ] || [ -L "$fs$f" ] && return 0
  mkdir -p "$fs$(dirname "$f")"
  cp -a "$f" "$fs$f"
}
# The packages' files, without documentation and numpy's own test suites.
while read -r f; do
  case $f in /usr/share/* | */tests/* | */tests) continue ;; esac
  if [ -L "$f" ] || [ -f "$f" ]; then add "$f"; fi
done < <(dpkg -L "${pkgs[@]}" | sort -u)

# The shared libraries of every ELF file added, as the dynamic loader finds
# them here (a library reached through a symlink, e.g. BLAS through
# /etc/alternatives, is copied as the file it resolves to, at the name ldd
# gives).
elfs=$(find "$fs" -type f \( -name '*.so*' -o -path "$fs/usr/bin/*" \) -exec sh -c \
  'for f; do if [ "$(head -c 4 "$f" | od -An -c | tr -d " ")" = "177ELF" ]; then echo "$f"; fi; done' _ {} +)
libs=$(for f in $elfs; do ldd "$f" 2>/dev/null || true; done \
  | sed -nE 's#.*=> (/[^ ]+) .*#\1#p; s#^[[:space:]]*(/[^ ]+) \(0x.*#\1#p' | sort -u)
for l in $libs; do
  [ -e "$fs$l" ] && continue
  mkdir -p "$fs$(dirname "$l")"
  cp -L "$l" "$fs$l"
done
printf '/usr/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu\n' >"$fs/etc/ld.so.conf"
ldconfig -r "$fs" 2>/dev/null || die "ldconfig -r $fs failed"
# The image must start python and numpy on its own: checked in a chroot
# before it is pushed (a library missing here would be a CrashLoopBackOff
# there).
chroot "$fs" /usr/bin/python3 -c 'import numpy, http.server, urllib.request, json, hashlib' \
  || die "python3 with numpy does not start in the image's files ($fs)"

install -m 644 "$here/rollout.py" "$here/reward.py" "$here/rlcore.py" "$fs/app/"

c="$("${b[@]}" from scratch)"
"${b[@]}" copy "$c" "$fs/" / >/dev/null
"${b[@]}" config --env PATH=/usr/bin:/bin --env PYTHONUNBUFFERED=1 --env PYTHONDONTWRITEBYTECODE=1 \
  --workingdir /app --label org.opencontainers.image.title="slurm-k8s online-RL example" "$c"
"${b[@]}" commit -q "$c" "$reg/rl/base:1.0" >/dev/null
"${b[@]}" rm "$c" >/dev/null
for svc in rollout reward; do
  c="$("${b[@]}" from "$reg/rl/base:1.0")"
  "${b[@]}" config --entrypoint "[\"python3\", \"/app/$svc.py\"]" --cmd '[]' "$c"
  "${b[@]}" commit -q "$c" "$reg/rl/$svc:1.0" >/dev/null
  "${b[@]}" rm "$c" >/dev/null
  "${b[@]}" push -q "${tls[@]}" "$reg/rl/$svc:1.0" >/dev/null
  echo "$reg/rl/$svc:1.0"
done
