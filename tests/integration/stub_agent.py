#!/usr/bin/env python3
"""A recording stand-in for slurm-k8s-agent, for the SPANK plugin's
integration test (no Kubernetes). Listens on a unix socket, speaks the agent
protocol (common/daemons/protocol.h: newline-delimited JSON envelopes), appends every
request to a JSON-lines file with the peer's pid/uid, and answers ok:

  register   -> {"node_name": "slurm-<node>-<job>", "namespaces": the job's (the site allows none)}
  deregister -> sends `shutdown` to the attached shim of (job, node) if any,
                waits for its reply (bounded by grace_s + 5), -> {"pods_stopped": 0}
  status     -> {"job_id", "slurm_node", "node_name", "ready": true, "phase": "ready", ...}
  attach     -> {"node_name", "gpus", "state_dir"}; the connection stays open

Like the agent, it listens on SOCKET and on the admin socket beside it
(DIR/admin/NAME, a directory of mode 0700); each record names the socket a
request came on ("socket": "agent" or "admin").

Usage: stub_agent.py SOCKET RECORD_FILE   (SIGTERM ends it)
"""
import json
import os
import socket
import struct
import sys
import threading

SOCK, RECORD = sys.argv[1], sys.argv[2]
lock = threading.Lock()
nodes = {}   # (job, node) -> register body
shims = {}   # (job, node) -> (conn, file)


def record(entry):
    with lock, open(RECORD, "a") as f:
        f.write(json.dumps(entry) + "\n")


def send(conn, obj):
    conn.sendall((json.dumps(obj) + "\n").encode())


def node_name(job, node):
    return "slurm-%s-%s" % (node.lower(), job)


def shutdown_shim(key, grace):
    with lock:
        s = shims.pop(key, None)
    if not s:
        return "no shim"
    conn, rfile = s
    try:
        conn.settimeout(grace + 5)
        send(conn, {"v": 1, "id": 1000, "op": "shutdown",
                    "body": {"grace_s": grace, "reason": "JobEnded"}})
        line = rfile.readline()
        return "shim replied" if line else "shim closed"
    except OSError as e:
        return "shim error: %s" % e


def serve(conn, which):
    cred = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", cred)
    rfile = conn.makefile("r")
    attached = False
    try:
        for line in rfile:
            req = json.loads(line)
            op, body, rid = req.get("op"), req.get("body", {}), req.get("id")
            entry = {"op": op, "body": body, "peer_uid": uid, "peer_pid": pid, "socket": which}
            if op == "attach":
                try:
                    with open("/proc/%d/cgroup" % pid) as f:
                        entry["peer_cgroup"] = f.read()
                except OSError:
                    pass
            record(entry)
            key = (body.get("job_id"), body.get("slurm_node"))
            reply = {}
            if op == "register":
                nodes[key] = body
                # As an agent whose site allows no namespace by default.
                reply = {"node_name": node_name(*key), "namespaces": body.get("namespaces", [])}
            elif op == "deregister":
                result = shutdown_shim(key, int(body.get("grace_s", 30)))
                record({"op": "deregister-done", "body": body, "result": result})
                nodes.pop(key, None)
                reply = {"pods_stopped": 0}
            elif op == "status":
                reg = nodes.get(key)
                if reg is None:
                    send(conn, {"id": rid, "ok": False, "error": "not_found",
                                "message": "no such node"})
                    continue
                reply = {"job_id": key[0], "slurm_node": key[1],
                         "node_name": node_name(*key), "user": reg.get("user", ""),
                         "phase": "ready", "ready": True, "gpus": reg.get("gpus", []),
                         "pods": 0}
            elif op == "attach":
                reg = nodes.get(key, {})
                reply = {"node_name": node_name(*key), "gpus": reg.get("gpus", []),
                         "state_dir": "/tmp"}
                send(conn, {"id": rid, "ok": True, "body": reply})
                with lock:
                    shims[key] = (conn, rfile)
                attached = True
                return  # the deregister thread owns this connection now
            send(conn, {"id": rid, "ok": True, "body": reply})
    except (OSError, ValueError):
        pass
    finally:
        if not attached:
            conn.close()


def listen(path, mode):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    os.chmod(path, mode)
    srv.listen(64)
    return srv


def accept_loop(srv, which):
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn, which), daemon=True).start()


def main():
    admin_dir = os.path.join(os.path.dirname(SOCK), "admin")
    os.makedirs(admin_dir, mode=0o700, exist_ok=True)
    admin = listen(os.path.join(admin_dir, os.path.basename(SOCK)), 0o600)
    agent = listen(SOCK, 0o666)
    threading.Thread(target=accept_loop, args=(admin, "admin"), daemon=True).start()
    accept_loop(agent, "agent")


if __name__ == "__main__":
    main()
