# tests/agent: the in-memory pod runtime and the test build of the agent
# daemon that offers it (runtime = fake). Neither ships: the installed
# slurm-k8s-agent (agent/main.cc) offers the shim only. `make check` builds
# them; check-valgrind and bench name the binary as a prerequisite.
if BUILD_DAEMONS
check_LTLIBRARIES += tests/agent/libfakeruntime.la
tests_agent_libfakeruntime_la_SOURCES = \
	tests/agent/fake_runtime.cc \
	tests/agent/fake_runtime.h

check_PROGRAMS += tests/agent/slurm-k8s-test-agent
tests_agent_slurm_k8s_test_agent_SOURCES = tests/agent/test_agent_main.cc
tests_agent_slurm_k8s_test_agent_CPPFLAGS = $(AM_CPPFLAGS) $(LIBUV_CFLAGS)
tests_agent_slurm_k8s_test_agent_LDADD = \
	tests/agent/libfakeruntime.la \
	$(SK_AGENT_DAEMON_LIBS)
endif
