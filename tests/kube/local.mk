# Kubernetes API test double and its tests (tests/kube/README.md).
# The double's own suites run no program of this tree: an ASan + UBSan build
# (configure --enable-sanitizers, the distcheck of scripts/run-tests.sh) has
# nothing to add to them.
if !SANITIZERS
TESTS += tests/kube/run-tests.sh
endif
EXTRA_DIST += \
	tests/kube/README.md \
	tests/kube/local.mk \
	tests/kube/kube_test_server.py \
	tests/kube/coverage.sh \
	tests/kube/kubetest/__init__.py \
	tests/kube/kubetest/api.py \
	tests/kube/kubetest/auth.py \
	tests/kube/kubetest/cel.py \
	tests/kube/kubetest/certificates.py \
	tests/kube/kubetest/impersonation.py \
	tests/kube/kubetest/controls.py \
	tests/kube/kubetest/csr.py \
	tests/kube/kubetest/discovery.py \
	tests/kube/kubetest/errors.py \
	tests/kube/kubetest/handler.py \
	tests/kube/kubetest/kubelet.py \
	tests/kube/kubetest/main.py \
	tests/kube/kubetest/metrics.py \
	tests/kube/kubetest/node_authorizer.py \
	tests/kube/kubetest/node_lifecycle.py \
	tests/kube/kubetest/objects.py \
	tests/kube/kubetest/patch.py \
	tests/kube/kubetest/pod_log.py \
	tests/kube/kubetest/resource_handler.py \
	tests/kube/kubetest/resources.py \
	tests/kube/kubetest/reviews.py \
	tests/kube/kubetest/scheduler.py \
	tests/kube/kubetest/selectors.py \
	tests/kube/kubetest/server.py \
	tests/kube/kubetest/store.py \
	tests/kube/kubetest/streaming.py \
	tests/kube/kubetest/tables.py \
	tests/kube/kubetest/tls.py \
	tests/kube/kubetest/tokens.py \
	tests/kube/kubetest/util.py \
	tests/kube/kubetest/vap.py \
	tests/kube/kubetest/validation.py \
	tests/kube/kubetest/watch.py \
	tests/kube/kubetest/volumes.py \
	tests/kube/kubetest/workloads.py \
	tests/kube/fake_kubelet.py \
	tests/kube/start-server.sh \
	tests/kube/run-tests.sh \
	tests/kube/test_audit_log.py \
	tests/kube/test_kube_api.py \
	tests/kube/test_api_races.py \
	tests/kube/test_kubectl.sh \
	tests/kube/kubectl_streams.sh \
	tests/kube/kubectl_top.sh
