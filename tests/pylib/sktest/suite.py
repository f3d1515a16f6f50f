"""A suite's results: check lines ("ok   NAME" / "FAIL NAME: detail"), the closing
"N passed, N failed" line, waits whose timeouts stretch under memcheck (memcheck.SCALE), and
run_suite, the main body of the component suites on an env.AgentEnv."""
import os
import shutil
import time

from . import memcheck

# Timeouts stretch only when a wrapper (valgrind) slows the programs down.
SCALE = memcheck.SCALE
RESULTS = {"passed": 0, "failed": 0}


def record(passed, name):
    """The check as a line of the one result protocol (tests/lib/report.sh),
    appended to $SK_RESULT_FILE when it is set."""
    path = os.environ.get("SK_RESULT_FILE")
    if not path:
        return
    line = ("ok - " if passed else "not ok - ") + " ".join(str(name).split()) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode(errors="replace"))
    finally:
        os.close(fd)


def check(name, cond, detail=""):
    if cond:
        RESULTS["passed"] += 1
        print("ok   " + name)
    else:
        RESULTS["failed"] += 1
        print("FAIL " + name + (": " + str(detail) if detail else ""))
    record(bool(cond), name)


def wait_for(fn, timeout=10.0, step=0.1):
    """Calls fn until it returns something true (returned) or timeout * SCALE s passed (the
    last value returned)."""
    end = time.time() + timeout * SCALE
    last = None
    while time.time() < end:
        last = fn()
        if last:
            return last
        time.sleep(step)
    return last


def run_suite(env, body, logs):
    """Starts the test API server and the agent of `env`, runs `body(env)`,
    stops everything, prints "N passed, N failed" (and the tails of `logs`
    from env.dir when something failed); returns the exit status."""
    t0 = time.time()
    try:
        env.start_kube()
        env.write_conf()
        env.start_agent()
        body(env)
    except Exception as e:  # a crash of the harness is a failure, not a pass
        RESULTS["failed"] += 1
        print("FAIL harness: %r" % (e,))
        record(False, "harness: %r" % (e,))
    finally:
        env.stop()
    print(f"     total {time.time() - t0:.1f} s")
    print(f"{RESULTS['passed']} passed, {RESULTS['failed']} failed")
    if RESULTS["failed"]:
        print("logs kept in " + env.dir)
        for f in logs:
            print(f"--- {f}")
            path = os.path.join(env.dir, f)
            print(open(path).read()[-4000:] if os.path.exists(path) else "(none)")
    else:
        shutil.rmtree(env.dir, ignore_errors=True)
    return 1 if RESULTS["failed"] else 0
