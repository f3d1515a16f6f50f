# tests/soak: the soak test (real agent + real shim + the test API server,
# pods churning while watches break). Not part of `make check`:
#   make check-soak                  # SOAK_SECONDS=120 by default
#   make soak SOAK_SECONDS=3600      # the documented long run
# SOAK_SEED=N replays a run; see tests/soak/README.md.
EXTRA_DIST += \
	tests/soak/soak.py \
	tests/soak/README.md

check-soak: all
	SOAK_SECONDS="$${SOAK_SECONDS:-120}" $(PYTHON3) $(abs_top_srcdir)/tests/soak/soak.py \
	  --agent '$(abs_top_builddir)/agent/slurm-k8s-agent' \
	  --shim '$(abs_top_builddir)/k8s-shim/slurm-k8s-shim' \
	  --server '$(abs_top_srcdir)/tests/kube/kube_test_server.py'

soak: check-soak

.PHONY: check-soak soak
