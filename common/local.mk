# libcommon_core: the part of common/ the SPANK plugin links (no Slurm, no
# libuv, no curl, no jsoncpp): its JSON is json-c (common/jsonc.h says why),
# so a --disable-daemons build needs only the Slurm headers and json-c.
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

# libcommon: libcommon_core plus jsoncpp (the agent's side of the protocol,
# the CLI's client) and the CRI log files. Linked by the daemons, the CLI and
# their tests.
if BUILD_DAEMONS
noinst_LTLIBRARIES += common/libcommon.la
common_libcommon_la_SOURCES = \
	common/agent_client.h \
	common/base64.cc \
	common/base64.h \
	common/cri_log.cc \
	common/cri_log.h \
	common/json.cc \
	common/json.h \
	common/log_paths.cc \
	common/log_paths.h \
	common/pod_loss.cc \
	common/pod_loss.h \
	common/protocol.cc \
	common/protocol.h \
	common/exec_frames.cc \
	common/exec_frames.h \
	common/shim_protocol.cc \
	common/shim_protocol.h \
	common/supervisor.cc \
	common/supervisor.h \
	common/tcp_listeners.cc \
	common/tcp_listeners.h
common_libcommon_la_LIBADD = common/libcommon_core.la $(JSONCPP_LIBS)
endif
