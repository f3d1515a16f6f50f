# agent/core: the agent's pure core, what every other part of it shares:
# agent.conf (agent_config), the job state files (job_store), the clock and
# the timer interface the controllers take (clock, timer_source.h), the pod
# runtime and observer interfaces (runtime.h, observer.h), Slurm's time
# format (slurm_time), who may call the agent socket (peer_auth) and the
# node's advertised address (node_address). No libuv, no curl (checked by
# tests/static/layers.py); unit-tested alone.
if BUILD_DAEMONS
noinst_LTLIBRARIES += agent/core/libagentcore.la
agent_core_libagentcore_la_SOURCES = \
	agent/core/agent_config.cc \
	agent/core/agent_config.h \
	agent/core/clock.cc \
	agent/core/clock.h \
	agent/core/job_store.cc \
	agent/core/job_store.h \
	agent/core/node_address.cc \
	agent/core/node_address.h \
	agent/core/observer.h \
	agent/core/peer_auth.cc \
	agent/core/peer_auth.h \
	agent/core/pod_mounts.h \
	agent/core/pod_networks.h \
	agent/core/shared_mount.cc \
	agent/core/shared_mount.h \
	agent/core/runtime.h \
	agent/core/slurm_jobs.h \
	agent/core/slurm_time.cc \
	agent/core/slurm_time.h \
	agent/core/timer_source.h
# GnuTLS for node_address's certificate name check.
agent_core_libagentcore_la_CPPFLAGS = $(AM_CPPFLAGS) $(GNUTLS_CFLAGS)
# The agent's configuration reads kubeconfigs (agent/kube/): the core brings
# libkube and common/ with it, the only convenience libraries an agent
# library holds a copy of.
agent_core_libagentcore_la_LIBADD = agent/kube/libkube.la common/daemons/libcommon_daemons.la $(GNUTLS_LIBS)
endif
