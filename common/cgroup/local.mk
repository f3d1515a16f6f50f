# common/cgroup: the one place that builds or reads a cgroup path: where the
# hierarchies are and a process's membership (cgroup_files), the figures
# of a job's and a pod's cgroups (cgroup_usage), pods' and
# containers' cgroups (pod_cgroup), Slurm's job and step cgroups
# (slurm_cgroup), device rules (cgroup_devices) and programs (bpf_devices).
# Part of libcommon_core: the plugin, the agent and the shim link it.
noinst_LTLIBRARIES += common/cgroup/libcgroup.la
common_cgroup_libcgroup_la_SOURCES = \
	common/cgroup/bpf_devices.cc \
	common/cgroup/bpf_devices.h \
	common/cgroup/cgroup_devices.cc \
	common/cgroup/cgroup_devices.h \
	common/cgroup/cgroup_files.cc \
	common/cgroup/cgroup_files.h \
	common/cgroup/cgroup_usage.cc \
	common/cgroup/cgroup_usage.h \
	common/cgroup/pod_cgroup.cc \
	common/cgroup/pod_cgroup.h \
	common/cgroup/slurm_cgroup.cc \
	common/cgroup/slurm_cgroup.h
