# agent: the node agent core (controllers, socket, API client). The kubelet
# endpoint, log reader and metrics are in agent/kubelet.mk.

# Pure core: no libuv, no curl (unit-tested).
noinst_LTLIBRARIES += agent/libagentcore.la
agent_libagentcore_la_SOURCES = \
	agent/agent_config.cc \
	agent/agent_config.h \
	agent/api_object.cc \
	agent/api_object.h \
	agent/backoff.cc \
	agent/backoff.h \
	agent/env_resolver.cc \
	agent/env_resolver.h \
	agent/event_correlator.cc \
	agent/event_correlator.h \
	agent/job_store.cc \
	agent/job_store.h \
	agent/kube_time.cc \
	agent/kube_time.h \
	agent/log_index.cc \
	agent/log_index.h \
	agent/lost_shim.cc \
	agent/lost_shim.h \
	agent/node_builder.cc \
	agent/node_builder.h \
	agent/peer_auth.cc \
	agent/peer_auth.h \
	agent/pod_status_patch.cc \
	agent/pod_status_patch.h \
	agent/watch_parser.cc \
	agent/watch_parser.h
agent_libagentcore_la_LIBADD = common/libcommon.la

# I/O edges and controllers: libuv, libcurl.
noinst_LTLIBRARIES += agent/libagentio.la
agent_libagentio_la_SOURCES = \
	agent/agent.cc \
	agent/agent.h \
	agent/command_runner.cc \
	agent/command_runner.h \
	agent/controllers/deregister.cc \
	agent/controllers/node_lease.cc \
	agent/controllers/pods.cc \
	agent/controllers/virtual_node.h \
	agent/fake_runtime.cc \
	agent/fake_runtime.h \
	agent/http_client.cc \
	agent/http_client.h \
	agent/kube_client.cc \
	agent/kube_client.h \
	agent/observer.h \
	agent/runtime.h \
	agent/shim_runtime.cc \
	agent/shim_runtime.h \
	agent/socket_server.cc \
	agent/socket_server.h \
	agent/uv_util.cc \
	agent/uv_util.h
agent_libagentio_la_CPPFLAGS = $(AM_CPPFLAGS) $(LIBUV_CFLAGS) $(LIBCURL_CFLAGS)
agent_libagentio_la_LIBADD = agent/libagentcore.la $(LIBUV_LIBS) $(LIBCURL_LIBS)

sbin_PROGRAMS += agent/slurm-k8s-agent
agent_slurm_k8s_agent_SOURCES = agent/main.cc
agent_slurm_k8s_agent_CPPFLAGS = $(AM_CPPFLAGS) $(LIBUV_CFLAGS) $(LIBCURL_CFLAGS)
agent_slurm_k8s_agent_LDADD = \
	agent/libagentio.la \
	agent/libagentcore.la \
	agent/libkubelet.la \
	common/libcommon.la \
	$(LIBUV_LIBS) \
	$(LIBCURL_LIBS) \
	$(JSONCPP_LIBS)

if HAVE_CHECK
check_PROGRAMS += \
	tests/unit/test_agent_core \
	tests/unit/test_agent_wiring
TESTS += \
	tests/unit/test_agent_core \
	tests/unit/test_agent_wiring

tests_unit_test_agent_wiring_SOURCES = tests/unit/test_agent_wiring.cc
tests_unit_test_agent_wiring_CXXFLAGS = $(AM_CXXFLAGS) $(CHECK_CFLAGS)
tests_unit_test_agent_wiring_LDADD = \
	agent/libagentio.la \
	agent/libagentcore.la \
	common/libcommon.la \
	$(CHECK_LIBS) \
	$(LIBUV_LIBS) \
	$(LIBCURL_LIBS) \
	$(JSONCPP_LIBS)

tests_unit_test_agent_core_SOURCES = tests/unit/test_agent_core.cc
tests_unit_test_agent_core_CXXFLAGS = $(AM_CXXFLAGS) $(CHECK_CFLAGS)
tests_unit_test_agent_core_LDADD = agent/libagentcore.la common/libcommon.la $(CHECK_LIBS)

endif

# Component test: the real agent (fake runtime) against the test API server.
TESTS += \
	tests/component/test_agent.sh \
	tests/component/test_agent_shim.sh
EXTRA_DIST += \
	tests/component/test_agent.sh \
	tests/component/test_agent_shim.sh \
	tests/component/agent_test.py \
	tests/component/agent_shim_test.py \
	etc/agent.conf.example \
	etc/slurm-k8s-agent.service \
	etc/rbac.yaml
