# libcommon: no Slurm, no libuv, no curl. Linked by everything.
noinst_LTLIBRARIES += common/libcommon.la
common_libcommon_la_SOURCES = \
	common/base64.cc \
	common/base64.h \
	common/config.cc \
	common/config.h \
	common/error.cc \
	common/error.h \
	common/json.cc \
	common/json.h \
	common/k8s_names.cc \
	common/k8s_names.h \
	common/log.cc \
	common/log.h \
	common/protocol.cc \
	common/protocol.h \
	common/result.cc \
	common/result.h \
	common/shim_protocol.cc \
	common/shim_protocol.h \
	common/strings.cc \
	common/strings.h
common_libcommon_la_LIBADD = $(JSONCPP_LIBS)
