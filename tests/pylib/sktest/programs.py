"""The source and build trees and the programs the tests and benchmarks run.

SK_TOP_SRCDIR and SK_TOP_BUILDDIR (set by the make rules and launchers) name the trees; without
them the source tree is the one holding this package and the build tree is the source tree.
"""
import os

SRCDIR = os.environ.get("SK_TOP_SRCDIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
BUILDDIR = os.environ.get("SK_TOP_BUILDDIR") or SRCDIR
SERVER_PY = os.path.join(SRCDIR, "tests", "kube", "kube_test_server.py")


def agent_binary(runtime, given=None):
    """The slurm-k8s-agent program to run for an agent whose config says `runtime = RUNTIME`
    (fake: pods are records, shim: pods run in a slurm-k8s-shim). `given` is the program a
    suite was told to test (its --agent); None: the build tree's. Every suite and benchmark
    chooses its agent program here. The shipped daemon offers the shim only; runtime = fake is
    offered by the agent's test build (tests/agent/slurm-k8s-test-agent), which never ships."""
    if given:
        return given
    if runtime == "fake":
        return os.path.join(BUILDDIR, "tests", "agent", "slurm-k8s-test-agent")
    return os.path.join(BUILDDIR, "agent", "slurm-k8s-agent")


def shim_binary(given=None):
    """The slurm-k8s-shim program: `given` (a suite's --shim), else the build tree's."""
    return given or os.path.join(BUILDDIR, "k8s-shim", "slurm-k8s-shim")


# plugstack.conf's shim_nice default: the plugin starts the shim at this nice value and
# passes its own as --workload-nice (spank/hooks_extern.cc).
SHIM_NICE = -5


def shim_argv(shim, job_id, sock, slurm_node="n1", log_level=None):
    """The shim's command line as the plugin's extern step starts it, attached to the agent
    socket `sock` (the agent authenticates it by uid: shim_auth = uid); the pods' commands at
    the caller's nice value. Start it with preexec_fn=shim_priority, as the plugin does."""
    argv = [shim, "--job-id", str(job_id), "--slurm-node", slurm_node, "--socket", sock]
    if log_level:
        argv += ["--log-level", log_level]
    return argv + ["--workload-nice", str(os.getpriority(os.PRIO_PROCESS, 0))]


def shim_priority():
    """In the shim's child before its exec: SHIM_NICE, as the plugin sets it (only root may
    lower a nice value; other callers leave it)."""
    if os.geteuid() == 0:
        os.setpriority(os.PRIO_PROCESS, 0, SHIM_NICE)
