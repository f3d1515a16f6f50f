#!/usr/bin/env python3
"""Trainer rank of the online-RL example: a policy-gradient learner that
really learns (rlcore.py), one rank per node on the GPUs the job kept.

Every step, on every rank:
  1. asks a rollout service (round robin over the endpoints, the next one on a
     failure) for GROUP samples of each of PROMPTS prompts;
  2. checks what came back: each sample's id never used before by any rank
     (else a duplicate, dropped; rank 0 keeps the ids), its prompt the one
     asked, its weight version at most
     MAX_STALENESS behind the trainer's (else late, dropped); samples asked
     for and not in the reply are lost;
  3. computes the policy gradient (group baseline, importance ratio for
     samples made with older weights) and all-reduces it across the ranks.
Rank 0 then takes the step (theta += LR * mean gradient), bumps the weight
version, pushes the weights to every rollout (POST /weights, retried; the
time it takes is the step's weight-sync latency), and sends the new weights to
the other ranks, so every rank starts the next step from the same weights.

The all-reduce is a star over TCP (rank 0 gathers, sums and broadcasts): the
gradient is CONTEXTS x VOCAB = 128 floats, so one round trip per rank per step
costs well under a millisecond, and it needs nothing beyond the job's own
srun (see README.md for why not MPI here). Rank 0's address: MASTER_ADDR, or
the NodeAddr of the step's first node (scontrol); port MASTER_PORT, or
30000 + job id % 2000.

Rank 0 prints one line per step (mean reward, staleness, samples/s, weight
sync) and at the end writes SUMMARY_DIR/online-rl-<job>.json (the reward
curve, the sample accounting, the weight versions) and, with matplotlib, the
reward curve as online-rl-<job>.png. Each rank ends with "done: N/STEPS steps
used real responses"; the exit code is 0 when every step had samples, the
reward rose by at least MARGIN (mean of the last 5 steps minus the first 5)
and no sample was lost or duplicated.
"""
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rlcore  # noqa: E402  (the example's shared module, next to this file)

ENV = os.environ.get
STEPS = int(ENV("STEPS", "30"))
PROMPTS = int(ENV("PROMPTS", "8"))
GROUP = int(ENV("GROUP", "8"))
LR = float(ENV("LR", "4.0"))
MAX_STALENESS = int(ENV("MAX_STALENESS", "2"))
MARGIN = float(ENV("MARGIN", "0.25"))
SEED = int(ENV("SEED", "1"))
ENDPOINTS_FILE = ENV("ROLLOUT_ENDPOINTS_FILE", "rollout-endpoints.txt")
ROLLOUT_SERVICE = ENV("ROLLOUT_SERVICE", "")   # a Service: its Endpoints, through the API
REWARD_SERVICE = ENV("REWARD_SERVICE", "")
NAMESPACE = ENV("K8S_NAMESPACE") or (ENV("SLURM_K8S_NAMESPACES") or "default").split(",")[0]
KUBECTL = ENV("KUBECTL", "kubectl")
ENDPOINTS_POLL = float(ENV("ENDPOINTS_POLL_SECONDS", "1"))
WAIT = float(ENV("ENDPOINTS_WAIT_SECONDS", "120"))
SUMMARY_DIR = ENV("SUMMARY_DIR", ".")
STEP_DEADLINE = float(ENV("STEP_DEADLINE", "60"))
# The least a step takes, as if the gradient were a real model's (seconds; a
# real trainer's step takes seconds, this example's milliseconds): e2e
# online_rl_faults paces the loop with it so its faults land mid-run.
STEP_SECONDS = float(ENV("STEP_SECONDS", "0"))
RANK = int(ENV("SLURM_PROCID", "0"))
WORLD = int(ENV("SLURM_NTASKS", "1"))
JOB = ENV("SLURM_JOB_ID", "local")
NODE = ENV("SLURMD_NODENAME", socket.gethostname())
WINDOW = 5


def log(msg):
    print(f"[trainer rank {RANK} on {NODE}] {msg}", flush=True)


# ------------------------------------------------------------ rollout endpoints
def endpoints_of(obj):
    """"ip:port" of each ready address of an Endpoints object, ordered by the
    pod behind it (targetRef.name), then the address. The port: the one
    named "http", else the first."""
    out = []
    for sub in obj.get("subsets") or []:
        ports = sub.get("ports") or []
        port = next((p for p in ports if p.get("name") == "http"), ports[0] if ports else None)
        if not port:
            continue
        for a in sub.get("addresses") or []:
            ip = a.get("ip", "")
            host = f"[{ip}]" if ":" in ip else ip
            out.append(((a.get("targetRef") or {}).get("name", ""), f"{host}:{port['port']}"))
    return [ep for _, ep in sorted(out)]


class Endpoints:
    """Where the rollouts (and the reward service) are.

    With ROLLOUT_SERVICE set, rank 0 reads the Endpoints of that Service (and
    of REWARD_SERVICE) through the Kubernetes API, with kubectl and the job's
    KUBECONFIG, every ENDPOINTS_POLL_SECONDS and at once when a rollout fails
    (a background thread: the step never waits for the API); the other ranks
    get rank 0's list with each step's weights, and read it themselves when a
    rollout fails mid-step. Only ready pods are listed, so a rollout the
    Deployment replaced drops out and its successor comes in.

    Else every rank reads ENDPOINTS_FILE (host:port per line), again when it
    changes (run-local.sh's plain processes)."""

    def __init__(self):
        self.mtime = None
        self.list = []
        self.reward = ""
        self.api = bool(ROLLOUT_SERVICE)
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.error = None
        self.read_at = 0.0
        if self.api and RANK == 0:
            threading.Thread(target=self._poll, daemon=True, name="endpoints").start()

    def _read_api(self):
        names = [ROLLOUT_SERVICE] + ([REWARD_SERVICE] if REWARD_SERVICE else [])
        cmd = [KUBECTL, "get", "endpoints", "-n", NAMESPACE, "-o", "json", "--request-timeout=10s",
               *names]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            raise OSError(f"{' '.join(cmd)}: {r.stderr.strip() or r.returncode}")
        doc = json.loads(r.stdout)
        items = doc.get("items", [doc]) if doc.get("kind") == "List" else [doc]
        found = {o["metadata"]["name"]: endpoints_of(o) for o in items}
        return found.get(ROLLOUT_SERVICE, []), (found.get(REWARD_SERVICE) or [""])[0]

    def _update(self):
        """Reads the Endpoints once. The reward address is kept while the
        reward Service lists no ready pod (a reward pod restarting in place
        comes back at it; a rollout told no address would have none)."""
        try:
            eps, reward = self._read_api()
            err = None
        except (OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
            eps, reward, err = None, None, str(e)
        with self.lock:
            if err is None:
                if self.list and eps != self.list:
                    log(f"rollout endpoints now {', '.join(eps) or 'none'} "
                        f"(Service {NAMESPACE}/{ROLLOUT_SERVICE})")
                if reward and self.reward and reward != self.reward:
                    log(f"reward endpoint now {reward} (Service {NAMESPACE}/{REWARD_SERVICE})")
                self.list, self.reward = eps, reward or self.reward
            elif err != self.error:
                log(("waiting for the Services: " if "NotFound" in err and not self.list else
                     "reading the Endpoints failed (keeping the last ones): ") + err)
            self.error = err
            self.read_at = time.time()

    def _poll(self):
        while True:
            self._update()
            self.wake.wait(ENDPOINTS_POLL)
            self.wake.clear()

    def failed(self):
        """A rollout did not answer: read the Endpoints again now. Rank 0's
        thread does; another rank, which otherwise has rank 0's list of the
        step's start, reads them itself (at most every ENDPOINTS_POLL s), so
        a reward or rollout pod that moved mid-step costs it a retry, not the
        step."""
        if not self.api:
            return
        if RANK == 0:
            self.wake.set()
        elif time.time() - self.read_at >= ENDPOINTS_POLL:
            self._update()

    def set(self, msg):
        """Rank k > 0: the endpoints rank 0 sent with the step's weights."""
        if self.api and msg:
            with self.lock:
                self.list, self.reward = msg["rollouts"], msg["reward"] or self.reward

    def wire(self):
        with self.lock:
            return {"rollouts": list(self.list), "reward": self.reward}

    def refresh(self):
        if self.api:
            with self.lock:
                return list(self.list)
        try:
            st = os.stat(ENDPOINTS_FILE)
        except FileNotFoundError:
            return self.list
        if st.st_mtime_ns != self.mtime:
            with open(ENDPOINTS_FILE) as f:
                eps = [line.strip() for line in f if line.strip()]
            if eps:
                if self.list and eps != self.list:
                    log(f"rollout endpoints now {', '.join(eps)}")
                self.mtime, self.list = st.st_mtime_ns, eps
        return self.list

    def ready(self):
        if self.api:
            with self.lock:
                return bool(self.list) and (self.reward or not REWARD_SERVICE)
        return bool(self.refresh())

    def wait(self):
        deadline = time.time() + WAIT
        while time.time() < deadline and not self.ready():
            time.sleep(0.5)
        return self.ready()

    def source(self):
        if self.api:
            return (f"the Endpoints of Service {NAMESPACE}/{ROLLOUT_SERVICE}"
                    + (f" and {NAMESPACE}/{REWARD_SERVICE}" if REWARD_SERVICE else "")
                    + (f" ({self.error})" if self.error else ""))
        return ENDPOINTS_FILE


def post(url, body, timeout=10):
    req = urllib.request.Request(url, data=rlcore.dumps(body),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.load(resp)


# ------------------------------------------------------------ the all-reduce
class Star:
    """Gather to rank 0 and broadcast from it, over one TCP connection per
    other rank (newline-delimited JSON)."""

    def __init__(self):
        self.peers = []
        self.conn = None
        if WORLD == 1:
            return
        port = int(ENV("MASTER_PORT", str(30000 + (int(JOB) % 2000 if JOB.isdigit() else 0))))
        if RANK == 0:
            srv = socket.create_server(("0.0.0.0", port), reuse_port=False)
            srv.settimeout(120)
            got = {}
            while len(got) < WORLD - 1:
                c, _ = srv.accept()
                f = c.makefile("rwb")
                hello = json.loads(f.readline())
                got[int(hello["rank"])] = (c, f)
            srv.close()
            self.peers = [got[r] for r in sorted(got)]
        else:
            addr = ENV("MASTER_ADDR") or master_addr()
            deadline = time.time() + 120
            while True:
                try:
                    c = socket.create_connection((addr, port), timeout=10)
                    break
                except OSError:
                    if time.time() > deadline:
                        raise
                    time.sleep(0.2)
            c.settimeout(600)
            self.conn = (c, c.makefile("rwb"))
            self._send(self.conn[1], {"rank": RANK})

    @staticmethod
    def _send(f, obj):
        f.write(rlcore.dumps(obj) + b"\n")
        f.flush()

    @staticmethod
    def _recv(f):
        line = f.readline()
        if not line:
            raise ConnectionError("a trainer rank closed its connection")
        return json.loads(line)

    def gather(self, obj):
        if RANK == 0:
            return [obj] + [self._recv(f) for _, f in self.peers]
        self._send(self.conn[1], obj)
        return None

    def bcast(self, obj):
        if RANK == 0:
            for _, f in self.peers:
                self._send(f, obj)
            return obj
        return self._recv(self.conn[1])


def master_addr():
    """NodeAddr of the step's first node: where rank 0 runs."""
    nodelist = ENV("SLURM_STEP_NODELIST") or ENV("SLURM_JOB_NODELIST", "")
    first = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True,
                           text=True, check=True).stdout.split()[0]
    out = subprocess.run(["scontrol", "show", "node", first, "-o"], capture_output=True,
                         text=True, check=True).stdout
    for word in out.split():
        if word.startswith("NodeAddr="):
            return word.split("=", 1)[1]
    return first


# ------------------------------------------------------------ one step's samples
class Ledger:
    """This rank's sample accounting over the run."""

    def __init__(self):
        self.seen = set()
        self.asked = self.used = self.late = self.lost = self.dup = self.retries = 0
        self.boots = {}     # rollout pod -> the boot ids its samples carried
        self.catch_ups = 0


def get_samples(endpoints, step, prompts, version, theta, ledger):
    """Samples for `prompts` from a rollout; (groups, reply info) or (None, why).
    A rollout that fails (down, restarting, its reward service unreachable)
    is followed by the next, for up to STEP_DEADLINE seconds: a restart costs
    time, not samples."""
    want = len(prompts) * GROUP
    ledger.asked += want
    last = "no rollout endpoint"
    deadline = time.time() + STEP_DEADLINE
    attempt = -1
    while True:
        attempt += 1
        if attempt and time.time() > deadline:
            break
        eps = endpoints.refresh()
        if attempt:
            ledger.retries += 1
            time.sleep(min(0.1 * attempt, 1.0))
        if not eps:
            last = f"no ready rollout in {endpoints.source()}"
            continue
        ep = eps[(step + RANK + attempt) % len(eps)]
        req = {"request": f"{JOB}.{RANK}.{step}.{attempt}", "prompts": prompts, "group": GROUP}
        if endpoints.reward:
            req["reward"] = endpoints.reward
        try:
            out = post(f"http://{ep}/generate", req)
        except (OSError, ValueError, http.client.HTTPException) as e:
            last = f"{ep}: {e}"
            endpoints.failed()
            continue
        groups, stale = [[] for _ in prompts], []
        for k, s in enumerate(out.get("samples", [])[:want]):
            i = k // GROUP      # GROUP samples per prompt, in prompt order
            if s.get("ctx") != prompts[i]:
                ledger.lost += 1
                continue
            sid = s.get("id")
            if sid in ledger.seen:
                ledger.dup += 1
                continue
            ledger.seen.add(sid)
            pod, _, rest = str(sid).partition(":")
            ledger.boots.setdefault(pod, set()).add(rest.partition(":")[0])
            lag = version - int(s["version"])
            if lag > MAX_STALENESS:
                ledger.late += 1
                continue
            stale.append(lag)
            groups[i].append(s)
        got = sum(map(len, groups))
        ledger.used += got
        if isinstance(out.get("version"), int) and version - out["version"] > MAX_STALENESS:
            # A rollout that missed pushes (restarted: it starts at v0)
            # catches up at once rather than at the next step's push.
            catch_up(ep, version, theta, ledger)
        ledger.lost += max(0, want - len(out.get("samples", [])))
        return groups, {"ep": ep, "pod": out.get("pod"), "gpus": out.get("gpus"),
                        "rollout_version": out.get("version"), "stale": stale}
    ledger.lost += want
    return None, last


def catch_up(ep, version, theta, ledger):
    try:
        post(f"http://{ep}/weights", {"version": version, "theta": rlcore.theta_to_wire(theta)},
             timeout=5)
        ledger.catch_ups += 1
        log(f"rollout {ep} was behind; sent it weights v{version}")
    except (OSError, ValueError, http.client.HTTPException) as e:
        log(f"rollout {ep} was behind; sending it weights v{version} failed: {e}")


def push_weights(endpoints, version, theta):
    """POST the weights to every rollout, each retried 3 times; returns
    (seconds the push took, {endpoint: version held or error})."""
    t0 = time.time()
    wire = {"version": version, "theta": rlcore.theta_to_wire(theta)}
    held = {}
    for ep in endpoints.refresh():
        for i in range(3):
            try:
                held[ep] = post(f"http://{ep}/weights", wire, timeout=5)["version"]
                break
            except urllib.error.HTTPError as e:
                held[ep] = f"HTTP {e.code}"
                if e.code == 409:
                    break
            except (OSError, ValueError, http.client.HTTPException) as e:
                held[ep] = str(e)
            time.sleep(0.1 * 2 ** i)
    return time.time() - t0, held


GLOBAL_SEEN = set()    # rank 0: the id of every sample any rank used


def global_dedupe(star, ids):
    """The ids (of this rank's candidates) to drop because a rank used them
    before or another rank of lower number has them in this step."""
    parts = star.gather(ids)
    drops = None
    if RANK == 0:
        drops = []
        for part in parts:
            mine = []
            for i in part:
                if i in GLOBAL_SEEN:
                    mine.append(i)
                GLOBAL_SEEN.add(i)
            drops.append(mine)
    drops = star.bcast(drops)
    return drops[RANK]


# ------------------------------------------------------------ the run
def summary_plot(path, curve, staleness):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(range(1, len(curve) + 1), curve, marker="o", ms=3, label="mean reward")
    ax.axhline(rlcore.GOOD / rlcore.VOCAB, ls="--", c="grey", lw=1, label="uniform policy")
    ax.set_xlabel("step (weight version after it)")
    ax.set_ylabel("mean reward")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"online-RL job {JOB}: {WORLD} trainer ranks, max staleness "
                 f"{max(staleness) if staleness else 0}")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def main():
    log(f"CUDA_VISIBLE_DEVICES={ENV('CUDA_VISIBLE_DEVICES', '')} "
        f"SLURM_K8S_GPUS={ENV('SLURM_K8S_GPUS', '')}")
    endpoints = Endpoints()
    if not endpoints.api and not endpoints.wait():
        log(f"no rollout endpoints in {ENDPOINTS_FILE} after {WAIT:.0f}s; nothing to train on")
        return 1
    star = Star()
    if endpoints.api:
        # Rank 0 finds the services through the API and tells the others.
        first = None
        if RANK == 0:
            if endpoints.wait():
                first = endpoints.wire()
                log(f"rollout endpoints {', '.join(first['rollouts'])}"
                    + (f", reward {first['reward']}" if first["reward"] else "")
                    + f" (from {endpoints.source()})")
            else:
                log(f"no ready endpoints in {endpoints.source()} after {WAIT:.0f}s; "
                    "nothing to train on")
        first = star.bcast(first)
        if first is None:
            return 1
        endpoints.set(first)
    rng = np.random.default_rng(SEED * 1000 + RANK)
    theta, version = rlcore.initial_theta(), 0
    ledger = Ledger()
    ok_steps, curve, staleness, push_ms, step_s, push_misses = 0, [], [], [], [], 0
    held = {}
    t_run = time.time()
    for step in range(STEPS):
        t0 = time.time()
        prompts = [int(c) for c in rng.integers(rlcore.CONTEXTS, size=PROMPTS)]
        groups, info = get_samples(endpoints, step, prompts, version, theta, ledger)
        # No sample counted twice, across ranks too: rank 0 keeps every id
        # used so far and tells each rank which of its new ones to drop.
        drop = set(global_dedupe(star, [s["id"] for g in groups or [] for s in g]))
        if drop:
            log(f"step {step}: {len(drop)} samples already used elsewhere, dropped")
            ledger.dup += len(drop)
            ledger.used -= len(drop)
            groups = [[s for s in g if s["id"] not in drop] for g in groups]
        if groups is None:
            log(f"step {step}: no rollout answered ({info})")
            grad, n, rs, stale = np.zeros_like(theta), 0, [], []
        else:
            ok_steps += 1
            grad, n = rlcore.policy_gradient(theta, groups)
            rs = [s["reward"] for g in groups for s in g]
            stale = info["stale"]
        if STEP_SECONDS > 0:
            time.sleep(max(0.0, STEP_SECONDS - (time.time() - t0)))
        mine = {"grad": grad.tolist(), "n": n, "r": float(sum(rs)), "rn": len(rs),
                "stale": stale, "late": ledger.late, "lost": ledger.lost, "dup": ledger.dup}
        parts = star.gather(mine)
        if RANK == 0:
            total = sum(p["n"] for p in parts)
            g = sum(np.array(p["grad"]) for p in parts) / max(1, total)
            theta = theta + LR * g
            version += 1
            sync_s, held = push_weights(endpoints, version, theta)
            rn = sum(p["rn"] for p in parts)
            reward = sum(p["r"] for p in parts) / max(1, rn)
            st = [x for p in parts for x in p["stale"]]
            dt = time.time() - t0
            curve.append(round(reward, 4))
            staleness.append(max(st) if st else 0)
            push_ms.append(round(sync_s * 1000, 2))
            step_s.append(dt)
            bad_push = {ep: v for ep, v in held.items() if v != version}
            print(f"step {step + 1:3d}  weights v{version:<3d} mean reward {reward:.3f}  "
                  f"staleness mean {np.mean(st) if st else 0:.2f} max {staleness[-1]}  "
                  f"samples {rn} ({sum(p['late'] for p in parts)} late, "
                  f"{sum(p['lost'] for p in parts)} lost, {sum(p['dup'] for p in parts)} dup "
                  f"so far)  {rn / dt:.0f} samples/s  weight sync {push_ms[-1]:.1f} ms"
                  + (f"  NOT at v{version}: {bad_push}" if bad_push else ""), flush=True)
            push_misses += len(bad_push)
            msg = star.bcast({"theta": rlcore.theta_to_wire(theta), "version": version,
                              "endpoints": endpoints.wire()})
        else:
            msg = star.bcast(None)
            theta, version = rlcore.theta_from_wire(msg["theta"]), msg["version"]
            endpoints.set(msg["endpoints"])
        if groups is not None and step in (0, STEPS - 1):
            log(f"step {step}: rollout={info['pod']} (gpus {info['gpus']}) at weights "
                f"v{info['rollout_version']}, {sum(map(len, groups))} samples, mean reward "
                f"{np.mean([s['reward'] for g in groups for s in g]):.3f}")

    counts = {"asked": ledger.asked, "used": ledger.used, "late": ledger.late,
              "lost": ledger.lost, "duplicates": ledger.dup, "retries": ledger.retries,
              "catch_ups": ledger.catch_ups}
    totals = star.gather({"counts": counts,
                          "boots": {p: sorted(b) for p, b in ledger.boots.items()}})
    verdict = None
    if RANK == 0:
        tot = {k: sum(t["counts"][k] for t in totals) for k in counts}
        boots = {}
        for t in totals:
            for p, b in t["boots"].items():
                boots.setdefault(p, set()).update(b)
        first, last = float(np.mean(curve[:WINDOW])), float(np.mean(curve[-WINDOW:]))
        learned = last - first >= MARGIN
        summary = {
            "job": JOB, "ranks": WORLD, "steps": STEPS, "prompts_per_rank": PROMPTS,
            "group": GROUP, "lr": LR, "seed": SEED, "max_staleness": MAX_STALENESS,
            "reward_curve": curve, "first_mean": round(first, 4), "last_mean": round(last, 4),
            "gain": round(last - first, 4), "margin": MARGIN, "learned": learned,
            "samples": tot, "final_version": version,
            "rollout_versions": held, "staleness_max_per_step": staleness,
            "weight_push_misses": push_misses,
            "rollout_boots": {p: len(b) for p, b in sorted(boots.items())},
            "weight_sync_ms": push_ms,
            "weight_sync_ms_median": float(np.median(push_ms)) if push_ms else None,
            "steps_per_s": round(len(step_s) / max(1e-9, time.time() - t_run), 3),
            "samples_per_s": round(tot["used"] / max(1e-9, sum(step_s)), 1),
            "uniform_policy_reward": rlcore.GOOD / rlcore.VOCAB,
        }
        os.makedirs(SUMMARY_DIR, exist_ok=True)
        base = os.path.join(SUMMARY_DIR, f"online-rl-{JOB}")
        with open(base + ".json.tmp", "w") as f:
            json.dump(summary, f, indent=1)
        os.replace(base + ".json.tmp", base + ".json")
        plotted = summary_plot(base + ".png", curve, staleness)
        print(f"learning: mean reward {first:.3f} over the first {WINDOW} steps -> {last:.3f} "
              f"over the last {WINDOW} (gain {last - first:+.3f}, margin {MARGIN}: "
              f"{'learned' if learned else 'NOT LEARNED'}); samples {tot}; weights v{version}; "
              f"summary {base}.json" + (f", curve {base}.png" if plotted else ""), flush=True)
        verdict = {"ok": learned and tot["lost"] == 0 and tot["duplicates"] == 0}
    verdict = star.bcast(verdict)
    log(f"done: {ok_steps}/{STEPS} steps used real responses, {ledger.used} samples, "
        f"{ledger.late} late, {ledger.lost} lost, {ledger.dup} duplicates, "
        f"{ledger.retries} retries")
    return 0 if ok_steps == STEPS and verdict["ok"] else 2


if __name__ == "__main__":
    sys.exit(main())
