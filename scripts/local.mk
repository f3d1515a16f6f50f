# Whole-suite and scenario drivers, and the package list they install.
EXTRA_DIST += \
	scripts/install-deps.sh \
	scripts/run-tests.sh \
	scripts/run-scenario.sh
