#!/usr/bin/env bash
# The test images and the registry they are pulled from, all on this machine:
# Debian's docker-registry on loopback, images built offline with buildah from
# busybox-static (nothing is fetched from outside). Needs root (buildah with a
# storage of its own under DIR).
#
#   registry.sh start DIR PORT   serve DIR/data on 127.0.0.1:PORT; build and
#                                push the images (prints the registry's host:port)
#   registry.sh stop DIR         stop the registry, remove DIR
#
# Images (127.0.0.1:PORT/...):
#   e2e/busybox:1   ENTRYPOINT ["/bin/entry"] (prints "entry: ARGS" and execs
#                   them), CMD ["echo", "default-cmd"], Env IMGVAR=fromimage,
#                   PATH=/bin, WorkingDir /srv; busybox's applets in /bin
#   e2e/busybox:latest  the same image (pull policy Always by default)
set -euo pipefail

die() { echo "registry.sh: $*" >&2; exit 1; }

cmd_start() {
  local dir="$1" port="$2" i
  mkdir -p "$dir/data"
  cat >"$dir/config.yml" <<CONF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $dir/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
CONF
  command -v docker-registry >/dev/null || die "docker-registry is not installed (scripts/install-deps.sh)"
  docker-registry serve "$dir/config.yml" >"$dir/registry.log" 2>&1 &
  echo $! >"$dir/registry.pid"
  for i in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 && break
    kill -0 "$(cat "$dir/registry.pid")" 2>/dev/null || die "docker-registry exited: $(tail -3 "$dir/registry.log")"
    [ "$i" = 100 ] && die "docker-registry does not answer on 127.0.0.1:$port"
    sleep 0.1
  done
  build "$dir" "127.0.0.1:$port"
  echo "127.0.0.1:$port"
}

build() {
  local dir="$1" reg="$2" b root c a
  b=(buildah --root "$dir/buildah" --runroot "$dir/buildah-run" --storage-driver vfs)
  root="$dir/rootfs"
  rm -rf "$root"
  mkdir -p "$root/bin" "$root/srv" "$root/tmp" "$root/etc"
  chmod 1777 "$root/tmp"
  cp /bin/busybox "$root/bin/busybox"
  for a in $(/bin/busybox --list); do
    [ -e "$root/bin/$a" ] || ln -s busybox "$root/bin/$a"
  done
  printf '#!/bin/sh\necho "entry: $*"\nexec "$@"\n' >"$root/bin/entry"
  chmod 755 "$root/bin/entry"
  echo "root:x:0:0:root:/root:/bin/sh" >"$root/etc/passwd"
  echo "root:x:0:" >"$root/etc/group"
  c="$("${b[@]}" from scratch)"
  "${b[@]}" copy "$c" "$root/" / >/dev/null
  "${b[@]}" config --entrypoint '["/bin/entry"]' --cmd '["echo", "default-cmd"]' \
    --env IMGVAR=fromimage --env PATH=/bin --workingdir /srv "$c"
  "${b[@]}" commit -q "$c" "$reg/e2e/busybox:1" >/dev/null
  "${b[@]}" rm "$c" >/dev/null
  "${b[@]}" push -q --tls-verify=false "$reg/e2e/busybox:1" >/dev/null
  "${b[@]}" tag "$reg/e2e/busybox:1" "$reg/e2e/busybox:latest"
  "${b[@]}" push -q --tls-verify=false "$reg/e2e/busybox:latest" >/dev/null
}

cmd_stop() {
  local dir="$1" pid
  pid="$(cat "$dir/registry.pid" 2>/dev/null || true)"
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && { for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done; }
  rm -rf "$dir"
}

case "${1:-}" in
  start) [ $# = 3 ] || die "usage: registry.sh start DIR PORT"; cmd_start "$2" "$3" ;;
  stop) [ $# = 2 ] || die "usage: registry.sh stop DIR"; cmd_stop "$2" ;;
  *) die "usage: registry.sh start DIR PORT | stop DIR" ;;
esac
