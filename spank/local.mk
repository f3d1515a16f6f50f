# spank_k8s.so: a libtool module exporting only what spank_k8s.map lists.
# Everything but the C entry file lives in libspank.la so that unit tests link
# the same code through a fake spank layer.
noinst_LTLIBRARIES += spank/libspank.la
spank_libspank_la_SOURCES = \
	spank/hooks.cc \
	spank/hooks.h
spank_libspank_la_CPPFLAGS = $(AM_CPPFLAGS) $(SLURM_CPPFLAGS)
spank_libspank_la_LIBADD = common/libcommon.la

spank_LTLIBRARIES = spank/spank_k8s.la
spank_spank_k8s_la_SOURCES = spank/plugin.cc
spank_spank_k8s_la_CPPFLAGS = $(AM_CPPFLAGS) $(SLURM_CPPFLAGS)
spank_spank_k8s_la_LDFLAGS = \
	$(AM_LDFLAGS) \
	-module \
	-avoid-version \
	-shared \
	-Wl,--version-script=$(srcdir)/spank/spank_k8s.map
spank_spank_k8s_la_LIBADD = spank/libspank.la
EXTRA_spank_spank_k8s_la_DEPENDENCIES = spank/spank_k8s.map
EXTRA_DIST += spank/spank_k8s.map
