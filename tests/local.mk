# Unit tests (Check): one program per module, table-driven, forked mode.
if HAVE_CHECK
check_PROGRAMS += \
	tests/unit/test_common \
	tests/unit/test_protocol \
	tests/unit/test_plugin_symbols
TESTS += \
	tests/unit/test_common \
	tests/unit/test_protocol \
	tests/unit/test_plugin_symbols

tests_unit_test_common_SOURCES = tests/unit/test_common.cc
tests_unit_test_common_CXXFLAGS = $(AM_CXXFLAGS) $(CHECK_CFLAGS)
tests_unit_test_common_LDADD = common/libcommon.la $(CHECK_LIBS)

tests_unit_test_protocol_SOURCES = tests/unit/test_protocol.cc
tests_unit_test_protocol_CXXFLAGS = $(AM_CXXFLAGS) $(CHECK_CFLAGS)
tests_unit_test_protocol_LDADD = common/libcommon.la $(CHECK_LIBS)

# Loads the built plugin with dlopen(RTLD_NOW): the fake spank layer in this
# program provides the spank_* functions slurmd would (-export-dynamic).
tests_unit_test_plugin_symbols_SOURCES = \
	tests/unit/fake_spank.cc \
	tests/unit/fake_spank.h \
	tests/unit/test_plugin_symbols.cc
tests_unit_test_plugin_symbols_CPPFLAGS = $(AM_CPPFLAGS) $(SLURM_CPPFLAGS) \
	-DSPANK_K8S_SO='"$(abs_top_builddir)/spank/.libs/spank_k8s.so"'
tests_unit_test_plugin_symbols_CXXFLAGS = $(AM_CXXFLAGS) $(CHECK_CFLAGS)
tests_unit_test_plugin_symbols_LDFLAGS = $(AM_LDFLAGS) -export-dynamic
tests_unit_test_plugin_symbols_LDADD = $(CHECK_LIBS) -ldl
EXTRA_tests_unit_test_plugin_symbols_DEPENDENCIES = spank/spank_k8s.la
endif

EXTRA_DIST += \
	tests/unit/check_main.h \
	tests/integration/run-all.sh

# The Python helpers of the component, shim, soak, valgrind and bench layers.
EXTRA_DIST += \
	tests/pylib/sktest/__init__.py \
	tests/pylib/sktest/agent.py \
	tests/pylib/sktest/env.py \
	tests/pylib/sktest/host.py \
	tests/pylib/sktest/kube.py \
	tests/pylib/sktest/memcheck.py \
	tests/pylib/sktest/programs.py \
	tests/pylib/sktest/suite.py

EXTRA_DIST += \
	tests/integration/shim_recorder.sh \
	tests/integration/stub_agent.py \
	tests/integration/test_spank.sh
