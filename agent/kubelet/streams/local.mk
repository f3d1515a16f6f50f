# agent/kubelet/streams: the kubelet streaming protocols' codecs (SPDY/3.1
# with zlib header compression, WebSocket channels, remotecommand's Status
# and resize messages), for the kubelet endpoint's exec, attach and
# port-forward sessions. Pure (no I/O); the shim and the CLI need none of
# it (nor zlib).
if BUILD_DAEMONS
noinst_LTLIBRARIES += agent/kubelet/streams/libstreams.la
agent_kubelet_streams_libstreams_la_SOURCES = \
	agent/kubelet/streams/remotecommand.cc \
	agent/kubelet/streams/remotecommand.h \
	agent/kubelet/streams/spdy.cc \
	agent/kubelet/streams/spdy.h \
	agent/kubelet/streams/ws_channel.cc \
	agent/kubelet/streams/ws_channel.h
agent_kubelet_streams_libstreams_la_CPPFLAGS = $(AM_CPPFLAGS) $(ZLIB_CFLAGS) $(GNUTLS_CFLAGS)
agent_kubelet_streams_libstreams_la_LIBADD = $(ZLIB_LIBS) $(GNUTLS_LIBS)
endif
