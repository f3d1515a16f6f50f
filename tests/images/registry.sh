#!/usr/bin/env bash
# The test images and the registry they are pulled from, all on this machine:
# Debian's docker-registry on loopback, images built offline with buildah from
# busybox-static (nothing is fetched from outside). Needs root (buildah with a
# storage of its own under DIR).
#
#   registry.sh start DIR PORT [ADDR]  serve DIR/data on ADDR:PORT (default
#                                127.0.0.1), and a second registry on
#                                ADDR:PORT+1 that asks for a login (user e2e,
#                                password s3cret: htpasswd); build the images
#                                and push them to both
#   registry.sh stop DIR         stop the registries, remove DIR
#
# Images (ADDR:PORT/...):
#   e2e/busybox:1   ENTRYPOINT ["/bin/entry"] (prints "entry: ARGS" and execs
#                   them), CMD ["echo", "default-cmd"], Env IMGVAR=fromimage,
#                   PATH=/bin, WorkingDir /srv; busybox's applets in /bin
#   e2e/busybox:latest  the same image (pull policy Always by default)
#   e2e/busybox-user:1  the same image with USER 1234:1234
#   e2e/private:1 (on PORT+1 only)  the same image, behind the login
#   e2e/store:1, e2e/store:2  e2e/busybox:1 and e2e/busybox-user:1 again, for
#                   e2e image_store alone (its registry log counts their pulls)
#   e2e/notimage:1  a manifest whose layer is not a tar archive (text): an
#                   image that is not an image
#   slurm-k8s/vllm-standin:1  e2e/busybox:1 with examples/vllm/standin/vllm in
#                   /usr/local/bin, no entrypoint (examples/vllm/README.md)
set -euo pipefail

die() { echo "registry.sh: $*" >&2; exit 1; }

# serve DIR NAME ADDR PORT [AUTH]: one docker-registry on ADDR:PORT, its data
# in DIR/NAME, asking for htpasswd logins when AUTH is given.
serve() {
  local dir="$1" name="$2" addr="$3" port="$4" auth="${5:-}" i
  mkdir -p "$dir/$name"
  {
    printf 'version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\n' "$dir/$name"
    printf '  delete:\n    enabled: true\nhttp:\n  addr: %s:%s\n' "$addr" "$port"
    [ -z "$auth" ] || printf 'auth:\n  htpasswd:\n    realm: e2e\n    path: %s\n' "$auth"
  } >"$dir/$name.yml"
  docker-registry serve "$dir/$name.yml" >"$dir/$name.log" 2>&1 &
  echo $! >"$dir/$name.pid"
  for i in $(seq 1 100); do
    # 200, or 401 from the one that asks for a login: it answers.
    case "$(curl -sS -o /dev/null -w '%{http_code}' "http://$addr:$port/v2/" 2>/dev/null)" in
      200 | 401) return 0 ;;
    esac
    kill -0 "$(cat "$dir/$name.pid")" 2>/dev/null || die "docker-registry exited: $(tail -3 "$dir/$name.log")"
    sleep 0.1
  done
  die "docker-registry does not answer on $addr:$port"
}

cmd_start() {
  local dir="$1" port="$2" addr="${3:-127.0.0.1}"
  command -v docker-registry >/dev/null || die "docker-registry is not installed (scripts/install-deps.sh)"
  command -v htpasswd >/dev/null || die "htpasswd is not installed (apache2-utils: scripts/install-deps.sh)"
  mkdir -p "$dir"
  htpasswd -Bbc "$dir/htpasswd" e2e s3cret 2>/dev/null
  serve "$dir" registry "$addr" "$port"
  serve "$dir" registry-auth "$addr" "$((port + 1))" "$dir/htpasswd"
  build "$dir" "$addr:$port" "$addr:$((port + 1))"
  echo "$addr:$port"
}

build() {
  local dir="$1" reg="$2" auth_reg="$3" b root c a
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
  # The same with USER 1234: the pod still runs as the job's uid.
  c="$("${b[@]}" from "$reg/e2e/busybox:1")"
  "${b[@]}" config --user 1234:1234 "$c"
  "${b[@]}" commit -q "$c" "$reg/e2e/busybox-user:1" >/dev/null
  "${b[@]}" rm "$c" >/dev/null
  "${b[@]}" push -q --tls-verify=false "$reg/e2e/busybox-user:1" >/dev/null
  "${b[@]}" push -q --tls-verify=false --creds e2e:s3cret "$reg/e2e/busybox:1" \
    "docker://$auth_reg/e2e/private:1" >/dev/null
  # e2e image_store's own images: pulled by that case alone.
  "${b[@]}" push -q --tls-verify=false "$reg/e2e/busybox:1" "docker://$reg/e2e/store:1" >/dev/null
  "${b[@]}" push -q --tls-verify=false "$reg/e2e/busybox-user:1" "docker://$reg/e2e/store:2" >/dev/null
  # The vLLM stand-in, as standin/Containerfile builds it (from this busybox).
  c="$("${b[@]}" from "$reg/e2e/busybox:1")"
  "${b[@]}" copy --chmod 755 "$c" "$(dirname "$0")/../../examples/vllm/standin/vllm" /usr/local/bin/vllm >/dev/null
  "${b[@]}" config --cmd '' "$c"
  "${b[@]}" config --entrypoint '[]' --env PATH=/usr/local/bin:/bin "$c"
  "${b[@]}" commit -q "$c" "$reg/slurm-k8s/vllm-standin:1" >/dev/null
  "${b[@]}" rm "$c" >/dev/null
  "${b[@]}" push -q --tls-verify=false "$reg/slurm-k8s/vllm-standin:1" >/dev/null
  push_not_an_image "$dir" "$reg"
}

# put_blob REG NAME FILE: uploads FILE as a blob of repository NAME (the
# registry API: POST an upload, PUT its content with the digest); prints the
# digest.
put_blob() {
  local reg="$1" name="$2" file="$3" digest loc
  digest="sha256:$(sha256sum "$file" | cut -d' ' -f1)"
  loc="$(curl -sS -o /dev/null -D - -X POST "http://$reg/v2/$name/blobs/uploads/" \
    | tr -d '\r' | sed -n 's/^[Ll]ocation: //p')"
  [ -n "$loc" ] || die "no upload location from $reg for $name"
  case $loc in http*) ;; *) loc="http://$reg$loc" ;; esac
  case $loc in *\?*) loc="$loc&digest=$digest" ;; *) loc="$loc?digest=$digest" ;; esac
  curl -sSf -o /dev/null -X PUT -H 'Content-Type: application/octet-stream' --data-binary "@$file" "$loc" \
    || die "blob upload to $reg/$name failed"
  echo "$digest"
}

# An image manifest whose one layer is text, not a (gzipped) tar archive.
push_not_an_image() {
  local dir="$1" reg="$2" cfg layer cd ld
  cfg="$dir/notimage-config.json"; layer="$dir/notimage-layer"
  printf '{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":["sha256:%064d"]}}' 0 >"$cfg"
  echo "this is not a layer" >"$layer"
  cd="$(put_blob "$reg" e2e/notimage "$cfg")"
  ld="$(put_blob "$reg" e2e/notimage "$layer")"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json","config":{"mediaType":"application/vnd.docker.container.image.v1+json","size":%d,"digest":"%s"},"layers":[{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip","size":%d,"digest":"%s"}]}' \
    "$(stat -c %s "$cfg")" "$cd" "$(stat -c %s "$layer")" "$ld" >"$dir/notimage-manifest.json"
  curl -sSf -o /dev/null -X PUT -H 'Content-Type: application/vnd.docker.distribution.manifest.v2+json' \
    --data-binary "@$dir/notimage-manifest.json" "http://$reg/v2/e2e/notimage/manifests/1" \
    || die "manifest upload to $reg/e2e/notimage failed"
}

cmd_stop() {
  local dir="$1" pid name
  for name in registry registry-auth; do
    pid="$(cat "$dir/$name.pid" 2>/dev/null || true)"
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && { for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done; }
  done
  rm -rf "$dir"
}

case "${1:-}" in
  start) [ $# = 3 ] || [ $# = 4 ] || die "usage: registry.sh start DIR PORT [ADDR]"; cmd_start "$2" "$3" "${4:-127.0.0.1}" ;;
  stop) [ $# = 2 ] || die "usage: registry.sh stop DIR"; cmd_stop "$2" ;;
  *) die "usage: registry.sh start DIR PORT [ADDR] | stop DIR" ;;
esac
