# Unit tests (Check): one program per module, table-driven, forked mode.
# Every program compiles with SK_CHECK_CXXFLAGS and links SK_CHECK_LIBS; the
# plugin's and libcommon_core's run in a --disable-daemons build too, the rest
# need the daemons' libraries.
SK_CHECK_CXXFLAGS = $(AM_CXXFLAGS) $(CHECK_CFLAGS)
SK_CHECK_LIBS = $(CHECK_LIBS)
EXTRA_DIST += tests/unit/check_main.h tests/unit/check_json.h

if HAVE_CHECK
# ---- the plugin ----
check_PROGRAMS += \
	tests/unit/test_spank_logic \
	tests/unit/test_spank_hooks \
	tests/unit/test_plugin_symbols
TESTS += \
	tests/unit/test_spank_logic \
	tests/unit/test_spank_hooks \
	tests/unit/test_plugin_symbols

tests_unit_test_spank_logic_SOURCES = tests/unit/test_spank_logic.cc
tests_unit_test_spank_logic_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_spank_logic_LDADD = spank/libspank_core.la $(SK_CHECK_LIBS)

# The hooks through the fake spank layer (no Slurm process involved).
tests_unit_test_spank_hooks_SOURCES = \
	tests/unit/fake_spank.cc \
	tests/unit/fake_spank.h \
	tests/unit/test_spank_hooks.cc
tests_unit_test_spank_hooks_CPPFLAGS = $(AM_CPPFLAGS) $(SLURM_CPPFLAGS)
tests_unit_test_spank_hooks_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_spank_hooks_LDADD = spank/libspank.la $(SK_CHECK_LIBS)

# Loads the built plugin with dlopen(RTLD_NOW): the fake spank layer in this
# program provides the spank_* functions slurmd would (-export-dynamic).
tests_unit_test_plugin_symbols_SOURCES = \
	tests/unit/fake_spank.cc \
	tests/unit/fake_spank.h \
	tests/unit/test_plugin_symbols.cc
tests_unit_test_plugin_symbols_CPPFLAGS = $(AM_CPPFLAGS) $(SLURM_CPPFLAGS) \
	-DSPANK_K8S_SO='"$(abs_top_builddir)/spank/.libs/spank_k8s.so"'
tests_unit_test_plugin_symbols_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_plugin_symbols_LDFLAGS = $(AM_LDFLAGS) -export-dynamic
tests_unit_test_plugin_symbols_LDADD = $(SK_CHECK_LIBS) -ldl
EXTRA_tests_unit_test_plugin_symbols_DEPENDENCIES = spank/spank_k8s.la

# ---- common/ (libcommon_core, the plugin's part of common/) ----
check_PROGRAMS += \
	tests/unit/test_strings \
	tests/unit/test_config \
	tests/unit/test_k8s_names \
	tests/unit/test_error \
	tests/unit/test_log
TESTS += \
	tests/unit/test_strings \
	tests/unit/test_config \
	tests/unit/test_k8s_names \
	tests/unit/test_error \
	tests/unit/test_log

tests_unit_test_strings_SOURCES = tests/unit/test_strings.cc
tests_unit_test_strings_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_strings_LDADD = common/libcommon_core.la $(SK_CHECK_LIBS)

tests_unit_test_config_SOURCES = tests/unit/test_config.cc
tests_unit_test_config_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_config_LDADD = common/libcommon_core.la $(SK_CHECK_LIBS)

tests_unit_test_k8s_names_SOURCES = tests/unit/test_k8s_names.cc
tests_unit_test_k8s_names_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_k8s_names_LDADD = common/libcommon_core.la $(SK_CHECK_LIBS)

tests_unit_test_error_SOURCES = tests/unit/test_error.cc
tests_unit_test_error_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_error_LDADD = common/libcommon_core.la $(SK_CHECK_LIBS)

tests_unit_test_log_SOURCES = tests/unit/test_log.cc
tests_unit_test_log_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_log_LDADD = common/libcommon_core.la $(SK_CHECK_LIBS)

# ---- common/ (libcommon_core): files, /proc, cgroups, time ----
check_PROGRAMS += \
	tests/unit/test_fs \
	tests/unit/test_procfs \
	tests/unit/test_rfc3339 \
	tests/unit/test_slurm_cgroup \
	tests/unit/test_cgroup_files \
	tests/unit/test_bpf_devices
TESTS += \
	tests/unit/test_fs \
	tests/unit/test_procfs \
	tests/unit/test_rfc3339 \
	tests/unit/test_slurm_cgroup \
	tests/unit/test_cgroup_files \
	tests/unit/test_bpf_devices
tests_unit_test_fs_SOURCES = tests/unit/test_fs.cc
tests_unit_test_fs_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_fs_LDADD = common/libcommon_core.la $(SK_CHECK_LIBS)
tests_unit_test_procfs_SOURCES = tests/unit/test_procfs.cc
tests_unit_test_procfs_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_procfs_LDADD = common/libcommon_core.la $(SK_CHECK_LIBS)
tests_unit_test_rfc3339_SOURCES = tests/unit/test_rfc3339.cc
tests_unit_test_rfc3339_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_rfc3339_LDADD = common/libcommon_core.la $(SK_CHECK_LIBS)
tests_unit_test_slurm_cgroup_SOURCES = tests/unit/test_slurm_cgroup.cc
tests_unit_test_slurm_cgroup_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_slurm_cgroup_LDADD = common/libcommon_core.la $(SK_CHECK_LIBS)
tests_unit_test_cgroup_files_SOURCES = tests/unit/test_cgroup_files.cc
tests_unit_test_cgroup_files_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_cgroup_files_LDADD = common/libcommon_core.la $(SK_CHECK_LIBS)
tests_unit_test_bpf_devices_SOURCES = tests/unit/test_bpf_devices.cc
tests_unit_test_bpf_devices_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_bpf_devices_LDADD = common/libcommon_core.la $(SK_CHECK_LIBS)

if BUILD_DAEMONS
# ---- common/ ----
check_PROGRAMS += \
	tests/unit/test_json \
	tests/unit/test_protocol \
	tests/unit/test_wire \
	tests/unit/test_agent_client \
	tests/unit/test_cri_log
TESTS += \
	tests/unit/test_json \
	tests/unit/test_protocol \
	tests/unit/test_wire \
	tests/unit/test_agent_client \
	tests/unit/test_cri_log

tests_unit_test_json_SOURCES = tests/unit/test_json.cc
tests_unit_test_json_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_json_LDADD = common/daemons/libcommon_daemons.la $(SK_CHECK_LIBS)

tests_unit_test_protocol_SOURCES = tests/unit/test_protocol.cc
tests_unit_test_protocol_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_protocol_LDADD = common/daemons/libcommon_daemons.la $(SK_CHECK_LIBS)

# The plugin's side (json-c) against the agent's (jsoncpp) of the one codec.
tests_unit_test_wire_SOURCES = tests/unit/test_wire.cc
tests_unit_test_wire_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_wire_LDADD = common/daemons/libcommon_daemons.la $(SK_CHECK_LIBS)

tests_unit_test_agent_client_SOURCES = tests/unit/test_agent_client.cc
tests_unit_test_agent_client_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_agent_client_LDADD = common/daemons/libcommon_daemons.la $(SK_CHECK_LIBS)

tests_unit_test_cri_log_SOURCES = tests/unit/test_cri_log.cc
tests_unit_test_cri_log_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_cri_log_LDADD = common/daemons/libcommon_daemons.la $(SK_CHECK_LIBS)

# ---- agent/kubelet/http_server: upgraded connections ----
check_PROGRAMS += tests/unit/test_http_upgrade
TESTS += tests/unit/test_http_upgrade
tests_unit_test_http_upgrade_SOURCES = tests/unit/test_http_upgrade.cc
tests_unit_test_http_upgrade_CXXFLAGS = $(SK_CHECK_CXXFLAGS) $(GNUTLS_CFLAGS)
tests_unit_test_http_upgrade_LDADD = agent/kubelet/libkubelet.la agent/kubelet/streams/libstreams.la common/daemons/libcommon_daemons.la $(SK_CHECK_LIBS) $(GNUTLS_LIBS) -lpthread

check_PROGRAMS += tests/unit/test_kubelet_streams
TESTS += tests/unit/test_kubelet_streams
tests_unit_test_kubelet_streams_SOURCES = tests/unit/test_kubelet_streams.cc
tests_unit_test_kubelet_streams_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_kubelet_streams_LDADD = agent/kubelet/libkubelet.la agent/kubelet/streams/libstreams.la common/daemons/libcommon_daemons.la $(SK_CHECK_LIBS) -lpthread

# ---- agent/kubelet/stream_request: the kubelet's streaming requests ----
check_PROGRAMS += tests/unit/test_stream_request
TESTS += tests/unit/test_stream_request
tests_unit_test_stream_request_SOURCES = tests/unit/test_stream_request.cc
tests_unit_test_stream_request_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_stream_request_LDADD = agent/kubelet/libkubelet.la agent/kubelet/streams/libstreams.la common/daemons/libcommon_daemons.la $(SK_CHECK_LIBS)

# ---- agent/kubelet/streams (libstreams): the kubelet streaming protocols ----
check_PROGRAMS += \
	tests/unit/test_spdy \
	tests/unit/test_ws_channel \
	tests/unit/test_remotecommand
TESTS += \
	tests/unit/test_spdy \
	tests/unit/test_ws_channel \
	tests/unit/test_remotecommand
SK_STREAMS_TEST_LIBS = agent/kubelet/streams/libstreams.la common/daemons/libcommon_daemons.la $(SK_CHECK_LIBS)

# Writes peer header blocks with zlib itself.
tests_unit_test_spdy_SOURCES = tests/unit/test_spdy.cc
tests_unit_test_spdy_CXXFLAGS = $(SK_CHECK_CXXFLAGS) $(ZLIB_CFLAGS)
tests_unit_test_spdy_LDADD = $(SK_STREAMS_TEST_LIBS) $(ZLIB_LIBS)

tests_unit_test_ws_channel_SOURCES = tests/unit/test_ws_channel.cc
tests_unit_test_ws_channel_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_ws_channel_LDADD = $(SK_STREAMS_TEST_LIBS)

tests_unit_test_remotecommand_SOURCES = tests/unit/test_remotecommand.cc
tests_unit_test_remotecommand_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_remotecommand_LDADD = $(SK_STREAMS_TEST_LIBS)

# ---- agent/: the pure core and the controllers' pure modules (agent/core/, agent/controllers/) ----
SK_AGENT_CORE_TEST_LIBS = agent/controllers/libcontrollers.la agent/core/libagentcore.la agent/kubelet/libkubelet.la uv/libskuv.la common/daemons/libcommon_daemons.la $(SK_CHECK_LIBS)
check_PROGRAMS += \
	tests/unit/test_agent_config \
	tests/unit/test_backoff \
	tests/unit/test_cni \
	tests/unit/test_env_resolver \
	tests/unit/test_event_correlator \
	tests/unit/test_host_volumes \
	tests/unit/test_image_store \
	tests/unit/test_job_store \
	tests/unit/test_slurm_time \
	tests/unit/test_log_index \
	tests/unit/test_lost_shim \
	tests/unit/test_node_address \
	tests/unit/test_node_identity \
	tests/unit/test_node_builder \
	tests/unit/test_peer_auth \
	tests/unit/test_pod_status_patch \
	tests/unit/test_tcp_listeners \
	tests/unit/test_watch_parser
TESTS += \
	tests/unit/test_agent_config \
	tests/unit/test_backoff \
	tests/unit/test_cni \
	tests/unit/test_env_resolver \
	tests/unit/test_event_correlator \
	tests/unit/test_host_volumes \
	tests/unit/test_image_store \
	tests/unit/test_job_store \
	tests/unit/test_slurm_time \
	tests/unit/test_log_index \
	tests/unit/test_lost_shim \
	tests/unit/test_node_address \
	tests/unit/test_node_identity \
	tests/unit/test_node_builder \
	tests/unit/test_peer_auth \
	tests/unit/test_pod_status_patch \
	tests/unit/test_tcp_listeners \
	tests/unit/test_watch_parser

tests_unit_test_agent_config_SOURCES = tests/unit/test_agent_config.cc
tests_unit_test_agent_config_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_agent_config_LDADD = $(SK_AGENT_CORE_TEST_LIBS)

tests_unit_test_backoff_SOURCES = tests/unit/test_backoff.cc
tests_unit_test_backoff_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_backoff_LDADD = $(SK_AGENT_CORE_TEST_LIBS)

tests_unit_test_env_resolver_SOURCES = tests/unit/test_env_resolver.cc
tests_unit_test_env_resolver_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_env_resolver_LDADD = $(SK_AGENT_CORE_TEST_LIBS)

tests_unit_test_host_volumes_SOURCES = tests/unit/test_host_volumes.cc
tests_unit_test_host_volumes_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_host_volumes_LDADD = $(SK_AGENT_CORE_TEST_LIBS)

tests_unit_test_cni_SOURCES = tests/unit/test_cni.cc
tests_unit_test_cni_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_cni_LDADD = agent/network/libnetwork.la $(SK_AGENT_CORE_TEST_LIBS)

tests_unit_test_image_store_SOURCES = tests/unit/test_image_store.cc
tests_unit_test_image_store_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_image_store_LDADD = agent/images/libimages.la $(SK_AGENT_CORE_TEST_LIBS)

tests_unit_test_event_correlator_SOURCES = tests/unit/test_event_correlator.cc
tests_unit_test_event_correlator_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_event_correlator_LDADD = $(SK_AGENT_CORE_TEST_LIBS)

tests_unit_test_job_store_SOURCES = tests/unit/test_job_store.cc
tests_unit_test_job_store_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_job_store_LDADD = $(SK_AGENT_CORE_TEST_LIBS)

tests_unit_test_slurm_time_SOURCES = tests/unit/test_slurm_time.cc
tests_unit_test_slurm_time_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_slurm_time_LDADD = $(SK_AGENT_CORE_TEST_LIBS)

tests_unit_test_tcp_listeners_SOURCES = tests/unit/test_tcp_listeners.cc
tests_unit_test_tcp_listeners_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_tcp_listeners_LDADD = $(SK_AGENT_CORE_TEST_LIBS)
tests_unit_test_log_index_SOURCES = tests/unit/test_log_index.cc
tests_unit_test_log_index_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_log_index_LDADD = $(SK_AGENT_CORE_TEST_LIBS)

tests_unit_test_lost_shim_SOURCES = tests/unit/test_lost_shim.cc
tests_unit_test_lost_shim_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_lost_shim_LDADD = $(SK_AGENT_CORE_TEST_LIBS)

tests_unit_test_node_address_SOURCES = tests/unit/test_node_address.cc
tests_unit_test_node_address_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_node_address_LDADD = $(SK_AGENT_CORE_TEST_LIBS)
tests_unit_test_node_identity_SOURCES = tests/unit/test_node_identity.cc
tests_unit_test_node_identity_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_node_identity_LDADD = $(SK_AGENT_CORE_TEST_LIBS)
tests_unit_test_node_builder_SOURCES = tests/unit/test_node_builder.cc
tests_unit_test_node_builder_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_node_builder_LDADD = $(SK_AGENT_CORE_TEST_LIBS)

tests_unit_test_peer_auth_SOURCES = tests/unit/test_peer_auth.cc
tests_unit_test_peer_auth_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_peer_auth_LDADD = $(SK_AGENT_CORE_TEST_LIBS)

tests_unit_test_pod_status_patch_SOURCES = tests/unit/test_pod_status_patch.cc
tests_unit_test_pod_status_patch_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_pod_status_patch_LDADD = $(SK_AGENT_CORE_TEST_LIBS)

tests_unit_test_watch_parser_SOURCES = tests/unit/test_watch_parser.cc
tests_unit_test_watch_parser_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_watch_parser_LDADD = $(SK_AGENT_CORE_TEST_LIBS)

# ---- agent/: the agent's room (libagent) and the kubelet endpoint ----
check_PROGRAMS += \
	tests/unit/test_api_auth \
	tests/unit/test_cgroup_broker \
	tests/unit/test_shim_runtime \
	tests/unit/test_kubelet_auth \
	tests/unit/test_kubelet_logs \
	tests/unit/test_kubelet_stats \
	tests/unit/test_metrics
TESTS += \
	tests/unit/test_api_auth \
	tests/unit/test_cgroup_broker \
	tests/unit/test_shim_runtime \
	tests/unit/test_kubelet_auth \
	tests/unit/test_kubelet_logs \
	tests/unit/test_kubelet_stats \
	tests/unit/test_metrics

# What a test of the agent's own room links.
SK_AGENT_TEST_LIBS = \
	agent/libagent.la \
	agent/controllers/libcontrollers.la \
	agent/core/libagentcore.la \
	common/daemons/libcommon_daemons.la \
	$(SK_CHECK_LIBS) \
	$(LIBUV_LIBS) \
	$(LIBCURL_LIBS) \
	$(JSONCPP_LIBS)

tests_unit_test_api_auth_SOURCES = tests/unit/test_api_auth.cc
tests_unit_test_api_auth_CXXFLAGS = $(SK_CHECK_CXXFLAGS) $(LIBUV_CFLAGS)
tests_unit_test_api_auth_LDADD = $(SK_AGENT_TEST_LIBS)

tests_unit_test_shim_runtime_SOURCES = tests/unit/test_shim_runtime.cc
tests_unit_test_shim_runtime_CXXFLAGS = $(SK_CHECK_CXXFLAGS) $(LIBUV_CFLAGS)
tests_unit_test_shim_runtime_LDADD = $(SK_AGENT_TEST_LIBS)

tests_unit_test_cgroup_broker_SOURCES = tests/unit/test_cgroup_broker.cc
tests_unit_test_cgroup_broker_CXXFLAGS = $(SK_CHECK_CXXFLAGS) $(LIBUV_CFLAGS)
tests_unit_test_cgroup_broker_LDADD = $(SK_AGENT_TEST_LIBS)

tests_unit_test_kubelet_auth_SOURCES = tests/unit/test_kubelet_auth.cc
tests_unit_test_kubelet_auth_CXXFLAGS = $(SK_CHECK_CXXFLAGS) $(LIBUV_CFLAGS)
tests_unit_test_kubelet_auth_LDADD = \
	agent/libagent.la \
	agent/controllers/libcontrollers.la \
	agent/core/libagentcore.la \
	common/daemons/libcommon_daemons.la \
	$(SK_CHECK_LIBS) \
	$(LIBUV_LIBS) \
	$(LIBCURL_LIBS) \
	$(JSONCPP_LIBS) \
	-lpthread

tests_unit_test_kubelet_logs_SOURCES = tests/unit/test_kubelet_logs.cc
tests_unit_test_kubelet_logs_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_kubelet_logs_LDADD = agent/kubelet/libkubelet.la common/daemons/libcommon_daemons.la $(SK_CHECK_LIBS)

tests_unit_test_kubelet_stats_SOURCES = tests/unit/test_kubelet_stats.cc
tests_unit_test_kubelet_stats_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_kubelet_stats_LDADD = agent/kubelet/libkubelet.la common/daemons/libcommon_daemons.la $(SK_CHECK_LIBS)

tests_unit_test_metrics_SOURCES = tests/unit/test_metrics.cc
tests_unit_test_metrics_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_metrics_LDADD = agent/kubelet/libkubelet.la common/daemons/libcommon_daemons.la $(SK_CHECK_LIBS) -lpthread

# ---- k8s-shim/ ----
SK_SHIM_TEST_CXXFLAGS = $(SK_CHECK_CXXFLAGS) $(LIBUV_CFLAGS)
SK_SHIM_TEST_LIBS = k8s-shim/libshim.la $(SK_CHECK_LIBS)
check_PROGRAMS += \
	tests/unit/test_attach_handshake \
	tests/unit/test_shim_plan \
	tests/unit/test_cdi \
	tests/unit/test_shim_backoff \
	tests/unit/test_probe \
	tests/unit/test_gpu_alloc \
	tests/unit/test_shim_pod_status \
	tests/unit/test_pod_runner \
	tests/unit/test_pod_stats \
	tests/unit/test_supervise
TESTS += \
	tests/unit/test_attach_handshake \
	tests/unit/test_shim_plan \
	tests/unit/test_cdi \
	tests/unit/test_shim_backoff \
	tests/unit/test_probe \
	tests/unit/test_gpu_alloc \
	tests/unit/test_shim_pod_status \
	tests/unit/test_pod_runner \
	tests/unit/test_pod_stats \
	tests/unit/test_supervise

tests_unit_test_attach_handshake_SOURCES = tests/unit/test_attach_handshake.cc
tests_unit_test_attach_handshake_CXXFLAGS = $(SK_SHIM_TEST_CXXFLAGS)
tests_unit_test_attach_handshake_LDADD = $(SK_SHIM_TEST_LIBS)

tests_unit_test_shim_plan_SOURCES = tests/unit/test_shim_plan.cc
tests_unit_test_shim_plan_CXXFLAGS = $(SK_SHIM_TEST_CXXFLAGS)
tests_unit_test_shim_plan_LDADD = $(SK_SHIM_TEST_LIBS)

tests_unit_test_cdi_SOURCES = tests/unit/test_cdi.cc
tests_unit_test_cdi_CXXFLAGS = $(SK_SHIM_TEST_CXXFLAGS)
tests_unit_test_cdi_LDADD = $(SK_SHIM_TEST_LIBS)

tests_unit_test_shim_backoff_SOURCES = tests/unit/test_shim_backoff.cc
tests_unit_test_shim_backoff_CXXFLAGS = $(SK_SHIM_TEST_CXXFLAGS)
tests_unit_test_shim_backoff_LDADD = $(SK_SHIM_TEST_LIBS)

tests_unit_test_probe_SOURCES = tests/unit/test_probe.cc
tests_unit_test_probe_CXXFLAGS = $(SK_SHIM_TEST_CXXFLAGS)
tests_unit_test_probe_LDADD = $(SK_SHIM_TEST_LIBS)

tests_unit_test_gpu_alloc_SOURCES = tests/unit/test_gpu_alloc.cc
tests_unit_test_gpu_alloc_CXXFLAGS = $(SK_SHIM_TEST_CXXFLAGS)
tests_unit_test_gpu_alloc_LDADD = $(SK_SHIM_TEST_LIBS)

tests_unit_test_shim_pod_status_SOURCES = tests/unit/test_shim_pod_status.cc
tests_unit_test_shim_pod_status_CXXFLAGS = $(SK_SHIM_TEST_CXXFLAGS)
tests_unit_test_shim_pod_status_LDADD = $(SK_SHIM_TEST_LIBS)

# Its containers run under the built shim's supervisor (k8s-shim/supervise.h).
tests_unit_test_pod_runner_SOURCES = tests/unit/test_pod_runner.cc
tests_unit_test_pod_runner_CPPFLAGS = $(AM_CPPFLAGS) \
	-DSK_SHIM_BIN='"$(abs_top_builddir)/k8s-shim/slurm-k8s-shim"'
tests_unit_test_pod_runner_CXXFLAGS = $(SK_SHIM_TEST_CXXFLAGS)
tests_unit_test_pod_runner_LDADD = $(SK_SHIM_TEST_LIBS)
EXTRA_tests_unit_test_pod_runner_DEPENDENCIES = k8s-shim/slurm-k8s-shim

tests_unit_test_supervise_SOURCES = tests/unit/test_supervise.cc
tests_unit_test_supervise_CXXFLAGS = $(SK_SHIM_TEST_CXXFLAGS)
tests_unit_test_supervise_LDADD = $(SK_SHIM_TEST_LIBS)

tests_unit_test_pod_stats_SOURCES = tests/unit/test_pod_stats.cc
tests_unit_test_pod_stats_CXXFLAGS = $(SK_SHIM_TEST_CXXFLAGS)
tests_unit_test_pod_stats_LDADD = $(SK_SHIM_TEST_LIBS)


# ---- common/: the agent-shim protocol ----
check_PROGRAMS += tests/unit/test_exec_frames
TESTS += tests/unit/test_exec_frames
tests_unit_test_exec_frames_SOURCES = tests/unit/test_exec_frames.cc
tests_unit_test_exec_frames_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_exec_frames_LDADD = common/daemons/libcommon_daemons.la $(SK_CHECK_LIBS)

check_PROGRAMS += tests/unit/test_shim_protocol
TESTS += tests/unit/test_shim_protocol
tests_unit_test_shim_protocol_SOURCES = tests/unit/test_shim_protocol.cc
tests_unit_test_shim_protocol_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_shim_protocol_LDADD = common/daemons/libcommon_daemons.la $(SK_CHECK_LIBS)

# ---- uv/ ----
check_PROGRAMS += tests/unit/test_uv
TESTS += tests/unit/test_uv
tests_unit_test_uv_SOURCES = tests/unit/test_uv.cc
tests_unit_test_uv_CXXFLAGS = $(SK_CHECK_CXXFLAGS) $(LIBUV_CFLAGS)
tests_unit_test_uv_LDADD = uv/libskuv.la $(SK_CHECK_LIBS)

# ---- agent/controllers/ at their seams: VirtualNode on a real uv loop over
# the fake HTTP transport and the fake runtime (tests/agent/) ----
check_PROGRAMS += \
	tests/unit/test_node_lease_controller \
	tests/unit/test_pod_controller
TESTS += \
	tests/unit/test_node_lease_controller \
	tests/unit/test_pod_controller
SK_CONTROLLER_TEST_SOURCES = \
	tests/unit/controller_env.cc \
	tests/unit/controller_env.h \
	tests/unit/fake_transport.cc \
	tests/unit/fake_transport.h \
	tests/unit/manual_timers.cc \
	tests/unit/manual_timers.h
SK_CONTROLLER_TEST_CPPFLAGS = $(AM_CPPFLAGS) $(LIBUV_CFLAGS)
SK_CONTROLLER_TEST_LIBS = \
	tests/agent/libfakeruntime.la \
	agent/libagent.la \
	agent/controllers/libcontrollers.la \
	agent/core/libagentcore.la \
	common/daemons/libcommon_daemons.la \
	$(SK_CHECK_LIBS) \
	$(LIBUV_LIBS) \
	$(LIBCURL_LIBS) \
	$(JSONCPP_LIBS)
tests_unit_test_node_lease_controller_SOURCES = \
	tests/unit/test_node_lease_controller.cc \
	$(SK_CONTROLLER_TEST_SOURCES)
tests_unit_test_node_lease_controller_CPPFLAGS = $(SK_CONTROLLER_TEST_CPPFLAGS)
tests_unit_test_node_lease_controller_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_node_lease_controller_LDADD = $(SK_CONTROLLER_TEST_LIBS)
tests_unit_test_pod_controller_SOURCES = \
	tests/unit/test_pod_controller.cc \
	$(SK_CONTROLLER_TEST_SOURCES)
tests_unit_test_pod_controller_CPPFLAGS = $(SK_CONTROLLER_TEST_CPPFLAGS)
tests_unit_test_pod_controller_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_pod_controller_LDADD = $(SK_CONTROLLER_TEST_LIBS)

# agent/socket_server on a real uv loop and unix socket.
check_PROGRAMS += tests/unit/test_socket_server
TESTS += tests/unit/test_socket_server
tests_unit_test_socket_server_SOURCES = tests/unit/test_socket_server.cc
tests_unit_test_socket_server_CPPFLAGS = $(SK_CONTROLLER_TEST_CPPFLAGS)
tests_unit_test_socket_server_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_socket_server_LDADD = $(SK_CONTROLLER_TEST_LIBS)

# common/daemons/pod_loss and the shim's use of it (restarted_pod_status).
check_PROGRAMS += tests/unit/test_pod_loss
TESTS += tests/unit/test_pod_loss
tests_unit_test_pod_loss_SOURCES = tests/unit/test_pod_loss.cc
tests_unit_test_pod_loss_CXXFLAGS = $(SK_SHIM_TEST_CXXFLAGS)
tests_unit_test_pod_loss_LDADD = $(SK_SHIM_TEST_LIBS)

# ---- cli/ ----
check_PROGRAMS += tests/unit/test_cli
TESTS += tests/unit/test_cli
tests_unit_test_cli_SOURCES = tests/unit/test_cli.cc
tests_unit_test_cli_CXXFLAGS = $(SK_CHECK_CXXFLAGS)
tests_unit_test_cli_LDADD = cli/libcli.la common/daemons/libcommon_daemons.la $(SK_CHECK_LIBS)
endif
endif
