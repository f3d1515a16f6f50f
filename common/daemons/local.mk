# common/daemons: libcommon_daemons, what the agent, the shim and the CLI
# share beyond common/ (jsoncpp): the agent's socket protocol and its client
# (protocol, agent_client.h), the shim protocol and its exec frames
# (shim_protocol, exec_frames, pod_loss), image references (image_ref), JSON and base64, the CRI log files
# and their paths (cri_log, log_paths), the container supervisor's contract
# (supervisor), who owns a TCP listener (tcp_listeners) and YAML as JSON
# (yaml). Not linked by the
# SPANK plugin; not built by --disable-daemons.
if BUILD_DAEMONS
noinst_LTLIBRARIES += common/daemons/libcommon_daemons.la
common_daemons_libcommon_daemons_la_SOURCES = \
	common/daemons/agent_client.h \
	common/daemons/base64.cc \
	common/daemons/base64.h \
	common/daemons/cri_log.cc \
	common/daemons/cri_log.h \
	common/daemons/exec_frames.cc \
	common/daemons/exec_frames.h \
	common/daemons/image_ref.cc \
	common/daemons/image_ref.h \
	common/daemons/json.cc \
	common/daemons/json.h \
	common/daemons/log_paths.cc \
	common/daemons/log_paths.h \
	common/daemons/pod_loss.cc \
	common/daemons/pod_loss.h \
	common/daemons/protocol.cc \
	common/daemons/protocol.h \
	common/daemons/shim_protocol.cc \
	common/daemons/shim_protocol.h \
	common/daemons/supervisor.cc \
	common/daemons/supervisor.h \
	common/daemons/tcp_listeners.cc \
	common/daemons/tcp_listeners.h \
	common/daemons/yaml.cc \
	common/daemons/yaml.h
common_daemons_libcommon_daemons_la_CPPFLAGS = $(AM_CPPFLAGS) $(LIBYAML_CFLAGS)
common_daemons_libcommon_daemons_la_LIBADD = common/libcommon_core.la $(JSONCPP_LIBS) $(LIBYAML_LIBS)
endif
