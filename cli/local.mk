# slurm-k8s: the admin/user CLI over the agent socket (tests in
# tests/unit/local.mk). Not built by --disable-daemons.
if BUILD_DAEMONS
noinst_LTLIBRARIES += cli/libcli.la
cli_libcli_la_SOURCES = \
	cli/cli.cc \
	cli/cli.h

bin_PROGRAMS += cli/slurm-k8s
cli_slurm_k8s_SOURCES = cli/main.cc
cli_slurm_k8s_LDADD = \
	cli/libcli.la \
	common/daemons/libcommon_daemons.la
endif
