# Fuzzing (tests/fuzz/README.md). Every target is one source,
# tests/fuzz/fuzz_<name>.cc, built two ways:
# - here, in the normal build, into one replay program (tests/fuzz/fuzz_replay)
#   that `make check` runs over tests/fuzz/corpus/<name>/ and
#   tests/fuzz/regressions/<name>/ (saved crash inputs stay fixed);
# - with clang and libFuzzer by `make fuzz-targets`, in a build configured
#   with CXXFLAGS='-fsanitize=fuzzer-no-link,...' (tests/fuzz/build-and-run.sh
#   does that), into tests/fuzz/bin/fuzz_<name>. Not part of `all` or `check`:
#   the normal g++ build never invokes those rules.
# Adding a target: one line below (and the source + a seed corpus). Code from
# another convenience library: add it to FUZZ_LDADD.
FUZZ_TARGET_SOURCES = \
	tests/fuzz/fuzz_api_objects.cc \
	tests/fuzz/fuzz_config.cc \
	tests/fuzz/fuzz_cri_log.cc \
	tests/fuzz/fuzz_cri_writer.cc \
	tests/fuzz/fuzz_exec_frames.cc \
	tests/fuzz/fuzz_json.cc \
	tests/fuzz/fuzz_k8s_names.cc \
	tests/fuzz/fuzz_kubeconfig.cc \
	tests/fuzz/fuzz_kubelet_request.cc \
	tests/fuzz/fuzz_line_buffer.cc \
	tests/fuzz/fuzz_pod_plan.cc \
	tests/fuzz/fuzz_protocol.cc \
	tests/fuzz/fuzz_shim_protocol.cc \
	tests/fuzz/fuzz_spank_options.cc \
	tests/fuzz/fuzz_spdy.cc \
	tests/fuzz/fuzz_strings.cc \
	tests/fuzz/fuzz_watch_parser.cc \
	tests/fuzz/fuzz_ws_channel.cc
FUZZ_LDADD = \
	agent/kubelet/libkubelet.la \
	agent/libagent.la \
	agent/controllers/libcontrollers.la \
	agent/core/libagentcore.la \
	k8s-shim/libshim.la \
	spank/libspank_core.la \
	agent/kubelet/streams/libstreams.la \
	common/daemons/libcommon_daemons.la \
	$(LIBUV_LIBS) \
	$(LIBCURL_LIBS) \
	$(JSONCPP_LIBS) \
	$(ZLIB_LIBS)

# The targets link the daemons' libraries: not built by --disable-daemons.
if BUILD_DAEMONS
check_PROGRAMS += tests/fuzz/fuzz_replay
TESTS += tests/fuzz/fuzz_replay
endif
tests_fuzz_fuzz_replay_SOURCES = \
	tests/fuzz/fuzz_target.h \
	tests/fuzz/replay_main.cc \
	$(FUZZ_TARGET_SOURCES)
# Own CPPFLAGS: own object names, apart from the libFuzzer build's.
tests_fuzz_fuzz_replay_CPPFLAGS = $(AM_CPPFLAGS)
tests_fuzz_fuzz_replay_LDADD = $(FUZZ_LDADD)

EXTRA_DIST += \
	tests/fuzz/README.md \
	tests/fuzz/build-and-run.sh \
	tests/fuzz/run-short.sh \
	tests/fuzz/make-seeds.py \
	tests/fuzz/corpus \
	tests/fuzz/regressions

# ---- libFuzzer binaries (only in a clang build; see build-and-run.sh) ----
FUZZ_BINS = $(patsubst tests/fuzz/%.cc,tests/fuzz/bin/%$(EXEEXT),$(FUZZ_TARGET_SOURCES))
CLEANFILES += \
	tests/fuzz/bin/fuzz_*

fuzz-targets: $(FUZZ_BINS)

# Compiled and linked in one rule so that a rebuilt library recompiles the
# target too (these objects have no header dependency tracking).
tests/fuzz/bin/fuzz_%$(EXEEXT): tests/fuzz/fuzz_%.cc tests/fuzz/fuzz_target.h \
		$(filter %.la,$(FUZZ_LDADD))
	@$(MKDIR_P) tests/fuzz/bin
	$(AM_V_CXX)$(CXXCOMPILE) -DSK_FUZZ_LIBFUZZER -c -o tests/fuzz/bin/fuzz_$*.o $<
	$(AM_V_CXXLD)$(CXXLINK) -fsanitize=fuzzer tests/fuzz/bin/fuzz_$*.o $(FUZZ_LDADD) $(LIBS)

# Short run (CI): every target for SK_FUZZ_SECONDS (default 8) in a clang build
# under $TMPDIR; exit 77 when clang or libFuzzer is missing.
fuzz-short:
	$(SHELL) $(top_srcdir)/tests/fuzz/run-short.sh

# Long run: FUZZ_SECONDS per target (default 600).
FUZZ_SECONDS = 600
fuzz-long:
	$(SHELL) $(top_srcdir)/tests/fuzz/build-and-run.sh --seconds $(FUZZ_SECONDS)

.PHONY: fuzz-targets fuzz-short fuzz-long
