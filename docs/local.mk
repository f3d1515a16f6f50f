EXTRA_DIST += \
	docs/architecture.md
