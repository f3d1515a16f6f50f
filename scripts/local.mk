# Whole-suite and scenario drivers, and the package list they install.
EXTRA_DIST += \
	scripts/install-deps.sh \
	scripts/run-tests.sh \
	scripts/run-scenario.sh

# The check an admin runs on a real GPU node (docs/admin-guide.md "GPUs in
# images (CDI)"), installed with the project's data.
gpucheckdir = $(pkgdatadir)
dist_gpucheck_SCRIPTS = scripts/check-gpu-pods.sh
