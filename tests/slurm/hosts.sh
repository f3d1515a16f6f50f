# shellcheck shell=bash
# hosts.sh -- test hosts that are hosts: each node of a cluster.sh cluster in
# a network namespace of its own, with an address that is not loopback.
# Sourced by lib.sh; defines variables and functions, starts nothing.
#
# With SK_NETNS=1 (cluster.sh and the scripts that use its cluster):
#   - the site: network namespace sk-<prefix>-site. munged, slurmctld, the
#     test scripts themselves and what they start (the test API server, a
#     registry, kubectl, sbatch) run there; its bridge skbr holds the site's
#     address SITE (<net>.1/24) and its loopback is its own;
#   - node X: network namespace sk-<prefix>X with one veth (eth0) on the
#     bridge and address <net>.(10+X), default route via SITE. Its slurmd,
#     and so its jobs, steps and the pods they run, live there.
#   <prefix> is SK_NODE_PREFIX (lib.sh: per cluster directory), so two
#   clusters never share a namespace; <net> is SK_NETNS_NET: 10.239.0 for
#   the default cluster directory, else 10.239.<1..250> from a hash of
#   SK_SLURM_DIR (each site is a network of its own, so two clusters may
#   even share the /24; it differs only so that logs tell them apart).
# Nothing is ever put on the host's own interfaces: the host reaches none of
# these addresses and they reach nothing of the host (loopback included).
# Processes join a namespace with nsenter --net only (`ip netns exec` would
# also remount /sys in a mount namespace of its own, hiding the cgroup file
# systems slurmd needs).
#
# Functions:
#   sk_netns_site / sk_netns_node X   the namespaces' names
#   sk_site_addr / sk_node_addr X     their addresses
#   sk_netns_up N                     makes the site and nodes 1..N (idempotent)
#   sk_netns_ours                     this cluster's namespaces that exist,
#                                     a name a line
#   sk_netns_down                     removes the nodes' and the site's
#                                     namespaces (refused while a process is
#                                     in a node's; prints what holds it)
#   sk_in_netns NAME CMD...           runs CMD in namespace NAME
#   sk_enter_site SCRIPT ARGS...      with SK_NETNS=1, outside the site: makes
#                                     it (sk_netns_up NUM_NODES) and re-runs
#                                     SCRIPT there (exec; never returns);
#                                     else returns at once
#   sk_in_site                        0 when this shell is in the site

SK_NETNS="${SK_NETNS:-0}"
if [ -z "${SK_NETNS_NET:-}" ]; then
  if [ "$SK_SLURM_DIR" = /tmp/slurm-k8s-test ]; then
    SK_NETNS_NET=10.239.0
  else
    SK_NETNS_NET="10.239.$(( 16#$(printf '%s' "$SK_SLURM_DIR" | md5sum | cut -c1-4) % 250 + 1 ))"
  fi
fi
SK_NETNS_RUN=/run/netns

sk_netns_site() { echo "sk-${SK_NODE_PREFIX}-site"; }
sk_netns_node() { echo "sk-${SK_NODE_PREFIX}$1"; }
sk_site_addr() { echo "$SK_NETNS_NET.1"; }
sk_node_addr() { echo "$SK_NETNS_NET.$((10 + $1))"; }

sk_in_netns() {
  local ns=$1; shift
  nsenter --net="$SK_NETNS_RUN/$ns" -- "$@"
}

# The inode of a network namespace: /proc/self/ns/net and a bound name agree
# when they are the same namespace.
sk_netns_ino() { stat -L -c %i "$1" 2>/dev/null; }

sk_in_site() {
  local site
  site="$(sk_netns_ino "$SK_NETNS_RUN/$(sk_netns_site)")" || return 1
  [ -n "$site" ] && [ "$site" = "$(sk_netns_ino /proc/self/ns/net)" ]
}

# _sk_netns_ensure NAME: the namespace NAME, made if missing.
_sk_netns_ensure() {
  [ -e "$SK_NETNS_RUN/$1" ] || ip netns add "$1"
}

sk_netns_up() {
  local n=$1 site i node veth
  site="$(sk_netns_site)"
  if ! [ "$n" -ge 1 ] || ! [ "$n" -le 200 ]; then
    sk_log "sk_netns_up: 1 to 200 nodes, not '$n'"
    return 1
  fi
  if [ ! -e "$SK_NETNS_RUN/$site" ] && ip link show skbr >/dev/null 2>&1 \
      && ip -br addr show skbr 2>/dev/null | grep -qF " $(sk_site_addr)/24"; then
    # Our own namespace is a site whose name a `cluster.sh stop` removed
    # while this script still ran in it: named again, not made anew (the
    # script could not reach a new one).
    ip netns attach "$site" $$ || return 1
  fi
  _sk_netns_ensure "$site" || return 1
  ip -n "$site" link set lo up || return 1
  if ! ip -n "$site" link show skbr >/dev/null 2>&1; then
    ip -n "$site" link add skbr type bridge && ip -n "$site" link set skbr up \
      && ip -n "$site" addr add "$(sk_site_addr)/24" dev skbr || return 1
  fi
  for ((i = 1; i <= n; i++)); do
    node="$(sk_netns_node "$i")" veth="veth$i"
    _sk_netns_ensure "$node" || return 1
    ip -n "$node" link set lo up || return 1
    ip -n "$node" link show eth0 >/dev/null 2>&1 && continue
    # A veth of a node namespace removed by hand: its site end is gone too.
    ip -n "$site" link del "$veth" 2>/dev/null
    ip -n "$site" link add "$veth" type veth peer name eth0 netns "$node" \
      && ip -n "$site" link set "$veth" master skbr up \
      && ip -n "$node" addr add "$(sk_node_addr "$i")/24" dev eth0 \
      && ip -n "$node" link set eth0 up \
      && ip -n "$node" route add default via "$(sk_site_addr)" || return 1
  done
}

sk_netns_ours() {
  local ns prefix="sk-${SK_NODE_PREFIX}"
  for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }'); do
    # Ours: the site, and sk-<prefix><digits> (another cluster's prefix
    # differs in its letters, never only by digits: sk-n1 is ours, sk-nbmb1
    # another's).
    if [ "$ns" = "$(sk_netns_site)" ] || [[ $ns =~ ^${prefix}[0-9]+$ ]]; then echo "$ns"; fi
  done
}

sk_netns_down() {
  local ns pids rc=0
  for ns in $(sk_netns_ours); do
    pids="$(ip netns pids "$ns" 2>/dev/null | paste -sd' ')"
    if [ -n "$pids" ] && [ "$ns" != "$(sk_netns_site)" ]; then
      sk_log "network namespace $ns still holds processes: $pids"
      rc=1
      continue
    fi
    # The site may still hold the script that runs this (and the scripts
    # that called it): without its name it ends with the last of them.
    ip netns del "$ns" || rc=1
  done
  return "$rc"
}

sk_enter_site() {
  [ "$SK_NETNS" = 1 ] || return 0
  sk_in_site && return 0
  [ "$(id -u)" = 0 ] || { sk_log "SK_NETNS=1 needs root (it makes network namespaces)"; exit 1; }
  sk_netns_up "${NUM_NODES:-3}" || { sk_log "could not make the test hosts' network namespaces"; exit 1; }
  local script=$1; shift
  exec nsenter --net="$SK_NETNS_RUN/$(sk_netns_site)" -- bash "$script" "$@"
}
