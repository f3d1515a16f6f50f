# Configuration examples shipped with the sources.
EXTRA_DIST += \
	etc/slurm.conf.example
