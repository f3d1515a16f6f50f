# kubelet endpoint, CRI log files, metrics, CLI (see agent/local.mk for the core)
