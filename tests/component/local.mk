# Component tests: the real agent (fake runtime) against the test API server,
# the agent with real shims, and the real HTTPS kubelet endpoint over CRI log
# files driven by curl. Need the daemons.
EXTRA_DIST += \
	tests/component/test_agent.sh \
	tests/component/test_agent_shim.sh \
	tests/component/test_agent_exec.sh \
	tests/component/test_agent_node_ports.sh \
	tests/component/test_agent_credentials.sh \
	tests/component/test_agent_node_identity.sh \
	tests/component/test_agent_slot_identity.sh \
	tests/component/test_agent_impersonation.sh \
	tests/component/test_agent_volumes.sh \
	tests/component/test_agent_serving_cert.sh \
	tests/component/test_agent_http2.sh \
	tests/component/test_agent_faults.sh \
	tests/component/test_kubelet_server.sh \
	tests/component/agent_test.py \
	tests/component/agent_faults_test.py \
	tests/component/agent_http2_test.py \
	tests/component/agent_credentials_test.py \
	tests/component/agent_node_identity_test.py \
	tests/component/agent_slot_identity_test.py \
	tests/component/agent_impersonation_test.py \
	tests/component/agent_volumes_test.py \
	tests/component/agent_serving_cert_test.py \
	tests/component/agent_shim_test.py \
	tests/component/agent_exec_test.py \
	tests/component/agent_node_ports_test.py

if BUILD_DAEMONS
TESTS += \
	tests/component/test_agent.sh \
	tests/component/test_agent_shim.sh \
	tests/component/test_agent_exec.sh \
	tests/component/test_agent_node_ports.sh \
	tests/component/test_agent_credentials.sh \
	tests/component/test_agent_node_identity.sh \
	tests/component/test_agent_slot_identity.sh \
	tests/component/test_agent_impersonation.sh \
	tests/component/test_agent_volumes.sh \
	tests/component/test_agent_serving_cert.sh \
	tests/component/test_agent_http2.sh \
	tests/component/test_agent_faults.sh \
	tests/component/test_kubelet_server.sh

check_PROGRAMS += tests/component/kubelet_server_main
tests_component_kubelet_server_main_SOURCES = tests/component/kubelet_server_main.cc
tests_component_kubelet_server_main_LDADD = \
	agent/kubelet/libkubelet.la \
	common/daemons/libcommon_daemons.la
endif
