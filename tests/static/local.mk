# Static analysis: clang-tidy (.clang-tidy) and cppcheck
# (tests/static/cppcheck-suppressions.txt) over LINT_DIRS, from a compile
# database recorded with bear in a separate build (tests/static/lint.sh).
# Formatting: clang-format --dry-run -Werror (.clang-format) over every
# tracked C/C++ source (tests/static/format-check.sh). Both exit 77 when
# their tool is missing. Not part of `make check`.
# The layers (tests/static/layers.py: the pure core reaches neither libuv nor
# libcurl, no wing includes the folders above it) are checked on the
# sources by `make check`.
EXTRA_DIST += \
	tests/static/cppcheck-suppressions.txt \
	tests/static/format-check.sh \
	tests/static/layers.py \
	tests/static/lint.sh
TESTS += tests/static/test_layers.sh
dist_noinst_SCRIPTS += tests/static/test_layers.sh

LINT_DIRS = common spank agent k8s-shim cli tests/unit tests/fuzz tests/component tests/agent uv
lint:
	SK_TOP_SRCDIR='$(abs_top_srcdir)' LINT_DIRS='$(LINT_DIRS)' \
	  $(SHELL) $(top_srcdir)/tests/static/lint.sh

format-check:
	SK_TOP_SRCDIR='$(abs_top_srcdir)' $(SHELL) $(top_srcdir)/tests/static/format-check.sh

.PHONY: lint format-check
