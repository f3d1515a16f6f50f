# spank_k8s.so: a libtool module exporting only what spank_k8s.map lists.
# libspank_core.la is the pure logic (no spank.h: options, policy, plugstack
# config, GPU split, run file, host lists, shim process control and its
# keeper) with Check tests (tests/unit/local.mk); libspank.la adds the hook
# adapters (the only files with spank.h). Built by --disable-daemons too: it
# links only the jsoncpp-free part of common/ (common/local.mk).
noinst_LTLIBRARIES += spank/libspank_core.la
spank_libspank_core_la_SOURCES = \
	spank/device_cgroup.cc \
	spank/device_cgroup.h \
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
	spank/shim_keeper.cc \
	spank/shim_keeper.h \
	spank/shim_process.cc \
	spank/shim_process.h \
	spank/slurm_facts.cc \
	spank/slurm_facts.h
spank_libspank_core_la_CPPFLAGS = $(AM_CPPFLAGS) \
	-DSK_SHIM_PATH='"$(bindir)/slurm-k8s-shim"'
spank_libspank_core_la_LIBADD = common/libcommon_core.la

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
