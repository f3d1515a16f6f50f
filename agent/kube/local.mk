# agent/kube: the agent's client of the Kubernetes API: HTTP over libcurl
# driven by libuv (http_client), typed API calls (kube_client), the agent's
# credential from agent.conf or a kubeconfig (credentials.h, kubeconfig)
# kept current (api_auth), the watch stream's parser (watch_parser) and
# typed access to API objects (api_object). Below the controllers and the
# agent; needs nothing of them.
if BUILD_DAEMONS
noinst_LTLIBRARIES += agent/kube/libkube.la
agent_kube_libkube_la_SOURCES = \
	agent/kube/api_auth.cc \
	agent/kube/api_auth.h \
	agent/kube/api_object.cc \
	agent/kube/api_object.h \
	agent/kube/credentials.h \
	agent/kube/http_client.cc \
	agent/kube/http_client.h \
	agent/kube/kube_client.cc \
	agent/kube/kube_client.h \
	agent/kube/kubeconfig.cc \
	agent/kube/kubeconfig.h \
	agent/kube/watch_parser.cc \
	agent/kube/watch_parser.h
agent_kube_libkube_la_CPPFLAGS = $(AM_CPPFLAGS) $(LIBUV_CFLAGS) $(LIBCURL_CFLAGS) $(LIBYAML_CFLAGS)
# Only external libraries here: the convenience libraries it uses (uv/,
# common/) are linked by the programs, so that no archive holds a copy of
# another.
agent_kube_libkube_la_LIBADD = $(LIBUV_LIBS) $(LIBCURL_LIBS) $(LIBYAML_LIBS)
endif
