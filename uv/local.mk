# libskuv: the libuv handle objects both daemons own their handles through
# (uv/handles.h). Unit-tested by tests/unit/test_uv.
noinst_LTLIBRARIES += uv/libskuv.la
uv_libskuv_la_SOURCES = \
	uv/handles.cc \
	uv/handles.h
uv_libskuv_la_CPPFLAGS = $(AM_CPPFLAGS) $(LIBUV_CFLAGS)
uv_libskuv_la_LIBADD = common/libcommon.la $(LIBUV_LIBS)

if HAVE_CHECK
check_PROGRAMS += tests/unit/test_uv
TESTS += tests/unit/test_uv

tests_unit_test_uv_SOURCES = tests/unit/test_uv.cc
tests_unit_test_uv_CXXFLAGS = $(AM_CXXFLAGS) $(CHECK_CFLAGS) $(LIBUV_CFLAGS)
tests_unit_test_uv_LDADD = uv/libskuv.la $(CHECK_LIBS)
endif
