# kubelet endpoint, CRI log files, metrics, CLI (see agent/local.mk for the core)

# CRI container log files: written by the shim, read by the agent.
common_libcommon_la_SOURCES += \
	common/cri_log.cc \
	common/cri_log.h \
	common/log_paths.cc \
	common/log_paths.h

if HAVE_CHECK
check_PROGRAMS += \
	tests/unit/test_cri_log \
	tests/unit/test_kubelet_logs \
	tests/unit/test_metrics
TESTS += \
	tests/unit/test_cri_log \
	tests/unit/test_kubelet_logs \
	tests/unit/test_metrics

tests_unit_test_cri_log_SOURCES = tests/unit/test_cri_log.cc
tests_unit_test_cri_log_CXXFLAGS = $(AM_CXXFLAGS) $(CHECK_CFLAGS)
tests_unit_test_cri_log_LDADD = common/libcommon.la $(CHECK_LIBS)

tests_unit_test_kubelet_logs_SOURCES = tests/unit/test_kubelet_logs.cc
tests_unit_test_kubelet_logs_CXXFLAGS = $(AM_CXXFLAGS) $(CHECK_CFLAGS)
tests_unit_test_kubelet_logs_LDADD = agent/libkubelet.la common/libcommon.la $(CHECK_LIBS)

tests_unit_test_metrics_SOURCES = tests/unit/test_metrics.cc
tests_unit_test_metrics_CXXFLAGS = $(AM_CXXFLAGS) $(CHECK_CFLAGS)
tests_unit_test_metrics_LDADD = agent/libkubelet.la common/libcommon.la $(CHECK_LIBS) -lpthread
endif

# The kubelet endpoint (HTTPS, libmicrohttpd + GnuTLS), log paths, metrics.
# Linked by slurm-k8s-agent; runs in libmicrohttpd's threads.
noinst_LTLIBRARIES += agent/libkubelet.la
agent_libkubelet_la_SOURCES = \
	agent/http_server.cc \
	agent/http_server.h \
	agent/kubelet_server.cc \
	agent/kubelet_server.h \
	agent/metrics.cc \
	agent/metrics.h
agent_libkubelet_la_CPPFLAGS = $(AM_CPPFLAGS) $(MHD_CFLAGS) $(GNUTLS_CFLAGS)
agent_libkubelet_la_LIBADD = $(MHD_LIBS) $(GNUTLS_LIBS) -lpthread

# Component test: the real HTTPS server over CRI log files, driven by curl.
check_PROGRAMS += \
	tests/component/kubelet_server_main
TESTS += \
	tests/component/test_kubelet_server.sh
tests_component_kubelet_server_main_SOURCES = tests/component/kubelet_server_main.cc
tests_component_kubelet_server_main_LDADD = \
	agent/libkubelet.la \
	common/libcommon.la
EXTRA_DIST += \
	tests/component/test_kubelet_server.sh

include cli/local.mk
