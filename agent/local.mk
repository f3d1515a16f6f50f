# agent: the node agent: a pure core, the I/O edges and controllers, and
# slurm-k8s-agent (tests in tests/unit/local.mk and tests/component/local.mk);
# its API client is agent/kube/, its kubelet endpoint agent/kubelet/ (each
# its own library, below this one). Not built by --disable-daemons.
if BUILD_DAEMONS

# Pure core: no libuv, no curl (unit-tested).
noinst_LTLIBRARIES += agent/libagentcore.la
agent_libagentcore_la_SOURCES = \
	agent/agent_config.cc \
	agent/agent_config.h \
	agent/env_resolver.cc \
	agent/env_resolver.h \
	agent/event_correlator.cc \
	agent/event_correlator.h \
	agent/job_store.cc \
	agent/job_store.h \
	agent/clock.cc \
	agent/clock.h \
	agent/lost_shim.cc \
	agent/lost_shim.h \
	agent/node_address.cc \
	agent/node_address.h \
	agent/node_builder.cc \
	agent/node_builder.h \
	agent/node_identity.cc \
	agent/node_identity.h \
	agent/peer_auth.cc \
	agent/peer_auth.h \
	agent/pod_status_patch.cc \
	agent/pod_status_patch.h \
	agent/slurm_time.cc \
	agent/slurm_time.h \
	agent/timer_source.h
# GnuTLS for node_address's certificate name check and node_identity's keys
# and requests.
agent_libagentcore_la_CPPFLAGS = $(AM_CPPFLAGS) $(GNUTLS_CFLAGS)
agent_libagentcore_la_LIBADD = agent/kube/libkube.la common/libcommon.la $(GNUTLS_LIBS)

# I/O edges and controllers: libuv, libcurl.
noinst_LTLIBRARIES += agent/libagentio.la
agent_libagentio_la_SOURCES = \
	agent/agent.cc \
	agent/agent.h \
	agent/garbage_collector.cc \
	agent/garbage_collector.h \
	agent/slurm_jobs.h \
	agent/controllers/agent_context.h \
	agent/controllers/drain.cc \
	agent/controllers/drain.h \
	agent/controllers/csr_certificate.cc \
	agent/controllers/csr_certificate.h \
	agent/controllers/identity_pool.cc \
	agent/controllers/identity_pool.h \
	agent/controllers/node_credentials.cc \
	agent/controllers/node_credentials.h \
	agent/controllers/node_bound.h \
	agent/controllers/node_lease_controller.cc \
	agent/controllers/node_lease_controller.h \
	agent/controllers/pod_controller.cc \
	agent/controllers/pod_controller.h \
	agent/controllers/virtual_node.cc \
	agent/controllers/virtual_node.h \
	agent/node_endpoints.cc \
	agent/node_endpoints.h \
	agent/observer.h \
	agent/runtime.h \
	agent/shim_runtime.cc \
	agent/shim_runtime.h \
	agent/socket_server.cc \
	agent/socket_server.h \
	agent/stream_sessions.cc \
	agent/stream_sessions.h \
	agent/stats_provider.cc \
	agent/stats_provider.h \
	agent/uv_timer_source.cc \
	agent/uv_timer_source.h
agent_libagentio_la_CPPFLAGS = $(AM_CPPFLAGS) $(LIBUV_CFLAGS) $(LIBCURL_CFLAGS)
agent_libagentio_la_LIBADD = agent/libagentcore.la agent/kubelet/libkubelet.la uv/libskuv.la $(LIBUV_LIBS) $(LIBCURL_LIBS)

# The daemon's main() (agent/daemon.h): linked by the shipped agent below and
# by the test build that adds the fake runtime (tests/agent/local.mk).
noinst_LTLIBRARIES += agent/libagentdaemon.la
agent_libagentdaemon_la_SOURCES = \
	agent/daemon.cc \
	agent/daemon.h
agent_libagentdaemon_la_CPPFLAGS = $(AM_CPPFLAGS) $(LIBUV_CFLAGS) $(LIBCURL_CFLAGS)
SK_AGENT_DAEMON_LIBS = \
	agent/libagentdaemon.la \
	agent/libagentio.la \
	agent/libagentcore.la \
	agent/kube/libkube.la \
	agent/kubelet/libkubelet.la \
	agent/kubelet/streams/libstreams.la \
	uv/libskuv.la \
	common/libcommon.la \
	$(LIBUV_LIBS) \
	$(LIBCURL_LIBS) \
	$(JSONCPP_LIBS)

sbin_PROGRAMS += agent/slurm-k8s-agent
agent_slurm_k8s_agent_SOURCES = agent/main.cc
agent_slurm_k8s_agent_LDADD = $(SK_AGENT_DAEMON_LIBS)

endif
