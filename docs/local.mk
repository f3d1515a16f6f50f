EXTRA_DIST += \
	docs/admin-guide.md \
	docs/architecture.md \
	docs/benchmarks.md \
	docs/failure-model.md \
	docs/kubernetes-guide.md \
	docs/protocol.md \
	docs/security.md \
	docs/user-guide.md
