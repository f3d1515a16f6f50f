#!/usr/bin/env python3
"""Trainer rank of the online-RL example (a stand-in for an MPI trainer).

Reads the rollout endpoints (one "host:port" per line) from the file named by
ROLLOUT_ENDPOINTS_FILE (waiting for it to appear), then for STEPS steps sends
prompts to the rollout services round robin and logs each step with the
reward it got back. Logs its own GPU view, which must not contain the GPUs
lent to Kubernetes.
"""
import json
import os
import socket
import sys
import time
import urllib.request

STEPS = int(os.environ.get("STEPS", "6"))
ENDPOINTS_FILE = os.environ.get("ROLLOUT_ENDPOINTS_FILE", "rollout-endpoints.txt")
WAIT = float(os.environ.get("ENDPOINTS_WAIT_SECONDS", "120"))
RANK = os.environ.get("SLURM_PROCID", "0")
NODE = os.environ.get("SLURMD_NODENAME", socket.gethostname())


def log(msg):
    print(f"[trainer rank {RANK} on {NODE}] {msg}", flush=True)


def read_endpoints():
    deadline = time.time() + WAIT
    while time.time() < deadline:
        try:
            with open(ENDPOINTS_FILE) as f:
                eps = [line.strip() for line in f if line.strip()]
            if eps:
                return eps
        except FileNotFoundError:
            pass
        time.sleep(0.5)
    return []


def main():
    log(f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')} "
        f"SLURM_K8S_GPUS={os.environ.get('SLURM_K8S_GPUS', '')}")
    endpoints = read_endpoints()
    if not endpoints:
        log(f"no rollout endpoints in {ENDPOINTS_FILE} after {WAIT:.0f}s; nothing to train on")
        return 1
    total, ok = 0.0, 0
    for step in range(STEPS):
        ep = endpoints[(step + int(RANK)) % len(endpoints)]
        body = json.dumps({"prompt": f"rank{RANK}-step{step}", "step": step}).encode()
        req = urllib.request.Request(f"http://{ep}/generate", data=body,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                out = json.load(resp)
        except OSError as e:
            log(f"step {step}: rollout {ep} failed: {e}")
            continue
        ok += 1
        total += out["reward"]
        log(f"step {step}: rollout={out['pod']} (gpus {out['gpus']}) reward={out['reward']} "
            f"completion={out['completion'][:32]!r}")
        time.sleep(0.2)
    log(f"done: {ok}/{STEPS} steps used real responses, mean reward "
        f"{(total / ok if ok else 0):.4f}")
    return 0 if ok == STEPS else 2


if __name__ == "__main__":
    sys.exit(main())
