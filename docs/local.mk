EXTRA_DIST += \
	docs/architecture.md
EXTRA_DIST += \
	docs/admin-guide.md \
	docs/failure-model.md \
	docs/kubernetes-guide.md \
	docs/protocol.md \
	docs/security.md \
	docs/user-guide.md
