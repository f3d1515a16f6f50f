# Configuration examples shipped with the sources.
EXTRA_DIST += \
	etc/README.md \
	etc/plugstack.conf.example \
	etc/slurm.conf.example
