# agent/network: each pod's own network (pod_network: the namespaces made
# by the job's shim, held by root, plugged in by the standard CNI plugins
# whose configuration and results cni.h speaks). Reaches nothing of the
# agent but agent/core/ (tests/static/layers.py); unit-tested in tests/unit.
if BUILD_DAEMONS
noinst_LTLIBRARIES += agent/network/libnetwork.la
agent_network_libnetwork_la_SOURCES = \
	agent/network/cni.cc \
	agent/network/cni.h \
	agent/network/pod_network.cc \
	agent/network/pod_network.h \
	agent/network/pod_routes.cc \
	agent/network/pod_routes.h
agent_network_libnetwork_la_CPPFLAGS = $(AM_CPPFLAGS) $(LIBUV_CFLAGS)
agent_network_libnetwork_la_LIBADD = \
	agent/core/libagentcore.la \
	uv/libskuv.la \
	common/daemons/libcommon_daemons.la \
	$(LIBUV_LIBS)
endif
