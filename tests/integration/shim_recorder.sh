#!/bin/bash
# Stands in for slurm-k8s-shim in the plugin's integration test (plugstack
# key shim=): records who and where it runs and which fake GPU devices it can
# open (and the GPU environment the plugin gives it), attaches to the (stub) agent, then waits for `shutdown` and answers it.
# Output: $SK_SHIM_OUT/shim-<job>-<node>.txt (SK_SHIM_OUT is fixed below,
# because the plugin gives the shim a fixed environment).
OUT_DIR="$(dirname "$0")/../out"
while [ $# -gt 0 ]; do
  case "$1" in
    --job-id) JOB="$2"; shift 2 ;;
    --slurm-node) NODE="$2"; shift 2 ;;
    --socket) SOCK="$2"; shift 2 ;;
    *) shift ;;
  esac
done
OUT="$OUT_DIR/shim-$JOB-$NODE.txt"
DEV_DIR="$(dirname "$0")/../dev"
{
  echo "args job=$JOB node=$NODE socket=$SOCK"
  echo "id $(id)"
  grep -E 'freezer|devices|cpuset' /proc/self/cgroup | sed 's/^/cgroup /'
  grep -E '^Sig(Blk|Ign)' /proc/self/status | sed 's/^/status /'
  env | grep '^SLURM_K8S_GPUS' | sed 's/^/env /'
} > "$OUT"
exec /usr/bin/python3 - "$OUT" "$DEV_DIR" "$JOB" "$NODE" "$SOCK" <<'PY'
import errno, json, os, signal, socket, sys
out, dev, job, node, sock = sys.argv[1:6]
def log(s):
    with open(out, "a") as f: f.write(s + "\n")
for i in range(4):
    p = "%s/nvidia%d" % (dev, i)
    try:
        os.close(os.open(p, os.O_RDWR)); r = "OK"
    except OSError as e:
        r = errno.errorcode.get(e.errno, str(e.errno))
    log("open nvidia%d %s" % (i, r))
signal.signal(signal.SIGTERM, lambda *a: (log("sigterm"), sys.exit(0)))
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sock)
f = s.makefile("r")
s.sendall((json.dumps({"v": 1, "id": 1, "op": "attach",
          "body": {"job_id": int(job), "slurm_node": node}}) + "\n").encode())
log("attach " + f.readline().strip())
for line in f:
    req = json.loads(line)
    if req.get("op") == "shutdown":
        log("shutdown grace_s=%s" % req["body"].get("grace_s"))
        s.sendall((json.dumps({"id": req["id"], "ok": True, "body": {}}) + "\n").encode())
        sys.exit(0)
log("agent closed")
PY
