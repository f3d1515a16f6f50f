# Unit tests (Check): one program per module, table-driven, forked mode.
if HAVE_CHECK
check_PROGRAMS += \
	tests/unit/test_common \
	tests/unit/test_protocol \
	tests/unit/test_shim_protocol \
	tests/unit/test_plugin_symbols
TESTS += \
	tests/unit/test_common \
	tests/unit/test_protocol \
	tests/unit/test_shim_protocol \
	tests/unit/test_plugin_symbols

tests_unit_test_common_SOURCES = tests/unit/test_common.cc
tests_unit_test_common_CXXFLAGS = $(AM_CXXFLAGS) $(CHECK_CFLAGS)
tests_unit_test_common_LDADD = common/libcommon.la $(CHECK_LIBS)

tests_unit_test_protocol_SOURCES = tests/unit/test_protocol.cc
tests_unit_test_protocol_CXXFLAGS = $(AM_CXXFLAGS) $(CHECK_CFLAGS)
tests_unit_test_protocol_LDADD = common/libcommon.la $(CHECK_LIBS)

tests_unit_test_shim_protocol_SOURCES = tests/unit/test_shim_protocol.cc
tests_unit_test_shim_protocol_CXXFLAGS = $(AM_CXXFLAGS) $(CHECK_CFLAGS)
tests_unit_test_shim_protocol_LDADD = common/libcommon.la $(CHECK_LIBS)

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

# The controllers at their seams: VirtualNode on a real uv loop over the fake
# HTTP transport and the fake runtime (tests/agent/).
check_PROGRAMS += \
	tests/unit/test_node_lease_controller \
	tests/unit/test_pod_controller
TESTS += \
	tests/unit/test_node_lease_controller \
	tests/unit/test_pod_controller
SK_CONTROLLER_TEST_SOURCES = \
	tests/unit/controller_env.cc \
	tests/unit/controller_env.h \
	tests/unit/fake_transport.cc \
	tests/unit/fake_transport.h
SK_CONTROLLER_TEST_CPPFLAGS = $(AM_CPPFLAGS) $(LIBUV_CFLAGS)
SK_CONTROLLER_TEST_LIBS = \
	tests/agent/libfakeruntime.la \
	agent/libagentio.la \
	agent/libagentcore.la \
	common/libcommon.la \
	$(CHECK_LIBS) \
	$(LIBUV_LIBS) \
	$(LIBCURL_LIBS) \
	$(JSONCPP_LIBS)
tests_unit_test_node_lease_controller_SOURCES = \
	tests/unit/test_node_lease_controller.cc \
	$(SK_CONTROLLER_TEST_SOURCES)
tests_unit_test_node_lease_controller_CPPFLAGS = $(SK_CONTROLLER_TEST_CPPFLAGS)
tests_unit_test_node_lease_controller_CXXFLAGS = $(AM_CXXFLAGS) $(CHECK_CFLAGS)
tests_unit_test_node_lease_controller_LDADD = $(SK_CONTROLLER_TEST_LIBS)
tests_unit_test_pod_controller_SOURCES = \
	tests/unit/test_pod_controller.cc \
	$(SK_CONTROLLER_TEST_SOURCES)
tests_unit_test_pod_controller_CPPFLAGS = $(SK_CONTROLLER_TEST_CPPFLAGS)
tests_unit_test_pod_controller_CXXFLAGS = $(AM_CXXFLAGS) $(CHECK_CFLAGS)
tests_unit_test_pod_controller_LDADD = $(SK_CONTROLLER_TEST_LIBS)
endif

EXTRA_DIST += \
	tests/unit/check_main.h \
	tests/integration/run-all.sh

EXTRA_DIST += \
	tests/integration/shim_recorder.sh \
	tests/integration/stub_agent.py \
	tests/integration/test_spank.sh
