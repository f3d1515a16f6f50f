# agent: the node agent's own room: its socket and the job operations on it
# (socket_server, agent), the garbage collector, the pods' cgroups made
# for the shims (cgroup_broker), their memory volumes' tmpfs (pod_tmpfs), Slurm asked by commands
# (CommandSlurmJobs in agent.h, for agent/core/slurm_jobs.h), the pod
# runtime over the shim (shim_runtime), the kubelet endpoint's sessions and
# figures (stream_sessions: the table; stream_session: a session's client
# side, exec_session and forward_session its kinds; stats_provider,
# node_endpoints), libuv's timers
# (uv_timer_source), and main() as a library function (daemon) with
# slurm-k8s-agent. Below it, each its own library: agent/controllers/, agent/images/, agent/network/,
# agent/core/, agent/kube/, agent/kubelet/ (tests in tests/unit/local.mk and
# tests/component/local.mk). Not built by --disable-daemons.
if BUILD_DAEMONS
noinst_LTLIBRARIES += agent/libagent.la
agent_libagent_la_SOURCES = \
	agent/agent.cc \
	agent/agent.h \
	agent/cgroup_broker.cc \
	agent/cgroup_broker.h \
	agent/pod_tmpfs.cc \
	agent/pod_tmpfs.h \
	agent/daemon.cc \
	agent/daemon.h \
	agent/exec_session.cc \
	agent/forward_session.cc \
	agent/garbage_collector.cc \
	agent/garbage_collector.h \
	agent/node_endpoints.cc \
	agent/node_endpoints.h \
	agent/shim_runtime.cc \
	agent/shim_runtime.h \
	agent/socket_server.cc \
	agent/socket_server.h \
	agent/stats_provider.cc \
	agent/stats_provider.h \
	agent/stream_session.cc \
	agent/stream_session.h \
	agent/stream_sessions.cc \
	agent/stream_sessions.h \
	agent/uv_timer_source.cc \
	agent/uv_timer_source.h
agent_libagent_la_CPPFLAGS = $(AM_CPPFLAGS) $(LIBUV_CFLAGS) $(LIBCURL_CFLAGS)
agent_libagent_la_LIBADD = \
	agent/controllers/libcontrollers.la \
	agent/images/libimages.la \
	agent/network/libnetwork.la \
	agent/core/libagentcore.la \
	agent/kubelet/libkubelet.la \
	uv/libskuv.la \
	$(LIBUV_LIBS) \
	$(LIBCURL_LIBS)

# Everything the daemon links: the shipped agent below and the test build
# that adds the fake runtime (tests/agent/local.mk).
SK_AGENT_DAEMON_LIBS = \
	agent/libagent.la \
	agent/controllers/libcontrollers.la \
	agent/images/libimages.la \
	agent/network/libnetwork.la \
	agent/core/libagentcore.la \
	agent/kube/libkube.la \
	agent/kubelet/libkubelet.la \
	agent/kubelet/streams/libstreams.la \
	uv/libskuv.la \
	common/daemons/libcommon_daemons.la \
	$(LIBUV_LIBS) \
	$(LIBCURL_LIBS) \
	$(JSONCPP_LIBS)

sbin_PROGRAMS += agent/slurm-k8s-agent
agent_slurm_k8s_agent_SOURCES = agent/main.cc
agent_slurm_k8s_agent_LDADD = $(SK_AGENT_DAEMON_LIBS)

endif
