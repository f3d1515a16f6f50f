# Build checks, not part of `make check` (a second configure and build):
#   make check-disable-daemons   # --disable-daemons builds the plugin on a
#                                # host without the daemons' -dev packages
# (tests/build/disable-daemons.sh; exits 77 without a mount namespace).
EXTRA_DIST += tests/build/disable-daemons.sh

check-disable-daemons:
	SK_TOP_SRCDIR='$(abs_top_srcdir)' $(SHELL) $(top_srcdir)/tests/build/disable-daemons.sh

.PHONY: check-disable-daemons
