# libskuv: the libuv handle objects both daemons own their handles through
# (uv/handles.h). Unit-tested by tests/unit/test_uv.
if BUILD_DAEMONS
noinst_LTLIBRARIES += uv/libskuv.la
uv_libskuv_la_SOURCES = \
	uv/handles.cc \
	uv/handles.h \
	uv/thread_loop.cc \
	uv/thread_loop.h
uv_libskuv_la_CPPFLAGS = $(AM_CPPFLAGS) $(LIBUV_CFLAGS)
uv_libskuv_la_LIBADD = common/libcommon.la $(LIBUV_LIBS)
endif
