# libskuv: the libuv handle objects both daemons own their handles through
# (uv/handles.h), the loop threads (thread_loop.h) and the short commands
# the agent runs off its loop (command_runner.h). Unit-tested by
# tests/unit/test_uv.
if BUILD_DAEMONS
noinst_LTLIBRARIES += uv/libskuv.la
uv_libskuv_la_SOURCES = \
	uv/command_runner.cc \
	uv/command_runner.h \
	uv/handles.cc \
	uv/handles.h \
	uv/thread_loop.cc \
	uv/thread_loop.h
uv_libskuv_la_CPPFLAGS = $(AM_CPPFLAGS) $(LIBUV_CFLAGS)
uv_libskuv_la_LIBADD = common/daemons/libcommon_daemons.la $(LIBUV_LIBS)
endif
