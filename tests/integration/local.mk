# The integration layer needs root and a real Slurm cluster; it is not part of
# `make check` (which must pass in `make distcheck` as a normal user).
# run-all.sh exits 77 (skipped) when not root.
EXTRA_DIST += \
	tests/integration/run-all.sh \
	tests/integration/shim_recorder.sh \
	tests/integration/stub_agent.py \
	tests/integration/test_e2e.sh \
	tests/integration/test_spank.sh

check-integration: all
	SPANK_K8S_SO='$(abs_top_builddir)/spank/.libs/spank_k8s.so' \
	SK_TOP_BUILDDIR='$(abs_top_builddir)' SK_TOP_SRCDIR='$(abs_top_srcdir)' \
	  $(SHELL) $(top_srcdir)/tests/integration/run-all.sh

.PHONY: check-integration
