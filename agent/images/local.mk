# agent/images: the node's image store shared by every job on the host
# (image_store: its pulls as the store's own user, its collection) and the
# read-only view the jobs' podman reads (store_publish, run as that user by
# `slurm-k8s-agent --image-store-publish`). Reaches nothing of the agent but
# agent/core/ (tests/static/layers.py); unit-tested in tests/unit.
if BUILD_DAEMONS
noinst_LTLIBRARIES += agent/images/libimages.la
agent_images_libimages_la_SOURCES = \
	agent/images/image_store.cc \
	agent/images/image_store.h \
	agent/images/store_publish.cc \
	agent/images/store_publish.h
agent_images_libimages_la_CPPFLAGS = $(AM_CPPFLAGS) $(LIBUV_CFLAGS)
agent_images_libimages_la_LIBADD = \
	agent/core/libagentcore.la \
	uv/libskuv.la \
	common/daemons/libcommon_daemons.la \
	$(LIBUV_LIBS)
endif
