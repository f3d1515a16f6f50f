"""What the online-RL example's three programs share: the task, the policy and
the wire format (imported by trainer.py, rollout.py and reward.py from their
own directory).

The task: a prompt is a context id (0..CONTEXTS-1); a completion is LENGTH
tokens from VOCAB. The reward model prefers, for each context, a hidden set of
GOOD tokens out of the VOCAB (derived from a hash of the context: the trainer
never sees it, it learns it from the scores). A uniform policy scores
GOOD/VOCAB = 0.25 on average; a policy that learned the task scores near 1.

The policy: a softmax over the vocabulary per context, logits THETA
(CONTEXTS x VOCAB, float64), tokens drawn independently. Its weights travel as
JSON (a list of lists) with a version number that only grows.
"""
import hashlib
import json
import math
import os
import re

import numpy as np

WORDS = ("policy gradient value advantage reward token sample rollout batch update "
         "critic actor entropy baseline return horizon").split()
VOCAB = len(WORDS)       # 16
CONTEXTS = 8
LENGTH = 6
GOOD = 4                 # good tokens per context


def good_tokens(ctx):
    """The reward model's hidden preference for context `ctx` (a set of token ids)."""
    h = hashlib.sha256(f"online-rl context {ctx}".encode()).digest()
    return set(sorted(range(VOCAB), key=lambda t: (h[t], t))[:GOOD])


def score(ctx, tokens):
    """The reward: the share of the completion's tokens that are good for ctx."""
    good = good_tokens(ctx)
    return sum(1 for t in tokens if t in good) / len(tokens)


def initial_theta():
    return np.zeros((CONTEXTS, VOCAB))


def probs(theta, ctx):
    z = theta[ctx] - theta[ctx].max()
    e = np.exp(z)
    return e / e.sum()


def sample(theta, ctx, rng):
    """One completion (token ids) and its log-probability under theta."""
    p = probs(theta, ctx)
    toks = rng.choice(VOCAB, size=LENGTH, p=p)
    return [int(t) for t in toks], float(np.log(p[toks]).sum())


def logprob(theta, ctx, tokens):
    return float(np.log(probs(theta, ctx)[tokens]).sum())


def policy_gradient(theta, groups, max_ratio=2.0):
    """REINFORCE with a group baseline (GRPO-style): for each group of samples
    of one prompt, the advantage of a sample is its reward minus the group's
    mean over the group's standard deviation; each sample's score function
    (d log pi / d theta) is weighted by it and by the importance ratio
    pi_theta / pi_behaviour (clipped at max_ratio) for samples a rollout made
    with older weights. Returns (gradient to ascend, samples used).

    groups: lists of dicts with ctx, tokens, reward, logp (behaviour)."""
    grad = np.zeros_like(theta)
    n = 0
    for g in groups:
        r = np.array([s["reward"] for s in g])
        if len(g) < 2:
            continue
        adv = (r - r.mean()) / (r.std() + 1e-6)
        for s, a in zip(g, adv):
            ctx, toks = s["ctx"], s["tokens"]
            ratio = min(math.exp(logprob(theta, ctx, toks) - s["logp"]), max_ratio)
            counts = np.bincount(toks, minlength=VOCAB)
            grad[ctx] += ratio * a * (counts - len(toks) * probs(theta, ctx))
            n += 1
    return grad, n


def theta_to_wire(theta):
    return [[round(float(x), 12) for x in row] for row in theta]


def theta_from_wire(rows):
    a = np.array(rows, dtype=float)
    if a.shape != (CONTEXTS, VOCAB) or not np.all(np.isfinite(a)):
        raise ValueError(f"weights of shape {a.shape}, want ({CONTEXTS}, {VOCAB}) finite")
    return a


def dumps(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


def gpu_note():
    """The GPUs this process was given, for its first log line:
    CUDA_VISIBLE_DEVICES (what CUDA numbers), NVIDIA_VISIBLE_DEVICES when set
    (the node's indices of a container's GPUs: inside an image container
    CUDA numbers them from 0) and the /dev/nvidiaN device nodes it can see."""
    note = f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')}"
    if "NVIDIA_VISIBLE_DEVICES" in os.environ:
        note += f" NVIDIA_VISIBLE_DEVICES={os.environ['NVIDIA_VISIBLE_DEVICES']}"
    try:
        devs = sorted(d for d in os.listdir("/dev") if re.fullmatch(r"nvidia[0-9]+", d))
    except OSError:
        devs = []
    return note + f" devices=[{','.join(devs)}]"


def http_server(bind, port, handler):
    """A threading HTTP server on bind:port (an IPv4 or IPv6 address: the
    pod's IP, from the downward API)."""
    import socket
    from http.server import ThreadingHTTPServer

    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ":" in bind else socket.AF_INET
        daemon_threads = True

    return Server((bind, port), handler)
