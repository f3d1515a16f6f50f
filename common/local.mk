# libcommon: no Slurm, no libuv, no curl. Linked by everything.
noinst_LTLIBRARIES += common/libcommon.la
common_libcommon_la_SOURCES = \
	common/agent_client.cc \
	common/agent_client.h \
	common/config.cc \
	common/config.h \
	common/cri_log.cc \
	common/cri_log.h \
	common/error.cc \
	common/error.h \
	common/json.cc \
	common/json.h \
	common/k8s_names.cc \
	common/k8s_names.h \
	common/log.cc \
	common/log.h \
	common/log_paths.cc \
	common/log_paths.h \
	common/protocol.cc \
	common/protocol.h \
	common/result.cc \
	common/result.h \
	common/strings.cc \
	common/strings.h
common_libcommon_la_LIBADD = $(JSONCPP_LIBS)
