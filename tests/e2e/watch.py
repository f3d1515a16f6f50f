#!/usr/bin/env python3
"""Record what a Kubernetes user sees, with local timestamps, and report it.

  watch.py record OUT.jsonl KUBECTL_ARGS...
      Runs `kubectl get nodes,pods -w` (two kubectl processes, -o json,
      --output-watch-events) and appends one JSON line per watch event:
      {"t": unix time, "type": ADDED|MODIFIED|DELETED, "kind", "ns", "name",
       "object": the object}. Works against any cluster kubectl can reach.
      Runs until SIGTERM (then stops both kubectl processes).
  watch.py report OUT.jsonl JOB_ID JOB_END_UNIX_TIME [SUBMIT_UNIX_TIME]
      Prints sbatch -> node Ready, node created -> Ready, pod created ->
      Running, and job end -> nodes gone, computed from the recorded events.
  watch.py final OUT.jsonl NS/NAME
      Prints the last recorded status of a pod (JSON) before it was deleted.
"""
import json
import signal
import subprocess
import sys
import threading
import time


def record(out_path, kubectl_args):
    out = open(out_path, "a", buffering=1)
    lock = threading.Lock()
    procs = []
    stop = threading.Event()

    def follow(resource, extra):
        # kubectl -w exits when the server goes away (the API-down test):
        # start it again until told to stop (it relists: ADDED events again).
        while not stop.is_set():
            follow_once(resource, extra)
            stop.wait(1)

    def follow_once(resource, extra):
        cmd = ["kubectl", *kubectl_args, "get", resource, *extra, "-w",
               "--output-watch-events", "-o", "json"]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(p)
        dec = json.JSONDecoder()
        buf = ""
        for chunk in iter(lambda: p.stdout.readline(), ""):
            buf += chunk
            while True:
                s = buf.lstrip()
                if not s:
                    buf = ""
                    break
                try:
                    ev, end = dec.raw_decode(s)
                except ValueError:
                    break
                buf = s[end:]
                obj = ev.get("object", {})
                md = obj.get("metadata", {})
                line = {"t": time.time(), "type": ev.get("type"), "kind": obj.get("kind"),
                        "ns": md.get("namespace", ""), "name": md.get("name"), "object": obj}
                with lock:
                    out.write(json.dumps(line) + "\n")

    threads = [threading.Thread(target=follow, args=("nodes", []), daemon=True),
               threading.Thread(target=follow, args=("pods", ["-A"]), daemon=True)]
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    for t in threads:
        t.start()
    while not stop.wait(0.5):
        pass
    for t in threads:
        t.join(0.5)  # a kubectl started just before stop is in procs by now
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return 0


def load(path):
    evs = []
    with open(path) as f:
        for line in f:
            try:
                evs.append(json.loads(line))
            except ValueError:
                pass
    return evs


def cond(obj, typ):
    for c in obj.get("status", {}).get("conditions", []) or []:
        if c.get("type") == typ:
            return c.get("status")
    return None


def ms(x):
    return f"{1000 * x:.0f} ms"


def report(path, job, job_end, submit=None):
    evs = load(path)
    job = str(job)
    nodes = {}
    for e in evs:
        if e["kind"] != "Node":
            continue
        labels = e["object"].get("metadata", {}).get("labels", {}) or {}
        if labels.get("slurm-k8s/job-id") != job:
            continue
        n = nodes.setdefault(e["name"], {})
        if e["type"] == "ADDED" and "added" not in n:
            n["added"] = e["t"]
        if cond(e["object"], "Ready") == "True" and "ready" not in n:
            n["ready"] = e["t"]
        if e["type"] == "DELETED":
            n["deleted"] = e["t"]
    node_names = set(nodes)
    pods = {}
    for e in evs:
        if e["kind"] != "Pod":
            continue
        o = e["object"]
        key = f'{e["ns"]}/{e["name"]}'
        if o.get("spec", {}).get("nodeName") not in node_names and key not in pods:
            if not (o.get("spec", {}).get("nodeSelector", {}) or {}).get("slurm-k8s/job-id") == job:
                continue
        p = pods.setdefault(key, {})
        if e["type"] == "ADDED" and "added" not in p:
            p["added"] = e["t"]
        if o.get("spec", {}).get("nodeName") and "bound" not in p:
            p["bound"] = e["t"]
        if o.get("status", {}).get("phase") == "Running" and "running" not in p:
            p["running"] = e["t"]
        if cond(o, "Ready") == "True" and "ready" not in p:
            p["ready"] = e["t"]
        if e["type"] == "DELETED":
            p["deleted"] = e["t"]
    print("timings (local watch of the API, kubectl -w):")
    for name in sorted(nodes):
        n = nodes[name]
        rt = ms(n["ready"] - n["added"]) if "ready" in n and "added" in n else "n/a"
        if rt == "0 ms":
            rt = "0 ms (created with Ready=True)"
        sub = f", sbatch -> Ready {ms(n['ready'] - float(submit))}" if submit and "ready" in n else ""
        print(f"  node {name}: created -> Ready {rt}{sub}")
    for key in sorted(pods):
        p = pods[key]
        run = ms(p["running"] - p["added"]) if "running" in p and "added" in p else "n/a"
        rdy = ms(p["ready"] - p["added"]) if "ready" in p and "added" in p else "n/a"
        bnd = ms(p["running"] - p["bound"]) if "running" in p and "bound" in p else "n/a"
        print(f"  pod {key}: created -> Running {run} (bound -> Running {bnd}), created -> Ready {rdy}")
    gone = [n.get("deleted") for n in nodes.values()]
    if job_end and gone and all(gone):
        print(f"  teardown: batch script end -> all {len(gone)} nodes gone {ms(max(gone) - float(job_end))}")
    else:
        print("  teardown: n/a (nodes not seen deleted)")
    return 0


def final(path, key):
    last = None
    for e in load(path):
        if e["kind"] == "Pod" and f'{e["ns"]}/{e["name"]}' == key:
            last = e["object"].get("status", {})
    print(json.dumps(last or {}))
    return 0 if last else 1


def main(argv):
    if len(argv) >= 3 and argv[1] == "record":
        return record(argv[2], argv[3:])
    if len(argv) in (5, 6) and argv[1] == "report":
        return report(*argv[2:])
    if len(argv) == 4 and argv[1] == "final":
        return final(argv[2], argv[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
