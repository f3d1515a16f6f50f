"""sktest - the Python helpers shared by slurm-k8s' test layers and benchmarks.

Used by the component tests (tests/component), the shim tests (tests/shim), the soak
(tests/soak), the valgrind layer (tests/valgrind) and the benchmarks (bench/). Python 3 standard
library only. A script puts tests/pylib on sys.path and imports what it needs:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
    from sktest.suite import check, wait_for

Modules:
  programs  the source and build trees, the programs under test: agent_binary() (which agent
            binary an agent of a runtime runs), shim_binary(), shim_argv(), the test API server
  kube      the test API server (tests/kube/kube_test_server.py) in a private state dir, its
            certificates and tokens, API requests, /_test controls, a streaming watch
  agent     the agent's config file, starting it until its socket answers, one socket request
  host      free TCP ports, processes: alive, found by a marker, RSS and CPU time
  memcheck  the opt-in valgrind wrapper and the check of its logs (SK_VALGRIND=1)
  suite     check lines and "N passed, N failed", waits with the memcheck time scale, run_suite
  env       the component suites' environment: test API server + agent (AgentEnv), + shim
            (ShimEnv), the registered job and its pods
"""
