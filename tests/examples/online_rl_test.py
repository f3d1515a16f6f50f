#!/usr/bin/env python3
"""The online-RL example's programs (examples/online-rl) as plain processes,
without Slurm or Kubernetes (the e2e cases online_rl and online_rl_faults run
them in an allocation):

- the rollout's weight versions only grow (older refused with 409, the same
  again a no-op), bad weights and bad requests refused with 400;
- /generate: GROUP samples per prompt in order, unique ids POD:BOOT:N, the
  weight version, the reward service's scores; 503 when the reward service
  is gone (after its retries);
- the loop learns (run-local.sh), and with LR=0 it says NOT LEARNED and
  exits non-zero (the check can fail);
- a request naming the reward service's address ("reward": host:port, what
  the trainer takes from the reward Service's Endpoints) is scored there, a
  reward address that is not host:port refused with 400; the trainer reads
  a Service's Endpoints as the API gives them (ready addresses, the "http"
  port, ordered by pod);
- a rollout killed mid-run and started again on its port: the trainer
  carries on (the other rollout), the missed weight pushes are counted, the
  restarted rollout catches up, no sample is lost or counted twice.

usage: online_rl_test.py  (prints "ok"/"FAIL" lines and "N passed, N failed")
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("SK_TOP_SRCDIR") or os.path.dirname(os.path.dirname(HERE))
EX = os.path.join(SRC, "examples", "online-rl")
sys.path.insert(0, os.path.join(SRC, "tests", "pylib"))
sys.path.insert(0, EX)
from sktest.suite import RESULTS, check, wait_for  # noqa: E402
import rlcore  # noqa: E402

PY = sys.executable


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(url, body=None, timeout=10):
    """(status, reply JSON) of a GET (body None) or a POST."""
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


class Procs:
    def __init__(self, d):
        self.d, self.procs = d, {}

    def start(self, name, script, **env):
        log = open(os.path.join(self.d, name + ".log"), "a")
        p = subprocess.Popen([PY, os.path.join(EX, script)], stdout=log, stderr=subprocess.STDOUT,
                             env=dict(os.environ, POD_NAME=name, **{k: str(v) for k, v in env.items()}))
        self.procs[name] = p
        return p

    def service(self, name, script, port, **env):
        self.start(name, script, PORT=port, **env)
        up = wait_for(lambda: self._up(port), timeout=20)
        if not up:
            raise RuntimeError(f"{name} did not answer on port {port}")

    @staticmethod
    def _up(port):
        try:
            return call(f"http://127.0.0.1:{port}/healthz", timeout=1)[0] == 200
        except OSError:
            return False

    def kill(self, name, sig=signal.SIGKILL):
        p = self.procs.pop(name)
        p.send_signal(sig)
        p.wait(timeout=20)

    def stop(self):
        for p in self.procs.values():
            p.kill()
            p.wait()


def test_services(procs):
    rp, op = free_port(), free_port()
    procs.service("reward", "reward.py", rp)
    procs.service("rollout-a", "rollout.py", op, REWARD_URL=f"http://127.0.0.1:{rp}")
    base = f"http://127.0.0.1:{op}"
    theta = rlcore.initial_theta()
    theta[0, 3] = 2.0
    w = rlcore.theta_to_wire(theta)
    check("weights v5 accepted", call(base + "/weights", {"version": 5, "theta": w}) == (200, {"version": 5}))
    st, body = call(base + "/weights", {"version": 4, "theta": w})
    check("an older version is refused with 409, naming the one held", st == 409 and body.get("version") == 5,
          (st, body))
    check("the same version again is a no-op", call(base + "/weights", {"version": 5, "theta": w})[0] == 200)
    st, _ = call(base + "/weights", {"version": 6, "theta": [[0.0] * 3]})
    check("weights of the wrong shape refused with 400", st == 400, st)
    st, _ = call(base + "/weights", b'{"version": 6, "theta": ' +
                 json.dumps([[float("nan")] * rlcore.VOCAB] * rlcore.CONTEXTS).encode() + b"}")
    check("non-finite weights refused with 400", st == 400, st)
    check("the rollout still holds v5", call(base + "/healthz")[1].get("version") == 5)

    st, out = call(base + "/generate", {"request": "t1", "prompts": [0, 5, 0], "group": 4})
    s = out.get("samples", [])
    check("generate: 4 samples per prompt, in prompt order", st == 200 and [x["ctx"] for x in s] ==
          [0] * 4 + [5] * 4 + [0] * 4, (st, [x.get("ctx") for x in s]))
    ids = [x["id"] for x in s]
    check("generate: ids unique, POD:BOOT:N", len(set(ids)) == 12 and all(
        i.startswith("rollout-a:") and len(i.split(":")) == 3 for i in ids), ids[:3])
    check("generate: every sample tagged with weights v5", out.get("version") == 5 and
          all(x["version"] == 5 for x in s))
    check("generate: rewards are the reward model's scores", all(
        abs(x["reward"] - rlcore.score(x["ctx"], x["tokens"])) < 1e-9 for x in s))
    check("generate: log-probabilities under the weights held", all(
        abs(x["logp"] - rlcore.logprob(theta, x["ctx"], x["tokens"])) < 1e-6 for x in s))
    st2, out2 = call(base + "/generate", {"request": "t2", "prompts": [1], "group": 2})
    check("ids of the next request are new", not set(ids) & {x["id"] for x in out2.get("samples", [])})
    for bad, why in (({"prompts": [rlcore.CONTEXTS], "group": 1}, "a context out of range"),
                     ({"prompts": [0] * 100, "group": 100}, "more than 4096 samples"),
                     ({"prompts": [0], "group": 0}, "group 0"), ({"group": 1}, "no prompts")):
        check(f"generate refuses {why} with 400", call(base + "/generate", bad)[0] == 400)
    for bad, why in (({"items": [{"prompt": 0, "completion": [rlcore.VOCAB]}]}, "a token out of range"),
                     ({"items": [{"prompt": -1, "completion": [0]}]}, "a context out of range"),
                     ({"items": [{"prompt": 0, "completion": []}]}, "an empty completion"),
                     ({"items": "x"}, "items not a list")):
        check(f"score refuses {why} with 400", call(f"http://127.0.0.1:{rp}/score", bad)[0] == 400)
    # The reward address in the request wins over REWARD_URL (here a port
    # nothing listens on).
    rp2 = free_port()
    procs.service("reward-b", "reward.py", rp2, BIND_ADDRESS="127.0.0.1")
    procs.kill("reward")
    st, out = call(base + "/generate", {"request": "t2b", "prompts": [2], "group": 3,
                                        "reward": f"127.0.0.1:{rp2}"})
    check("generate scores at the reward address the request names", st == 200 and len(out.get("samples", [])) == 3,
          (st, out))
    for bad in ("http://127.0.0.1:1/x", "127.0.0.1", "a b:1", 5, "127.0.0.1:1/score"):
        check(f"generate refuses the reward address {bad!r} with 400",
              call(base + "/generate", {"prompts": [0], "group": 1, "reward": bad})[0] == 400)
    procs.kill("reward-b")
    st, out = call(base + "/generate", {"request": "t3", "prompts": [0], "group": 2})
    check("generate answers 503 when the reward service is gone", st == 503 and "reward" in out.get("error", ""),
          (st, out))
    procs.kill("rollout-a", signal.SIGTERM)


def test_endpoints_of():
    """trainer.endpoints_of on an Endpoints object as the API server's
    endpoints controller writes it (two ready pods, one not ready)."""
    import importlib
    trainer = importlib.import_module("trainer")
    ep = {"kind": "Endpoints", "metadata": {"name": "rollout", "namespace": "default"},
          "subsets": [{"addresses": [{"ip": "10.0.0.12", "nodeName": "slurm-n2-7",
                                      "targetRef": {"kind": "Pod", "name": "rollout-5d8f-b"}},
                                     {"ip": "10.0.0.11", "nodeName": "slurm-n1-7",
                                      "targetRef": {"kind": "Pod", "name": "rollout-5d8f-a"}}],
                       "notReadyAddresses": [{"ip": "10.0.0.13", "targetRef": {"kind": "Pod", "name": "rollout-5d8f-c"}}],
                       "ports": [{"name": "metrics", "port": 9100, "protocol": "TCP"},
                                 {"name": "http", "port": 18080, "protocol": "TCP"}]}]}
    got = trainer.endpoints_of(ep)
    check("endpoints_of: the ready addresses at the http port, by pod", got == ["10.0.0.11:18080", "10.0.0.12:18080"],
          got)
    v6 = {"subsets": [{"addresses": [{"ip": "fd00::5"}], "ports": [{"port": 7}]}]}
    check("endpoints_of: an IPv6 address in brackets, the only port", trainer.endpoints_of(v6) == ["[fd00::5]:7"],
          trainer.endpoints_of(v6))
    check("endpoints_of: no subsets, no endpoints", trainer.endpoints_of({"metadata": {}}) == [])


def run_local(d, **env):
    r = subprocess.run(["bash", os.path.join(EX, "run-local.sh"), d], capture_output=True, text=True,
                       env=dict(os.environ, PYTHON3=PY, **{k: str(v) for k, v in env.items()}))
    try:
        summary = json.load(open(os.path.join(d, "online-rl-local.json")))
    except (OSError, ValueError):
        summary = None
    return r, summary


def test_learning(d):
    base = 20000 + os.getpid() % 5000     # run-local.sh takes base .. base+2 and base+100
    r, s = run_local(os.path.join(d, "learn"), RANKS=2, ROLLOUTS=2, STEPS=30, BASE_PORT=base)
    check("run-local: 2 ranks, 2 rollouts, 30 steps exit 0", r.returncode == 0, r.stdout[-600:] + r.stderr[-300:])
    check("the policy learned (gain >= margin)", s and s["learned"] and s["gain"] >= s["margin"],
          s and (s["first_mean"], s["last_mean"]))
    check("every sample used, none lost, late or duplicated", s and s["samples"]["used"] == s["samples"]["asked"]
          and s["samples"]["lost"] == s["samples"]["late"] == s["samples"]["duplicates"] == 0, s and s["samples"])
    check("every rollout holds the last version", s and set(s["rollout_versions"].values()) == {30},
          s and s["rollout_versions"])
    check("the reward curve was drawn", os.path.exists(os.path.join(d, "learn", "online-rl-local.png")))
    r, s = run_local(os.path.join(d, "nolearn"), RANKS=1, ROLLOUTS=1, STEPS=15, LR=0, BASE_PORT=base + 10)
    check("LR=0: NOT LEARNED and a non-zero exit", r.returncode != 0 and "NOT LEARNED" in r.stdout and s
          and not s["learned"], (r.returncode, r.stdout[-300:]))


def test_rollout_restart(procs, d):
    rp, pa, pb, mp = free_port(), free_port(), free_port(), free_port()
    procs.service("reward", "reward.py", rp)
    reward = f"http://127.0.0.1:{rp}"
    procs.service("rollout-a", "rollout.py", pa, REWARD_URL=reward)
    procs.service("rollout-b", "rollout.py", pb, REWARD_URL=reward)
    eps = os.path.join(d, "endpoints.txt")
    with open(eps, "w") as f:
        f.write(f"127.0.0.1:{pa}\n127.0.0.1:{pb}\n")
    out = os.path.join(d, "trainer.log")
    trainer = subprocess.Popen(
        [PY, os.path.join(EX, "trainer.py")], stdout=open(out, "w"), stderr=subprocess.STDOUT,
        env=dict(os.environ, STEPS="80", ROLLOUT_ENDPOINTS_FILE=eps, SUMMARY_DIR=d, SLURM_JOB_ID="restart",
                 MASTER_PORT=str(mp), SLURM_PROCID="0", SLURM_NTASKS="1"))

    def at_step(n):
        return lambda: any(line.startswith("step %3d " % n) for line in open(out))
    check("the loop reached step 10", wait_for(at_step(10), timeout=60))
    procs.kill("rollout-b")
    check("the loop goes on without rollout-b (step 25)", wait_for(at_step(25), timeout=60))
    procs.service("rollout-b", "rollout.py", pb, REWARD_URL=reward)
    rc = trainer.wait(timeout=300)
    log = open(out).read()
    check("the trainer exited 0", rc == 0, log[-800:])
    try:
        s = json.load(open(os.path.join(d, "online-rl-restart.json")))
    except (OSError, ValueError) as e:
        check("the trainer wrote its summary", False, e)
        return
    check("weight pushes to the dead rollout were missed and counted", s["weight_push_misses"] >= 1 and
          "NOT at v" in log, s["weight_push_misses"])
    check("no sample lost or counted twice; used + late = asked", s["samples"]["lost"] ==
          s["samples"]["duplicates"] == 0 and s["samples"]["used"] + s["samples"]["late"] ==
          s["samples"]["asked"], s["samples"])
    check("samples from both lives of rollout-b", s["rollout_boots"].get("rollout-b") == 2, s["rollout_boots"])
    check("both rollouts end at the last version", set(s["rollout_versions"].values()) == {80},
          s["rollout_versions"])
    check("it still learned", s["learned"], (s["first_mean"], s["last_mean"]))


def main():
    t0 = time.time()
    d = tempfile.mkdtemp(prefix="sk-online-rl-")
    procs = Procs(d)
    try:
        test_services(procs)
        test_endpoints_of()
        test_learning(d)
        test_rollout_restart(procs, d)
    except Exception as e:  # a crash of the harness is a failure, not a pass
        RESULTS["failed"] += 1
        print("FAIL harness: %r" % (e,))
    finally:
        procs.stop()
    print(f"     total {time.time() - t0:.1f} s")
    print(f"{RESULTS['passed']} passed, {RESULTS['failed']} failed")
    if RESULTS["failed"]:
        print("logs kept in " + d)
    else:
        subprocess.run(["rm", "-rf", d])
    return 1 if RESULTS["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
