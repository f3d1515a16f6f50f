# Kubernetes API test double and its tests (tests/kube/README.md).
TESTS += tests/kube/run-tests.sh
EXTRA_DIST += \
	tests/kube/README.md \
	tests/kube/local.mk \
	tests/kube/kube_test_server.py \
	tests/kube/fake_kubelet.py \
	tests/kube/start-server.sh \
	tests/kube/run-tests.sh \
	tests/kube/test_kube_api.py \
	tests/kube/test_kubectl.sh
