# Build checks, not part of `make check` (a second configure and build):
#   make check-disable-daemons   # --disable-daemons builds the plugin on a
#                                # host without the daemons' -dev packages
# (tests/build/disable-daemons.sh; exits 77 without a mount namespace).
EXTRA_DIST += tests/build/disable-daemons.sh tests/build/dist-complete.sh

# make distcheck: the tarball holds every tracked file (tests/build/dist-complete.sh).
distcheck-hook:
	$(SHELL) $(top_srcdir)/tests/build/dist-complete.sh $(top_srcdir) $(distdir)

# `make distcheck SK_DISTCHECK_E2E=FILE SK_E2E_PLUGIN_BUILD=DIR` (scripts/run-tests.sh
# passes them, with configure --enable-sanitizers in DISTCHECK_CONFIGURE_FLAGS): once
# the tarball's build has passed `make check` and is installed, the e2e layer on real
# Slurm with this build's agent and shim and DIR's plugin (slurmd is not instrumented);
# its output, with the sanitizers' verdict, goes to FILE and its checks, records of the
# one result protocol (tests/lib/report.sh), to SK_DISTCHECK_E2E_RESULT (a failed e2e
# leaves distcheck's own checks to go on: `|| :`). Nothing runs without
# SK_DISTCHECK_E2E. With SK_DISTCHECK_SUMMARY=FILE, a record per test of that
# `make check` (automake's own .trs results, tests/lib/results.py from-trs) goes to
# FILE before distcheck removes the build.
installcheck-local:
	@if test -n "$(SK_DISTCHECK_SUMMARY)"; then \
	  $(PYTHON3) $(abs_top_srcdir)/tests/lib/results.py from-trs . >'$(SK_DISTCHECK_SUMMARY)'; \
	fi
	@if test -n "$(SK_DISTCHECK_E2E)"; then \
	  echo "  E2E      the agent and the shim of $(abs_top_builddir) on real Slurm (output: $(SK_DISTCHECK_E2E))"; \
	  SK_BUILD_DIR='$(SK_E2E_PLUGIN_BUILD)' SK_DAEMON_BUILD_DIR='$(abs_top_builddir)' \
	  SK_RESULT_FILE='$(SK_DISTCHECK_E2E_RESULT)' \
	    $(SHELL) $(abs_top_srcdir)/tests/e2e/sanitizers.sh >'$(SK_DISTCHECK_E2E)' 2>&1 || :; \
	fi
check-disable-daemons:
	SK_TOP_SRCDIR='$(abs_top_srcdir)' $(SHELL) $(top_srcdir)/tests/build/disable-daemons.sh

.PHONY: check-disable-daemons
