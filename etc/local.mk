# Configuration examples and manifests shipped with the sources, installed
# by `make install` under $(datadir)/slurm-k8s (docs/admin-guide.md, "Install").
slurmk8sdatadir = $(datadir)/slurm-k8s
dist_slurmk8sdata_DATA = \
	etc/README.md \
	etc/agent.conf.example \
	etc/plugstack.conf.example \
	etc/rbac.yaml \
	etc/rbac-node-identity.yaml \
	etc/vap-agent-nodes.yaml \
	etc/vap-pod-namespaces.yaml \
	etc/runtime.conf.example \
	etc/slurm.conf.example

# The systemd units, installed in --with-systemdsystemunitdir with the paths
# configure was given (the tracked files name Debian's: /usr/sbin,
# /usr/libexec, /etc/slurm-k8s).
EXTRA_DIST += \
	etc/slurm-k8s-agent.service \
	etc/slurm-k8s-token-renew.service \
	etc/slurm-k8s-token-renew.timer
systemdsystemunit_DATA = \
	etc/systemd/slurm-k8s-agent.service \
	etc/systemd/slurm-k8s-token-renew.service \
	etc/systemd/slurm-k8s-token-renew.timer
CLEANFILES += $(systemdsystemunit_DATA)
sk_edit_unit = $(MKDIR_P) etc/systemd && sed \
	-e 's|/usr/sbin/|$(sbindir)/|g' \
	-e 's|/usr/libexec/|$(libexecdir)/|g' \
	-e 's|/etc/slurm-k8s|$(sysconfdir)/slurm-k8s|g' \
	-e 's|/usr/share/doc/slurm-k8s|$(docdir)|g'
etc/systemd/slurm-k8s-agent.service: $(top_srcdir)/etc/slurm-k8s-agent.service Makefile
	$(AM_V_GEN)$(sk_edit_unit) $(top_srcdir)/etc/slurm-k8s-agent.service >$@
etc/systemd/slurm-k8s-token-renew.service: $(top_srcdir)/etc/slurm-k8s-token-renew.service Makefile
	$(AM_V_GEN)$(sk_edit_unit) $(top_srcdir)/etc/slurm-k8s-token-renew.service >$@
etc/systemd/slurm-k8s-token-renew.timer: $(top_srcdir)/etc/slurm-k8s-token-renew.timer Makefile
	$(AM_V_GEN)$(sk_edit_unit) $(top_srcdir)/etc/slurm-k8s-token-renew.timer >$@

# The token renewal the agent's unit files name (etc/slurm-k8s-token-renew.service).
slurmk8slibexecdir = $(libexecdir)/slurm-k8s
dist_slurmk8slibexec_SCRIPTS = etc/slurm-k8s-token-renew

# The admin's generator of the impersonation RBAC (node_identity = impersonate).
dist_sbin_SCRIPTS = etc/slurm-k8s-impersonation-rbac
