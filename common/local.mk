# libcommon: no Slurm, no libuv, no curl. Linked by everything.
noinst_LTLIBRARIES += common/libcommon.la
common_libcommon_la_SOURCES = \
	common/config.cc \
	common/config.h \
	common/error.cc \
	common/error.h \
	common/fs.cc \
	common/fs.h \
	common/json.cc \
	common/json.h \
	common/k8s_names.cc \
	common/k8s_names.h \
	common/log.cc \
	common/log.h \
	common/pod_loss.cc \
	common/pod_loss.h \
	common/procfs.cc \
	common/procfs.h \
	common/protocol.cc \
	common/protocol.h \
	common/result.cc \
	common/result.h \
	common/rfc3339.cc \
	common/rfc3339.h \
	common/slurm_cgroup.cc \
	common/slurm_cgroup.h \
	common/strings.cc \
	common/strings.h
common_libcommon_la_LIBADD = $(JSONCPP_LIBS)
