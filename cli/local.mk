# slurm-k8s: the admin/user CLI over the agent socket.
noinst_LTLIBRARIES += cli/libcli.la
cli_libcli_la_SOURCES = \
	cli/cli.cc \
	cli/cli.h

bin_PROGRAMS += cli/slurm-k8s
cli_slurm_k8s_SOURCES = cli/main.cc
cli_slurm_k8s_LDADD = \
	cli/libcli.la \
	common/libcommon.la

if HAVE_CHECK
check_PROGRAMS += \
	tests/unit/test_cli
TESTS += \
	tests/unit/test_cli
tests_unit_test_cli_SOURCES = tests/unit/test_cli.cc
tests_unit_test_cli_CXXFLAGS = $(AM_CXXFLAGS) $(CHECK_CFLAGS)
tests_unit_test_cli_LDADD = cli/libcli.la common/libcommon.la $(CHECK_LIBS)
endif
