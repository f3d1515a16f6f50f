#!/usr/bin/env python3
"""Rollout generator service of the online-RL example (a stand-in for vLLM).

POST /generate {"request": str, "prompts": [ctx, ...], "group": G, "reward": "host:port"}
     -> {"pod", "version", "gpus", "samples": [{"id", "ctx", "tokens", "logp",
         "reward", "version"}, ...]}   (G samples per prompt, in prompt order)
POST /weights  {"version": V, "theta": [[...], ...]}
     -> 200 {"version": V} when V >= the version held (the same V again is a
        no-op), 409 {"version": held} when V is older: versions only grow
GET  /healthz  -> {"status": "ok", "version": V, "gpus": ...} (readiness probe)

Each sample is drawn from the policy with the weights held when the request
arrived, tagged with their version and its log-probability under them (so the
trainer can tell how stale it is and reweight it), and scored by the reward
service (one batched call per request, retried: at the request's "reward"
address, which the trainer takes from the reward Service's Endpoints, else at
REWARD_URL), so every sample
the trainer gets went through two real HTTP hops. A sample's id is
POD_NAME:BOOT:N, unique across restarts of the pod. Listens on
BIND_ADDRESS:PORT (the pod's IP from the downward API: pods share their node's
network, so replicas on different nodes use the same port). Starts at version 0 (the
trainer's initial weights) until the first push. Stops cleanly on SIGTERM
within the pod's grace period.
"""
import json
import os
import re
import signal
import sys
import threading
import time
import urllib.request
import zlib
from http.server import BaseHTTPRequestHandler

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rlcore  # noqa: E402  (the example's shared module, next to this file)

PORT = int(os.environ.get("PORT", "18080"))
BIND = os.environ.get("BIND_ADDRESS", "0.0.0.0")
NAME = os.environ.get("POD_NAME", "rollout")
REWARD_URL = os.environ.get("REWARD_URL", "http://127.0.0.1:18090")
GPUS = os.environ.get("CUDA_VISIBLE_DEVICES", "")
MAX_SAMPLES = 4096
# A reward address in a request: host:port or [v6]:port, nothing else (the
# rollout calls only a reward service, never a URL a request makes up).
REWARD_ADDR = re.compile(r"^([0-9A-Za-z.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]):[0-9]{1,5}$")
BOOT = f"{int(time.time() * 1000) % 10**9:x}{os.getpid():x}"


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.version = 0
        self.theta = rlcore.initial_theta()
        self.counter = 0
        # Seeded by the pod's name too: in an image container every
        # rollout's python is pid 1.
        self.rng = np.random.default_rng(
            [int(os.environ.get("SEED", "0")), os.getpid(), zlib.crc32(NAME.encode()),
             int(time.time() * 1000) % 2**32])


STATE = State()


def log(msg):
    print(f"[{NAME}] {msg}", flush=True)


def ask_reward(items, url, tries=3):
    body = rlcore.dumps({"items": items})
    err = None
    for i in range(tries):
        req = urllib.request.Request(url + "/score", data=body,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                scores = json.load(resp)["scores"]
            if len(scores) != len(items):
                raise ValueError(f"{len(scores)} scores for {len(items)} completions")
            return scores
        except (OSError, ValueError, KeyError) as e:
            err = e
            time.sleep(0.2 * 2 ** i)
    raise OSError(f"reward service at {url}: {err}")


def generate(prompts, group, reward_url):
    with STATE.lock:
        version, theta = STATE.version, STATE.theta
        first = STATE.counter
        STATE.counter += len(prompts) * group
        rng = np.random.default_rng(STATE.rng.integers(1 << 62))
    samples = []
    for ctx in prompts:
        for _ in range(group):
            toks, lp = rlcore.sample(theta, ctx, rng)
            samples.append({"id": f"{NAME}:{BOOT}:{first + len(samples)}", "ctx": ctx,
                            "tokens": toks, "logp": lp, "version": version})
    scores = ask_reward([{"prompt": s["ctx"], "completion": s["tokens"]} for s in samples],
                        reward_url)
    for s, r in zip(samples, scores):
        s["reward"] = r
    return version, samples


class Handler(BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):
        pass

    def _reply(self, code, body):
        data = rlcore.dumps(body)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self):
        n = int(self.headers.get("Content-Length", "0"))
        if n > 1 << 20:
            raise ValueError("body over 1 MiB")
        return json.loads(self.rfile.read(n))

    def do_GET(self):
        if self.path == "/healthz":
            self._reply(200, {"status": "ok", "gpus": GPUS, "version": STATE.version})
        else:
            self._reply(404, {"error": "not found"})

    def do_POST(self):
        if self.path == "/weights":
            self._weights()
        elif self.path == "/generate":
            self._generate()
        else:
            self._reply(404, {"error": "not found"})

    def _weights(self):
        try:
            req = self._body()
            version, theta = int(req["version"]), rlcore.theta_from_wire(req["theta"])
        except (ValueError, KeyError, TypeError) as e:
            self._reply(400, {"error": f"bad request: {e}"})
            return
        with STATE.lock:
            if version < STATE.version:
                held = STATE.version
            else:
                held = None
                if version > STATE.version:
                    STATE.version, STATE.theta = version, theta
        if held is not None:
            log(f"refused weights version {version}: holding {held} (versions only grow)")
            self._reply(409, {"error": f"version {version} is older than {held}",
                              "version": held})
            return
        self._reply(200, {"version": version})

    def _generate(self):
        try:
            req = self._body()
            prompts = [int(c) for c in req["prompts"]]
            group = int(req["group"])
            reward = req.get("reward")
            if reward is not None and not (isinstance(reward, str) and REWARD_ADDR.match(reward)):
                raise ValueError(f"reward must be host:port, not {reward!r}")
            if not 1 <= group or len(prompts) * group > MAX_SAMPLES or \
                    any(not 0 <= c < rlcore.CONTEXTS for c in prompts):
                raise ValueError(f"prompts in 0..{rlcore.CONTEXTS - 1}, "
                                 f"prompts x group at most {MAX_SAMPLES}")
        except (ValueError, KeyError, TypeError) as e:
            self._reply(400, {"error": f"bad request: {e}"})
            return
        try:
            version, samples = generate(prompts, group,
                                        f"http://{reward}" if reward else REWARD_URL)
        except OSError as e:
            log(f"request {req.get('request')}: {e}")
            self._reply(503, {"error": str(e)})
            return
        self._reply(200, {"pod": NAME, "version": version, "gpus": GPUS, "samples": samples})


def main():
    server = rlcore.http_server(BIND, PORT, Handler)

    def on_term(signum, _frame):
        log(f"received signal {signum}: draining and stopping")
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    log(f"serving on {BIND}:{PORT}, {rlcore.gpu_note()}, reward at {REWARD_URL} unless a request "
        f"names one, "
        f"weights version {STATE.version}")
    server.serve_forever()
    log(f"stopped at weights version {STATE.version}, {STATE.counter} samples made")
    return 0


if __name__ == "__main__":
    sys.exit(main())
