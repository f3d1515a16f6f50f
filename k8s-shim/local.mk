# slurm-k8s-shim: the pure core (plan, back-off, probes, status, GPUs,
# runtime templates) and the libuv edge live in libshim.la; main.cc is only
# the entry point. Unit tests link libshim; component tests run the binary.
noinst_LTLIBRARIES += k8s-shim/libshim.la
k8s_shim_libshim_la_SOURCES = \
	k8s-shim/backoff.cc \
	k8s-shim/backoff.h \
	k8s-shim/clock.cc \
	k8s-shim/clock.h \
	k8s-shim/container.cc \
	k8s-shim/container.h \
	k8s-shim/gpu_alloc.cc \
	k8s-shim/gpu_alloc.h \
	k8s-shim/pod_plan.cc \
	k8s-shim/pod_plan.h \
	k8s-shim/pod_runner.cc \
	k8s-shim/pod_runner.h \
	k8s-shim/pod_status.cc \
	k8s-shim/pod_status.h \
	k8s-shim/probe.cc \
	k8s-shim/probe.h \
	k8s-shim/probe_runner.cc \
	k8s-shim/runtime_template.cc \
	k8s-shim/runtime_template.h \
	k8s-shim/shim.cc \
	k8s-shim/shim.h \
	k8s-shim/spawn.cc \
	k8s-shim/spawn.h
k8s_shim_libshim_la_CXXFLAGS = $(AM_CXXFLAGS) $(LIBUV_CFLAGS)
k8s_shim_libshim_la_LIBADD = common/libcommon.la $(LIBUV_LIBS)

bin_PROGRAMS += k8s-shim/slurm-k8s-shim
k8s_shim_slurm_k8s_shim_SOURCES = k8s-shim/main.cc
k8s_shim_slurm_k8s_shim_CXXFLAGS = $(AM_CXXFLAGS) $(LIBUV_CFLAGS)
k8s_shim_slurm_k8s_shim_LDADD = k8s-shim/libshim.la

if HAVE_CHECK
check_PROGRAMS += \
	tests/unit/test_shim_plan \
	tests/unit/test_shim_core \
	tests/unit/test_pod_loss
TESTS += \
	tests/unit/test_shim_plan \
	tests/unit/test_shim_core \
	tests/unit/test_pod_loss

tests_unit_test_shim_plan_SOURCES = tests/unit/test_shim_plan.cc
tests_unit_test_shim_plan_CXXFLAGS = $(AM_CXXFLAGS) $(CHECK_CFLAGS) $(LIBUV_CFLAGS)
tests_unit_test_shim_plan_LDADD = k8s-shim/libshim.la $(CHECK_LIBS)

tests_unit_test_shim_core_SOURCES = tests/unit/test_shim_core.cc
tests_unit_test_shim_core_CXXFLAGS = $(AM_CXXFLAGS) $(CHECK_CFLAGS) $(LIBUV_CFLAGS)
tests_unit_test_shim_core_LDADD = k8s-shim/libshim.la $(CHECK_LIBS)

# common/pod_loss and the shim's use of it (restarted_pod_status).
tests_unit_test_pod_loss_SOURCES = tests/unit/test_pod_loss.cc
tests_unit_test_pod_loss_CXXFLAGS = $(AM_CXXFLAGS) $(CHECK_CFLAGS) $(LIBUV_CFLAGS)
tests_unit_test_pod_loss_LDADD = k8s-shim/libshim.la $(CHECK_LIBS)
endif

# Component tests: the real shim binary against a Python driver that plays
# the agent's side of the socket (tests/shim/driver.py).
TESTS += tests/shim/run.sh
EXTRA_DIST += \
	tests/shim/run.sh \
	tests/shim/driver.py \
	etc/runtime.conf.example
