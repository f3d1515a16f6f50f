# common: libcommon_core, what every part links, the SPANK plugin too (no
# Slurm, no libuv, no curl, no jsoncpp): its JSON is json-c (common/jsonc.h
# says why), so a --disable-daemons build needs only the Slurm headers and
# json-c. What only the daemons and the CLI share is common/daemons/, the
# cgroup files common/cgroup/ (linked in here: the plugin needs them).
noinst_LTLIBRARIES += common/libcommon_core.la
common_libcommon_core_la_SOURCES = \
	common/agent_call.cc \
	common/agent_call.h \
	common/backoff.cc \
	common/backoff.h \
	common/clock.cc \
	common/clock.h \
	common/config.cc \
	common/config.h \
	common/error.cc \
	common/error.h \
	common/fs.cc \
	common/fs.h \
	common/jsonc.cc \
	common/jsonc.h \
	common/k8s_names.cc \
	common/k8s_names.h \
	common/log.cc \
	common/log.h \
	common/plugin_wire.h \
	common/procfs.cc \
	common/procfs.h \
	common/result.cc \
	common/result.h \
	common/rfc3339.cc \
	common/rfc3339.h \
	common/strings.cc \
	common/strings.h \
	common/wire.cc \
	common/wire.h \
	common/wire_codec.h
common_libcommon_core_la_CPPFLAGS = $(AM_CPPFLAGS) $(JSONC_CFLAGS)
common_libcommon_core_la_LIBADD = common/cgroup/libcgroup.la $(JSONC_LIBS)
