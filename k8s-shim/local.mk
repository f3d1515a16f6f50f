# slurm-k8s-shim: the pure core (plan, back-off, probes, status, GPUs,
# runtime templates) and the libuv edge live in libshim.la; main.cc is only
# the entry point. Unit tests link libshim (tests/unit/local.mk); component
# tests run the binary (tests/shim/local.mk). Not built by --disable-daemons.
if BUILD_DAEMONS
noinst_LTLIBRARIES += k8s-shim/libshim.la
k8s_shim_libshim_la_SOURCES = \
	k8s-shim/attach_handshake.cc \
	k8s-shim/attach_handshake.h \
	k8s-shim/attach_session.cc \
	k8s-shim/attach_session.h \
	k8s-shim/backoff.cc \
	k8s-shim/backoff.h \
	k8s-shim/cdi.cc \
	k8s-shim/cdi.h \
	k8s-shim/clock.cc \
	k8s-shim/clock.h \
	k8s-shim/container.cc \
	k8s-shim/container.h \
	k8s-shim/exec_session.cc \
	k8s-shim/exec_session.h \
	k8s-shim/gpu_alloc.cc \
	k8s-shim/gpu_alloc.h \
	k8s-shim/http_check.cc \
	k8s-shim/http_check.h \
	k8s-shim/mount_ns.h \
	k8s-shim/pod_plan.cc \
	k8s-shim/pod_plan.h \
	k8s-shim/pod_prepare.cc \
	k8s-shim/pod_prepare.h \
	k8s-shim/pod_security.cc \
	k8s-shim/pod_security.h \
	k8s-shim/pod_stats.cc \
	k8s-shim/pod_stats.h \
	k8s-shim/pod_runner.cc \
	k8s-shim/pod_runner.h \
	k8s-shim/pod_status.cc \
	k8s-shim/pod_status.h \
	k8s-shim/probe.cc \
	k8s-shim/probe.h \
	k8s-shim/probe_runner.cc \
	k8s-shim/podman.cc \
	k8s-shim/podman.h \
	k8s-shim/runtime_template.cc \
	k8s-shim/sandbox.cc \
	k8s-shim/sandbox.h \
	k8s-shim/runtime_template.h \
	k8s-shim/session_table.cc \
	k8s-shim/session_table.h \
	k8s-shim/shim.cc \
	k8s-shim/shim.h \
	k8s-shim/spawn.cc \
	k8s-shim/spawn.h \
	k8s-shim/supervise.cc \
	k8s-shim/supervise.h
k8s_shim_libshim_la_CXXFLAGS = $(AM_CXXFLAGS) $(LIBUV_CFLAGS) $(LIBCURL_CFLAGS)
# libcurl: HTTPS and grpc probes (http_check).
k8s_shim_libshim_la_LIBADD = uv/libskuv.la common/daemons/libcommon_daemons.la $(LIBUV_LIBS) $(LIBCURL_LIBS)

bin_PROGRAMS += k8s-shim/slurm-k8s-shim
# confine.cc and mount_ns.cc (the exec helper: libseccomp, namespaces) are
# the binary's alone: what links libshim does not need libseccomp.
k8s_shim_slurm_k8s_shim_SOURCES = k8s-shim/main.cc k8s-shim/confine.cc k8s-shim/confine.h \
	k8s-shim/mount_ns.cc
k8s_shim_slurm_k8s_shim_CXXFLAGS = $(AM_CXXFLAGS) $(LIBUV_CFLAGS) $(LIBSECCOMP_CFLAGS) $(LIBCURL_CFLAGS)
k8s_shim_slurm_k8s_shim_LDADD = k8s-shim/libshim.la $(LIBSECCOMP_LIBS)
endif
