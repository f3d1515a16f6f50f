# spank_k8s.so: a libtool module exporting only what spank_k8s.map lists.
# libspank_core.la is the pure logic (no spank.h: options, policy, plugstack
# config, GPU split, run file, host lists, shim process control) with Check
# tests; libspank.la adds the hook adapters (the only files with spank.h).
noinst_LTLIBRARIES += spank/libspank_core.la
spank_libspank_core_la_SOURCES = \
	spank/gpu_split.cc \
	spank/gpu_split.h \
	spank/hostlist.cc \
	spank/hostlist.h \
	spank/options.cc \
	spank/options.h \
	spank/plugstack.cc \
	spank/plugstack.h \
	spank/runfile.cc \
	spank/runfile.h \
	spank/shim_process.cc \
	spank/shim_process.h \
	spank/slurm_facts.cc \
	spank/slurm_facts.h
spank_libspank_core_la_CPPFLAGS = $(AM_CPPFLAGS) \
	-DSK_SHIM_PATH='"$(bindir)/slurm-k8s-shim"'
spank_libspank_core_la_LIBADD = common/libcommon.la

noinst_LTLIBRARIES += spank/libspank.la
spank_libspank_la_SOURCES = \
	spank/hook_util.cc \
	spank/hook_util.h \
	spank/hooks.cc \
	spank/hooks.h \
	spank/hooks_allocator.cc \
	spank/hooks_extern.cc \
	spank/hooks_prolog.cc \
	spank/hooks_step.cc
spank_libspank_la_CPPFLAGS = $(AM_CPPFLAGS) $(SLURM_CPPFLAGS)
spank_libspank_la_LIBADD = spank/libspank_core.la

# The agent client lives in libcommon (the admin CLI uses it too).
common_libcommon_la_SOURCES += \
	common/agent_client.cc \
	common/agent_client.h

spank_LTLIBRARIES = spank/spank_k8s.la
spank_spank_k8s_la_SOURCES = spank/plugin.cc
spank_spank_k8s_la_CPPFLAGS = $(AM_CPPFLAGS) $(SLURM_CPPFLAGS)
spank_spank_k8s_la_LDFLAGS = \
	$(AM_LDFLAGS) \
	-module \
	-avoid-version \
	-shared \
	-Wl,--version-script=$(srcdir)/spank/spank_k8s.map
spank_spank_k8s_la_LIBADD = spank/libspank.la
EXTRA_spank_spank_k8s_la_DEPENDENCIES = spank/spank_k8s.map
EXTRA_DIST += \
	spank/README.md \
	spank/spank_k8s.map

if HAVE_CHECK
check_PROGRAMS += \
	tests/unit/test_agent_client \
	tests/unit/test_spank_logic \
	tests/unit/test_spank_hooks
TESTS += \
	tests/unit/test_agent_client \
	tests/unit/test_spank_logic \
	tests/unit/test_spank_hooks

tests_unit_test_agent_client_SOURCES = tests/unit/test_agent_client.cc
tests_unit_test_agent_client_CXXFLAGS = $(AM_CXXFLAGS) $(CHECK_CFLAGS)
tests_unit_test_agent_client_LDADD = common/libcommon.la $(CHECK_LIBS)

tests_unit_test_spank_logic_SOURCES = tests/unit/test_spank_logic.cc
tests_unit_test_spank_logic_CXXFLAGS = $(AM_CXXFLAGS) $(CHECK_CFLAGS)
tests_unit_test_spank_logic_LDADD = spank/libspank_core.la $(CHECK_LIBS)

# The hooks through the fake spank layer (no Slurm process involved).
tests_unit_test_spank_hooks_SOURCES = \
	tests/unit/fake_spank.cc \
	tests/unit/fake_spank.h \
	tests/unit/test_spank_hooks.cc
tests_unit_test_spank_hooks_CPPFLAGS = $(AM_CPPFLAGS) $(SLURM_CPPFLAGS)
tests_unit_test_spank_hooks_CXXFLAGS = $(AM_CXXFLAGS) $(CHECK_CFLAGS)
tests_unit_test_spank_hooks_LDADD = spank/libspank.la $(CHECK_LIBS)
endif

EXTRA_DIST += \
	tests/integration/stub_agent.py \
	tests/integration/test_spank.sh \
	tests/integration/shim_recorder.sh \
	etc/plugstack.conf.example
