"""Opt-in valgrind memcheck for the component tests (agent and shim).

Off unless the environment asks for it, so the normal run is unchanged:
  SK_VALGRIND=1         run the agent (and, in test_agent_shim.sh, the shim)
                        under memcheck with the options below;
  SK_AGENT_WRAPPER=CMD  run the agent (the shim) under another command prefix
  SK_SHIM_WRAPPER=CMD   (shell words); `{log}` stands for a log path in the
                        test's directory, and such logs are checked like the
                        default run's, e.g. "valgrind --track-origins=yes
                        --error-exitcode=99 --log-file={log}";
  SK_TIME_SCALE=F       the factor for the harness's timeouts (default 1, or
                        15 when a wrapper is on: memcheck runs code 20-50x
                        slower, but the agent and shim mostly wait on I/O).

`verify(dir, check)` reads every memcheck log of the run once all processes
have stopped and turns what it finds into check results: a log of a process
that exited must say "ERROR SUMMARY: 0 errors" (definite, indirect and
possible leaks count as errors) and name no descriptor the program opened
and left open; a log of a process the test killed with SIGKILL has no
summary, and must hold no error. Still-reachable memory counts as an error
too (the agent and the shim free everything, libcurl, OpenSSL, GnuTLS and
libmicrohttpd included), except what tests/valgrind/slurm-k8s.supp lists:
one-time allocations of third-party libraries, each with its reason.
SK_VALGRIND_REACHABLE=0 reports definite, indirect and possible leaks only
(for a system whose libraries keep memory that is not suppressed yet).
"""
import glob, os, re, shlex

SUPP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "valgrind", "slurm-k8s.supp")
LOG_GLOB = "memcheck-*.log"


def _memcheck(log):
    kinds = "all"
    if os.environ.get("SK_VALGRIND_REACHABLE") == "0":
        kinds = "definite,indirect,possible"
    return ["valgrind", "--tool=memcheck", "--leak-check=full",
            "--show-leak-kinds=" + kinds, "--errors-for-leak-kinds=" + kinds,
            "--error-exitcode=99", "--track-fds=yes", "--num-callers=30",
            # A child between fork and exec/_exit shares the parent's memory
            # and descriptors: its leak and descriptor reports are the
            # parent's state, not findings (the agent's kill helper, spawns).
            "--child-silent-after-fork=yes",
            "--suppressions=" + SUPP, "--log-file=" + log]


def wrapper(name, directory):
    """The argv prefix for program `name` ("agent" or "shim"): [] when off."""
    var = os.environ.get(f"SK_{name.upper()}_WRAPPER", "")
    log = os.path.join(directory, f"memcheck-{name}.%p.log")
    if var:
        return [w.replace("{log}", log) for w in shlex.split(var)]
    if os.environ.get("SK_VALGRIND") == "1":
        return _memcheck(log)
    return []


def on():
    return bool(os.environ.get("SK_VALGRIND") == "1" or os.environ.get("SK_AGENT_WRAPPER")
                or os.environ.get("SK_SHIM_WRAPPER"))


def checking():
    """Whether the logs are memcheck's: SK_VALGRIND=1, or a wrapper that
    writes its log to `{log}` (another tool's log is left to the reader)."""
    return bool(os.environ.get("SK_VALGRIND") == "1" or any(
        "{log}" in os.environ.get(v, "") for v in ("SK_AGENT_WRAPPER", "SK_SHIM_WRAPPER")))


SCALE = float(os.environ.get("SK_TIME_SCALE") or (15 if on() else 1))

# Blocks of a memcheck log that are errors of the program (the first line of
# each block; memcheck separates blocks with an empty "==PID== " line).
ERROR_HEADS = re.compile(
    r"^(Invalid (read|write|free)|Mismatched free|Conditional jump or move depends"
    r"|Use of uninitialised value|Syscall param|Source and destination overlap"
    r"|Argument '.*' of function|.* are (definitely|indirectly|possibly) lost"
    r"|.* are still reachable|Process terminating with default action|Jump to the invalid"
    r"|Stack overflow|Invalid (alignment|size))")
# A descriptor open at exit that the process did not inherit is a leak (libuv
# closes its process-wide signal pipe in a destructor, so none is excused).
FD_HEAD = re.compile(r"^Open (file descriptor|AF_\w+ socket|pf-\d+ socket) (\d+)")


def blocks(text):
    """The log's blocks: lists of lines without the ==PID== prefix."""
    out, cur = [], []
    for line in text.splitlines():
        m = re.match(r"^==\d+== ?(.*)$", line)
        if not m:
            continue
        body = m.group(1)
        if body.strip() == "":
            if cur:
                out.append(cur)
            cur = []
        else:
            cur.append(body)
    if cur:
        out.append(cur)
    return out


def problems(text):
    """(complete, [problem blocks as text]) for one memcheck log."""
    bad = []
    for b in blocks(text):
        head = b[0].strip()
        if ERROR_HEADS.match(head):
            bad.append("\n".join(b))
        elif FD_HEAD.match(head) and int(FD_HEAD.match(head).group(2)) > 2:
            rest = "\n".join(b[1:])
            if "<inherited from parent>" in rest:
                continue
            bad.append("\n".join(b))
    summary = re.search(r"ERROR SUMMARY: (\d+) errors", text)
    if summary and summary.group(1) != "0" and not bad:
        bad.append(summary.group(0))
    return summary is not None, bad


def verify(directory, check, must_complete=()):
    """Checks every memcheck log in `directory`; `must_complete` are pids of
    processes the test stopped with SIGTERM (or that exited): their log must
    carry the final summary, i.e. the leak check ran."""
    paths = sorted(glob.glob(os.path.join(directory, LOG_GLOB)))
    check("memcheck logs written", paths, directory)
    for p in paths:
        text = open(p, errors="replace").read()
        pid = int(re.search(r"\.(\d+)\.log$", p).group(1))
        complete, bad = problems(text)
        name = os.path.basename(p)
        if not complete and pid in must_complete:
            bad.append("no ERROR SUMMARY: the process did not exit normally\n" + text[-3000:])
        state = "exited" if complete else "no summary (killed): errors only"
        check(f"memcheck {name} ({state}): no errors, leaks or open descriptors", not bad,
              "\n" + "\n\n".join(bad)[:12000])
