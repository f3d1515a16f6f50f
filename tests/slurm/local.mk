# Real-Slurm test harness (tests/slurm/README.md).  Not part of `make check`:
# it needs root and starts daemons; `make check-integration` runs smoke.sh.
# (This fragment itself is distributed by automake as an included file.)
EXTRA_DIST += tests/slurm/README.md
EXTRA_DIST += tests/slurm/cluster.sh
EXTRA_DIST += tests/slurm/hosts.sh
EXTRA_DIST += tests/slurm/lib.sh
EXTRA_DIST += tests/slurm/newer-slurm.sh
EXTRA_DIST += tests/slurm/smoke.sh
