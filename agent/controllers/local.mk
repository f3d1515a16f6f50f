# agent/controllers: what drives a virtual node and its pods against the
# API: the node's life (virtual_node, node_lease_controller, drain, and
# job_follower: the job's end time and suspension), its
# identity (node_credentials, csr_certificate, identity_pool), its pods
# (pod_controller; pod_volumes: the reads a start depends on, tokens and
# volumes kept current), and the pure modules they use: the Node object
# (node_builder), pod status patches (pod_status_patch), a pod's env and
# files (env_resolver), its node-path volumes and claims (host_volumes), Event series (event_correlator), a lost shim's pods
# (lost_shim), the node's key and certificate requests (node_identity).
# Timers come from agent/core/timer_source.h, the API from agent/kube/: the
# controllers run in unit tests on a virtual clock. The pure modules reach
# neither libuv nor libcurl (tests/static/layers.py).
if BUILD_DAEMONS
noinst_LTLIBRARIES += agent/controllers/libcontrollers.la
agent_controllers_libcontrollers_la_SOURCES = \
	agent/controllers/agent_context.h \
	agent/controllers/csr_certificate.cc \
	agent/controllers/csr_certificate.h \
	agent/controllers/drain.cc \
	agent/controllers/drain.h \
	agent/controllers/env_resolver.cc \
	agent/controllers/env_resolver.h \
	agent/controllers/event_correlator.cc \
	agent/controllers/event_correlator.h \
	agent/controllers/host_volumes.cc \
	agent/controllers/host_volumes.h \
	agent/controllers/identity_pool.cc \
	agent/controllers/identity_pool.h \
	agent/controllers/job_follower.cc \
	agent/controllers/job_follower.h \
	agent/controllers/lost_shim.cc \
	agent/controllers/lost_shim.h \
	agent/controllers/node_bound.h \
	agent/controllers/node_builder.cc \
	agent/controllers/node_builder.h \
	agent/controllers/node_credentials.cc \
	agent/controllers/node_credentials.h \
	agent/controllers/node_identity.cc \
	agent/controllers/node_identity.h \
	agent/controllers/node_lease_controller.cc \
	agent/controllers/node_lease_controller.h \
	agent/controllers/pod_controller.cc \
	agent/controllers/pod_controller.h \
	agent/controllers/pod_status_patch.cc \
	agent/controllers/pod_status_patch.h \
	agent/controllers/pod_volumes.cc \
	agent/controllers/pod_volumes.h \
	agent/controllers/virtual_node.cc \
	agent/controllers/virtual_node.h
agent_controllers_libcontrollers_la_CPPFLAGS = $(AM_CPPFLAGS) $(GNUTLS_CFLAGS) $(LIBUV_CFLAGS) $(LIBCURL_CFLAGS)
# Only external libraries: the agent's core, kube/ and kubelet/ are linked
# by the programs (through agent/libagent.la or the unit tests' lists).
agent_controllers_libcontrollers_la_LIBADD = $(GNUTLS_LIBS)
endif
