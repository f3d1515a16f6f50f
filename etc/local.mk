# Configuration examples shipped with the sources.
EXTRA_DIST += \
	etc/README.md \
	etc/agent.conf.example \
	etc/plugstack.conf.example \
	etc/rbac.yaml \
	etc/rbac-node-identity.yaml \
	etc/vap-agent-nodes.yaml \
	etc/runtime.conf.example \
	etc/slurm-k8s-agent.service \
	etc/slurm.conf.example
