#!/usr/bin/python3
"""The agent stopped with SIGTERM in the middle of its work, under memcheck.

The component suites stop the agent when it is idle; this one stops it while
everything is pending: two virtual nodes with running pods (runtime=fake), an
API server that refuses connections (watches and Lease renewals retrying), a
deregister whose deletes went to the background retry, a socket client that
sent half a line and one that sent nothing. The agent must exit 0, promptly,
and memcheck must find no error, no leak and no descriptor left open
(tests/pylib/sktest/memcheck.py). Prints `N passed, N failed`.
"""
import os, signal, socket, sys, time

if not any(os.environ.get(v) for v in ("SK_VALGRIND", "SK_AGENT_WRAPPER")):
    os.environ["SK_VALGRIND"] = "1"  # this test exists for memcheck
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from sktest.env import REG, phase, pod, suite_main  # noqa: E402
from sktest.suite import SCALE, check, wait_for  # noqa: E402


def run(env):
    lease = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/"
    for job in (42, 45):
        open(os.path.join(env.dir, f"alive_{job}"), "w").close()
        r = env.call("register", dict(REG, job_id=job))
        check(f"job {job} registers", r and r.get("ok"), r)
        check(f"job {job} Lease exists", wait_for(
            lambda: env.api("GET", lease + f"slurm-n1-{job}")[0] == 200, 5))
        p = pod(f"p{job}")
        p["spec"]["nodeName"] = f"slurm-n1-{job}"
        env.api("POST", "/api/v1/namespaces/default/pods", p)
        check(f"pod p{job} Running", wait_for(lambda: phase(env, "default", f"p{job}") == "Running", 5))
    env.api("POST", "/_test/fault", {"mode": "refuse", "seconds": 60})
    r = env.call("deregister", {"job_id": 45, "slurm_node": "n1", "grace_s": 0, "reason": "JobEnded"})
    check("deregister during the outage answers", r and r.get("ok"), r)
    log = os.path.join(env.dir, "agent.log")
    check("its deletes are retried in the background", wait_for(
        lambda: "retrying in the background" in open(log).read(), 5))
    idle = socket.socket(socket.AF_UNIX)
    idle.connect(os.path.join(env.dir, "agent.sock"))
    half = socket.socket(socket.AF_UNIX)
    half.connect(os.path.join(env.dir, "agent.sock"))
    half.sendall(b'{"v": 1, "id": 7, "op": "li')
    time.sleep(1.5)  # the Lease renewal and the watch of job 42 fail and retry meanwhile
    t0 = time.time()
    env.agent.send_signal(signal.SIGTERM)
    try:
        rc = env.agent.wait(10 * SCALE)
    except Exception as e:  # noqa: BLE001 (a hang is the failure being tested)
        rc = e
    env.exited.append(env.agent.pid)
    check("agent exits 0 on SIGTERM with all that pending", rc == 0, rc)
    print(f"     SIGTERM -> exit {1000 * (time.time() - t0):.0f} ms (memcheck leak check included)")
    text = open(log).read()
    check("background deletes handed to garbage collection at stop",
          "left to garbage collection" in text, text[-1500:])
    check("no handle left open at teardown", "handle still open" not in text, text[-1500:])
    idle.close()
    half.close()


def main():
    return suite_main(run)


if __name__ == "__main__":
    sys.exit(main())
