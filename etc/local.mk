# Configuration examples shipped with the sources.
EXTRA_DIST += \
	etc/README.md \
	etc/agent.conf.example \
	etc/plugstack.conf.example \
	etc/rbac.yaml \
	etc/rbac-node-identity.yaml \
	etc/vap-agent-nodes.yaml \
	etc/vap-pod-namespaces.yaml \
	etc/runtime.conf.example \
	etc/slurm-k8s-agent.service \
	etc/slurm-k8s-token-renew.service \
	etc/slurm-k8s-token-renew.timer \
	etc/slurm.conf.example

# The token renewal the agent's unit files name (etc/slurm-k8s-token-renew.service).
slurmk8slibexecdir = $(libexecdir)/slurm-k8s
dist_slurmk8slibexec_SCRIPTS = etc/slurm-k8s-token-renew
