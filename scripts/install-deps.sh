#!/usr/bin/env bash
# Installs every Debian package slurm-k8s needs to build, test and run its
# scenario. Idempotent; needs root. Set SKIP_APT_UPDATE=1 to skip `apt-get update`.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "install-deps.sh: run as root (apt-get needs it)" >&2; exit 1; }

PKGS=(
  # build
  build-essential g++ autoconf automake libtool pkg-config make
  # libraries
  libjson-c-dev libuv1-dev libcurl4-openssl-dev libjsoncpp-dev libmicrohttpd-dev libgnutls28-dev zlib1g-dev libseccomp-dev libyaml-dev check
  libslurm-dev
  # real Slurm for the integration layer
  slurm-wlm slurmd slurmctld slurm-client munge slurm-wlm-basic-plugins
  # test harness: test API server, certificates, tools (python3-yaml: the e2e
  # reads etc/rbac-node-identity.yaml)
  python3 python3-yaml openssl curl procps psmisc iproute2 ca-certificates
  # a real gRPC server for the shim's grpc probes (grpc.health.v1)
  python3-grpcio
  # an HTTP/2 front for the test API server (kube-apiserver speaks HTTP/2,
  # the test server HTTP/1.1): the agent's connection sharing is tested and
  # measured through it
  nghttp2-proxy
  # the podman runtime (k8s-shim/podman.h): rootless podman with runc, and
  # the harness's images (buildah, busybox-static) in a loopback registry
  podman runc uidmap slirp4netns catatonit buildah docker-registry busybox-static apache2-utils
  # the node's image store (agent/images/image_store.h): the jobs' podman
  # reads it through fuse-overlayfs
  fuse-overlayfs
  # each pod's own network (agent/network/pod_network.h): the standard CNI
  # plugins (bridge, host-local, portmap), whose ipMasq and portmap write
  # iptables rules
  containernetworking-plugins iptables
  # the online-RL example: its policy (numpy) and its reward curve (matplotlib)
  python3-numpy python3-matplotlib
  # fuzzing (libFuzzer + sanitizer runtimes) and `make lint`
  clang libclang-rt-dev clang-tidy cppcheck bear
  # make format-check
  clang-format
)

# apt would try to start munge/slurmd/slurmctld on a systemd host with no
# config; block service starts during the install (only if no policy exists).
tmp_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod 755 /usr/sbin/policy-rc.d
  tmp_policy=1
fi
trap '[ "$tmp_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d' EXIT

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# kubectl: use the one on PATH; Debian's kubernetes-client only when there is none.
command -v kubectl >/dev/null 2>&1 || missing+=(kubernetes-client)

if [ "${#missing[@]}" -gt 0 ]; then
  [ "${SKIP_APT_UPDATE:-0}" = 1 ] || apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# fuse-overlayfs runs as the job's user: /dev/fuse must be open to all, as
# udev makes it on a booted Debian (a container or chroot may lack the rule).
if [ -c /dev/fuse ] && [ "$(stat -c %a /dev/fuse)" != 666 ]; then
  chmod 666 /dev/fuse
fi
echo "install-deps.sh: all packages present"
