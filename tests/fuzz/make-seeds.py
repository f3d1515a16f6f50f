#!/usr/bin/env python3
"""Writes the seed corpora under tests/fuzz/corpus/<target>/ (re-runnable;
files are named by content hash, so reruns add nothing new). Seeds are real
objects in every shape the code meets: protocol messages as the plugin, agent
and shim send them (contracts 1-2 in DESIGN.md), malformed variants, config
files, option strings, CRI log lines, and small recorded Kubernetes objects
from a directory of recorded kubelet objects (the first argument).

usage: make-seeds.py [REFERENCE_DIR]"""
import hashlib
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def put(target, data):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def line(obj):
    return json.dumps(obj, separators=(",", ":"))


REGISTER = {"job_id": 42, "slurm_node": "n1", "user": "k8suser", "uid": 2001, "gid": 2001,
            "partition": "gpu", "cluster": "local", "gpus": [2, 3], "cpus": 4,
            "memory_mib": 16384, "labels": {"team": "rl", "example.com/tier": "gen"},
            "taints": ["slurm-k8s/job-id=42:NoSchedule", "gpu:NoExecute"],
            "namespaces": ["rl", "default"], "end_time": 1767225600}
NODE_STATE = {"job_id": 42, "slurm_node": "n1", "node_name": "slurm-n1-42", "user": "k8suser",
              "phase": "ready", "ready": True, "gpus": [2, 3], "pods": 1}
POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "gen-0", "namespace": "rl", "uid": "0b9e6c3a-1111-2222-3333-444455556666"},
       "spec": {"nodeName": "slurm-n1-42", "restartPolicy": "Always",
                "containers": [{"name": "gen", "image": "busybox",
                                "command": ["/bin/sh", "-c", "echo hi; sleep 1000"],
                                "env": [{"name": "A", "value": "1"}],
                                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
POD_STATUS = {"phase": "Running", "startTime": "2024-05-01T12:00:00Z",
              "conditions": [{"type": "Ready", "status": "True"}],
              "containerStatuses": [{"name": "gen", "ready": True, "restartCount": 0,
                                     "state": {"running": {"startedAt": "2024-05-01T12:00:01Z"}},
                                     "containerID": "slurm-k8s://uid/gen/0"}]}

REQUESTS = [
    ("register", REGISTER),
    ("register", {"job_id": 7, "slurm_node": "gpu-node_1.x", "user": "u", "uid": 0}),
    ("deregister", {"job_id": 42, "slurm_node": "n1", "grace_s": 30, "reason": "JobEnded"}),
    ("deregister", {"job_id": 42, "slurm_node": "n1"}),
    ("status", {"job_id": 42, "slurm_node": "n1"}),
    ("list", {}),
    ("attach", {"job_id": 42, "slurm_node": "n1"}),
    ("pod_run", {"pod": POD, "files": {"cfg": {"a.txt": "aGVsbG8K"}}}),
    ("pod_kill", {"uid": POD["metadata"]["uid"], "grace_s": 30, "reason": "Killing"}),
    ("pod_list", {}),
    ("shutdown", {"grace_s": 10, "reason": "JobEnded"}),
    ("pod_status", {"uid": POD["metadata"]["uid"], "namespace": "rl", "name": "gen-0",
                    "status": POD_STATUS}),
]
REPLIES = [
    {"id": 1, "ok": True, "body": {"node_name": "slurm-n1-42"}},
    {"id": 2, "ok": True, "body": {"pods_stopped": 3}},
    {"id": 3, "ok": True, "body": NODE_STATE},
    {"id": 4, "ok": True, "body": {"nodes": [NODE_STATE, dict(NODE_STATE, job_id=43, ready=False,
                                                              phase="registering")]}},
    {"id": 5, "ok": True, "body": {"node_name": "slurm-n1-42", "gpus": [2, 3],
                                   "state_dir": "/var/lib/slurm-k8s/shim/42"}},
    {"id": 6, "ok": True, "body": {"pods": [{"uid": "u1", "namespace": "rl", "name": "gen-0",
                                             "status": POD_STATUS}]}},
    {"id": 7, "ok": True},
    {"id": 8, "ok": False, "error": "forbidden", "message": "uid 1000 may not register"},
    {"id": 9, "ok": False, "error": "no_such_error", "message": "x"},
    {"id": 10, "ok": False, "error": "not_found"},
]
MALFORMED = [
    '', '{}', '[]', 'null', '{"v":2,"id":1,"op":"register"}', '{"v":1,"op":"x"}',
    '{"v":1,"id":-1,"op":"x"}', '{"v":1,"id":1.5,"op":"x"}', '{"v":1,"id":18446744073709551615,"op":"x"}',
    '{"v":1,"id":1,"op":""}', '{"v":1,"id":1,"op":"' + 'x' * 65 + '"}',
    '{"v":1,"id":1,"op":"register","body":[]}', '{"v":1,"id":1,"op":"register","body":null}',
    '{"v":1,"id":1,"op":"a","op":"b"}', '{"v":1,"id":1,"op":"x"} trailing', '{"v":1,"id":1,"op":"x",}',
    '{"v":1,"id":1,"op":"x"/*c*/}', '[' * 70 + ']' * 70, '{"a":' * 70 + '1' + '}' * 70,
    '{"v":1,"id":1,"op":"register","body":{"job_id":4294967296,"slurm_node":"n1","user":"u","uid":1}}',
    '{"v":1,"id":1,"op":"register","body":{"job_id":1,"slurm_node":"n 1","user":"u","uid":1}}',
    '{"v":1,"id":1,"op":"register","body":{"job_id":1,"slurm_node":"n1","user":"u","uid":1,"gpus":[1024]}}',
    '{"v":1,"id":1,"op":"register","body":{"job_id":1,"slurm_node":"n1","user":"u","uid":1,"gpus":[-1]}}',
    '{"v":1,"id":1,"op":"register","body":{"job_id":1,"slurm_node":"n1","user":"u","uid":1,"labels":{"a":1}}}',
    '{"v":1,"id":1,"op":"register","body":{"job_id":1,"slurm_node":"n1","user":"u","uid":1,"taints":["k:Bad"]}}',
    '{"v":1,"id":1,"op":"register","body":{"job_id":1,"slurm_node":"n1","user":"u","uid":1,"end_time":1e300}}',
    '{"v":1,"id":1,"op":"register","body":{"job_id":1,"slurm_node":"n1","user":"u","uid":1,"memory_mib":1099511627777}}',
    '{"v":1,"id":1,"op":"x","body":{"s":"\\u0000\\ud800\\n\\u2028"}}', '{"id":1,"ok":"yes"}',
    '{"v":1,"id":1,"op":"x","body":{"s":"\xff\xfe"}}',
]


def seeds_protocol():
    msgs = []
    for i, (op, body) in enumerate(REQUESTS, 1):
        msgs.append(line({"v": 1, "id": i, "op": op, "body": body}))
    msgs += [line(r) for r in REPLIES]
    msgs += MALFORMED
    for m in msgs:
        put("protocol", m)
        put("json", m)
    return msgs


def seeds_line_buffer(msgs):
    stream = "".join(m + "\n" for m in msgs[:8])
    for max_sel, chunk in ((0, 7), (0, 255), (40, 13), (63, 1), (10, 64)):
        data = bytes([max_sel])
        s = stream.encode()
        for i in range(0, len(s), chunk):
            piece = s[i:i + chunk]
            data += bytes([len(piece)]) + piece
        put("line_buffer", data)
    put("line_buffer", b"\x05\x06ab\r\ncd\x03\nef\x00")
    put("line_buffer", b"\x03\x08abcdefgh")


def seeds_json(ref):
    for name in ("01-lease.json", "02-pod-running-timing.json", "01-node.json",
                 "03-pod-succeeded-final.json", "09-events-summary.json"):
        p = os.path.join(ref, name)
        if os.path.exists(p):
            with open(p, "rb") as f:
                put("json", f.read())
    for s in ('1', '-0', '1e400', '"\\ud83d\\ude00"', '{"a":[1,2,{"b":null}]}', '12345678901234567890123'):
        put("json", s)


def seeds_config():
    agent_conf = """# agent.conf
api_server = https://127.0.0.1:6443
api_ca_file = /etc/slurm-k8s/ca.crt
api_timeout = 30s
socket = /run/slurm-k8s/agent.sock
name = "  spaced # not a comment  "
mode = uid
timeout = 5m
max_gpus = 8   # trailing comment
enabled = yes
namespaces = rl, default
namespaces = other
"""
    for text in (agent_conf, "socket=relative\n", "unknown = 1\n", "timeout = 2h\ntimeout = 1\n",
                 "name = \"unterminated\n", "name = \"x\" junk\n", "max_gpus = 65\n",
                 "namespaces = a,,b\n", "namespaces =\n", "=value\n", "Key = 1\n", "\r\n\t\n#\n",
                 "enabled = maybe\n", "timeout = 18446744073709551615h\n"):
        put("config", b"\x00" + text.encode())
    for words in (["socket=/run/slurm-k8s/agent.sock", "timeout=10", "max_gpus=4", "mode=cgroup"],
                  ["namespaces=a,b", "namespaces=c", "enabled=off"], ["novalue"], ["=x"], [""],
                  ["name="], ["max_gpus=4", "max_gpus=5"]):
        put("config", b"\x01" + "\0".join(words).encode())


def seeds_k8s_names():
    for sel, s in ((0, "team=rl,example.com/tier=gen"), (0, "a="), (0, "a=b,a=c"), (0, "-a=b"),
                   (0, "a" * 64 + "=b"), (0, "x/y/z=1"), (0, ""), (0, "kubernetes.io/hostname=n1"),
                   (1, "slurm-k8s/job-id=42:NoSchedule,gpu:NoExecute"), (1, "k=v:Bad"), (1, ","),
                   (2, "slurm-k8s/job=42:NoSchedule"), (2, "k=v=w:NoSchedule"), (2, "k:v:NoSchedule"),
                   (2, "=v:NoSchedule"), (2, "a.b-c_d/E.f=g:PreferNoSchedule")):
        put("k8s_names", bytes([sel]) + s.encode())


def seeds_strings():
    for sel, s in ((0, "0"), (0, "1000000"), (0, "18446744073709551616"), (0, "+1"), (0, ""),
                   (1, "Yes"), (1, "off"), (1, "2"), (2, "512M"), (2, "16G"), (2, "1T"), (2, "1Ti"),
                   (2, "17592186044415T"), (2, "5X"), (3, "90"), (3, "5m"), (3, "2h"), (3, "h"),
                   (3, "5124095576030431h"), (4, "0,2-3"), (4, " 1 , 4 - 6 "), (4, "3-1"),
                   (4, "0-4097"), (4, "1048576"), (4, ",")):
        put("strings", bytes([sel]) + s.encode())


def seeds_cri_log():
    log = ("2024-05-01T12:00:00.000000001Z stdout F hello\n"
           "2024-05-01T12:00:00.5Z stderr P part\n"
           "2024-05-01T12:00:01+02:00 stderr F ial\n"
           "2024-05-01T12:00:02.123456789-05:30 stdout F:x tagged\n"
           "2024-05-01T12:00:03Z stdout F \n"
           "garbage line\n"
           "2024-05-01T12:00:04Z stdin F bad stream\n"
           "2024-13-01T12:00:04Z stdout F bad month\n"
           "2024-05-01T12:00:60Z stdout F leap\n"
           "1970-01-01T00:00:00Z stdout F epoch\n"
           "2024-05-01T12:00:05Z stdout P no newline")
    for flags, tail, limit in ((0, 0, 0), (1, 10, 0), (2, 0, 12), (7, 9, 30), (15, 8, 5)):
        put("cri_log", struct.pack(">BBI", flags, tail, limit) + log.encode())


def seeds_cri_writer():
    def triple(ctl, chunk):
        return bytes([ctl, len(chunk)]) + chunk
    put("cri_writer", triple(0, b"hello\nworld\n") + triple(1, b"err no newline"))
    put("cri_writer", triple(0, b"a" * 200) + triple(126, b"b" * 250) + triple(0, b"\n"))
    put("cri_writer", triple(3, b"\n\n\r\n") + triple(0, b"\x00\xff"))


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: make-seeds.py DIR-OF-RECORDED-KUBELET-OBJECTS")
    ref = sys.argv[1]
    msgs = seeds_protocol()
    seeds_line_buffer(msgs)
    seeds_json(ref)
    seeds_config()
    seeds_k8s_names()
    seeds_strings()
    seeds_cri_log()
    seeds_cri_writer()


if __name__ == "__main__":
    main()
