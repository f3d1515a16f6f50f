#!/usr/bin/python3
"""kube_test_server.py - a Kubernetes API *test double* (NOT a Kubernetes API server).

The entry point of the kubetest package beside this file (tests/kube/kubetest/: the code, its
usage and the /_test controls are documented there; tests/kube/README.md for the differences
from a real kube-apiserver). Python 3 standard library only.

  kube_test_server.py --listen 127.0.0.1:0 --state-dir DIR [options]
"""
import sys

sys.dont_write_bytecode = True  # the source tree may be read-only (make distcheck)
from kubetest.main import main  # noqa: E402  (after the flag: no __pycache__ beside the sources)

if __name__ == "__main__":
    main()
