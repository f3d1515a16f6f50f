# bench: benchmarks (not timed tests). `make bench` runs them all against this
# build and writes bench/results.json here; see docs/benchmarks.md.
EXTRA_DIST += \
	bench/run-all.sh \
	bench/sklib.py \
	bench/kubeapi.py \
	bench/audit-policy.yaml \
	bench/report.py \
	bench/bench_lifecycle.py \
	bench/bench_mounts.py \
	bench/bench_images.py \
	bench/bench_image_store.py \
	bench/bench_steady.py \
	bench/bench_resources.py \
	bench/bench_scale.py \
	bench/bench_slurm_start.py \
	bench/bench_streams.py \
	bench/bench_online_rl.py \
	bench/bench_cgroups.py \
	bench/bench_cgroup_v2.py \
	bench/bench_pod_network.py \
	bench/results/2026-11-29.json

# The memory floor of a shim-like process (bench_resources.py); built by
# `make bench` only.
EXTRA_PROGRAMS += bench/rss_floor
bench_rss_floor_SOURCES = bench/rss_floor.cc
bench_rss_floor_CPPFLAGS = $(AM_CPPFLAGS) $(JSONCPP_CFLAGS) $(LIBUV_CFLAGS)
bench_rss_floor_LDADD = $(JSONCPP_LIBS) $(LIBUV_LIBS)
CLEANFILES += bench/rss_floor$(EXEEXT)

# What a pod's own cgroup costs at its start and end (bench_cgroups.py); built
# by `make bench` only.
EXTRA_PROGRAMS += bench/pod_cgroup_cost
bench_pod_cgroup_cost_SOURCES = bench/pod_cgroup_cost.cc
bench_pod_cgroup_cost_LDADD = common/libcommon_core.la
CLEANFILES += bench/pod_cgroup_cost$(EXEEXT)

# What a pod's own network costs at its start and end (bench_pod_network.py);
# built by `make bench` only.
EXTRA_PROGRAMS += bench/pod_network_cost
bench_pod_network_cost_SOURCES = bench/pod_network_cost.cc
bench_pod_network_cost_CPPFLAGS = $(AM_CPPFLAGS) $(LIBUV_CFLAGS)
bench_pod_network_cost_LDADD = agent/network/libnetwork.la agent/core/libagentcore.la uv/libskuv.la common/daemons/libcommon_daemons.la $(LIBUV_LIBS) $(JSONCPP_LIBS)
CLEANFILES += bench/pod_network_cost$(EXEEXT)

# runtime = fake runs start the agent's test build (tests/agent/local.mk).
bench: all bench/rss_floor$(EXEEXT) bench/pod_cgroup_cost$(EXEEXT) bench/pod_network_cost$(EXEEXT) tests/agent/slurm-k8s-test-agent$(EXEEXT)
	SK_TOP_SRCDIR='$(abs_top_srcdir)' SK_TOP_BUILDDIR='$(abs_top_builddir)' \
	PYTHON3='$(PYTHON3)' $(SHELL) $(top_srcdir)/bench/run-all.sh \
	  '$(abs_top_builddir)/bench/results.json'

.PHONY: bench
