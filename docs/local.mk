EXTRA_DIST += \
	docs/architecture.md
EXTRA_DIST += \
	docs/kubernetes-guide.md \
	docs/user-guide.md
