# agent/kubelet: the kubelet endpoint the API server dials (kubectl logs,
# exec, attach, port-forward, top): the HTTPS server (http_server over
# libmicrohttpd, tls_front's GnuTLS handshakes), the kubelet's routes
# (kubelet_server), who may use them (kubelet_auth, webhook_gate), the log
# files it serves (log_index), stats and metrics (kubelet_stats, metrics),
# streaming requests (stream_request; the codecs in streams/) and the calls
# its threads hand to the agent's loop (loop_calls.h). Runs in
# libmicrohttpd's threads; needs nothing of the controllers or the agent.
if BUILD_DAEMONS
noinst_LTLIBRARIES += agent/kubelet/libkubelet.la
agent_kubelet_libkubelet_la_SOURCES = \
	agent/kubelet/http_server.cc \
	agent/kubelet/http_server.h \
	agent/kubelet/kubelet_auth.cc \
	agent/kubelet/kubelet_auth.h \
	agent/kubelet/kubelet_server.cc \
	agent/kubelet/kubelet_server.h \
	agent/kubelet/kubelet_stats.cc \
	agent/kubelet/kubelet_stats.h \
	agent/kubelet/log_index.cc \
	agent/kubelet/log_index.h \
	agent/kubelet/loop_calls.h \
	agent/kubelet/metrics.cc \
	agent/kubelet/metrics.h \
	agent/kubelet/stream_request.cc \
	agent/kubelet/stream_request.h \
	agent/kubelet/tls_front.cc \
	agent/kubelet/tls_front.h \
	agent/kubelet/webhook_gate.cc \
	agent/kubelet/webhook_gate.h
agent_kubelet_libkubelet_la_CPPFLAGS = $(AM_CPPFLAGS) $(MHD_CFLAGS) $(GNUTLS_CFLAGS) $(LIBUV_CFLAGS)
agent_kubelet_libkubelet_la_LIBADD = agent/kubelet/streams/libstreams.la $(MHD_LIBS) $(GNUTLS_LIBS) $(LIBUV_LIBS) -lpthread
endif
