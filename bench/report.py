#!/usr/bin/python3
"""Prints the side-by-side table (Markdown) from a bench results file.

usage: report.py RESULTS.json
Columns: what was measured, our number, the target (docs/benchmarks.md,
"Result", lists them), the reference that applies (a real kubelet v1.28 +
containerd on this kind of machine, figures kept here; the Kubernetes
pod-startup SLO; the same Slurm job without the plugin), and whether the
target is met. "-" = not measured in this run.
"""
import json
import sys


def g(d, *path):
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return None
        d = d[p]
    return d


def ms(x):
    return "-" if x is None else ("%.0f ms" % x if abs(x) >= 100 else "%.1f ms" % x)


def verdict(ok):
    return "-" if ok is None else ("yes" if ok else "**no**")


def rows(b):
    out = []
    s = b.get("slurm_start", {})
    off = g(s, "off", "p50")
    for k, label in (("on", "plugin loaded, job without --k8s flags"),
                     ("on+k8s", "job with --k8s-gpus=2 (prolog registers, extern step starts the shim)")):
        o = g(s, k + "_overhead")
        nodes = g(s, "nodes_per_job") or 1
        if o:
            val = "%s p50 (%s p99), x%.2f; %d jobs, %d node(s)/job" % (
                ms(o["p50_diff_ms"]), ms(o["p99_diff_ms"]), o["p50_ratio"], g(s, k, "n"), nodes)
            ok = o["p50_diff_per_node_ms"] < 10
        else:
            val, ok = "-", None
        out.append(("job start overhead (sbatch -> script runs), " + label, val, "< 10 ms per node",
                    "same job without the plugin: %s p50, %s p99" % (ms(off), ms(g(s, "off", "p99"))),
                    verdict(ok)))
    run = g(s, "pod_running")
    if run and run.get("n") and off:
        out.append(("sbatch -> a rollout pod created beforehand Running on the job's node "
                    "(bound %s p50)" % ms(g(s, "pod_bound", "p50")),
                    "%s p50 (%s p99); %d jobs" % (ms(run["p50"]), ms(run["p99"]), run["n"]),
                    "< sbatch -> RUNNING without the plugin + 50 ms",
                    "same job without the plugin, sbatch -> script runs: %s p50" % ms(off),
                    verdict(run["p50"] < off + 50)))
    rl = b.get("online_rl", {})
    if rl.get("processes") and rl.get("allocation"):
        p, a = rl["processes"], rl["allocation"]
        out.append(("online-RL loop (examples/online-rl: 3 trainer ranks, 3 rollouts, 1 reward "
                    "model, %d steps, %d runs each), steps/s" % (rl["steps"], rl["rounds"]),
                    "%.1f steps/s in the allocation (x%.2f)" % (a["steps_per_s"],
                                                               rl["steps_per_s_ratio"]),
                    "x >= 0.9 of plain processes",
                    "the same loop as plain processes: %.1f steps/s" % p["steps_per_s"],
                    verdict(rl["steps_per_s_ratio"] >= 0.9)))
        out.append(("online-RL loop, weight sync per step (rank 0 -> every rollout)",
                    "%s p50, %s p99 in the allocation" % (ms(a["weight_sync_ms_p50"]),
                                                          ms(a["weight_sync_ms_p99"])),
                    "<= plain processes + 5 ms",
                    "plain processes: %s p50, %s p99" % (ms(p["weight_sync_ms_p50"]),
                                                         ms(p["weight_sync_ms_p99"])),
                    verdict(a["weight_sync_ms_p50"] <= p["weight_sync_ms_p50"] + 5)))
    life = b.get("lifecycle", {})
    for rt, name in (("fake", "fake runtime"), ("shim", "process runtime (shim)")):
        r = g(life, rt, "register_ready")
        if r and r.get("n"):
            out.append(("register (prolog) -> Node Ready in the API server, " + name,
                        "p50 %s, p99 %s (n=%d)" % (ms(r["p50"]), ms(r["p99"]), r["n"]),
                        "p50 < 50 ms, p99 < 100 ms", "kubelet start -> Node Ready 430 ms",
                        verdict(r["p50"] < 50 and r["p99"] < 100)))
    for rt, name, tgt in (("shim", "process runtime (shim)", True), ("fake", "fake runtime (comparison)", False)):
        r = g(life, rt, "pod_running")
        if r and r.get("n"):
            out.append(("pod bound -> Running in the API server, " + name,
                        "p50 %s, p99 %s (n=%d)" % (ms(r["p50"]), ms(r["p99"]), r["n"]),
                        "p50 < 50 ms, p99 < 200 ms" if tgt else "(no target)",
                        "kubelet create -> Running 880 ms median (610-1650); "
                        "Kubernetes SLO: p99 < 5 s (image pull excluded)",
                        verdict(r["p50"] < 50 and r["p99"] < 200) if tgt else "-"))
    mo = b.get("mounts", {})
    if g(mo, "mounts", "n") and g(mo, "no_mounts", "n"):
        out.append(("container start through the exec helper with %d volumeMounts (its own user "
                    "and mount namespaces, the volumes bound at their mountPaths), spawn -> exit "
                    "of `true`" % mo["volume_mounts"],
                    "p50 %s, p99 %s (n=%d); +%s p50" % (ms(mo["mounts"]["p50"]),
                                                        ms(mo["mounts"]["p99"]), mo["mounts"]["n"],
                                                        ms(mo["p50_diff_ms"])),
                    "(no target)",
                    "the same helper without mounts: p50 %s, p99 %s" % (
                        ms(mo["no_mounts"]["p50"]), ms(mo["no_mounts"]["p99"])), "-"))
    im = b.get("images", {})
    for v, name in (("present", "image already in the job's storage"),
                    ("pulled", "image pulled from a registry on loopback")):
        r, p = g(im, v, "running"), g(im, "process", "running")
        o, po = g(im, v, "output"), g(im, "process", "output")
        if r and r.get("n") and p and p.get("n") and o and po:
            out.append(("pod bound -> Running in the API server, podman runtime, " + name,
                        "p50 %s, p99 %s (n=%d); its command's first output p50 %s" % (
                            ms(r["p50"]), ms(r["p99"]), r["n"], ms(o["p50"])),
                        "(no target)",
                        "the same pod as a process, same run: Running p50 %s, output p50 %s; "
                        "kubelet create -> Running 880 ms median" % (ms(p["p50"]), ms(po["p50"])),
                        "-"))
    st = b.get("image_store", {})
    f, c, s2, ca = (g(st, k, "output") for k in ("first", "cached", "second", "cached_first_job"))
    if f and f.get("n") and c and c.get("n") and s2 and s2.get("n"):
        gb = "%.2f GB" % (st["image_bytes"] / 1e9)
        out.append(("pod from a %s image (%d blobs), the node's image store empty: its first job "
                    "(the store pulls it from a registry on loopback, as its own user)"
                    % (gb, st["image_blobs"]),
                    "output p50 %s (Running p50 %s, n=%d); store pull %s MB/s (image bytes over "
                    "first - cached), %s MB/s by the agent's log" % (
                        ms(f["p50"]), ms(g(st, "first", "running", "p50")), f["n"],
                        st.get("store_pull_mb_s"), st.get("store_pull_log_mb_s")),
                    "(no target)",
                    "without a store, every job: `podman pull` as the job's user into its own "
                    "storage %s p50 (%s MB/s); the registry serves the blobs at %s MB/s (curl "
                    "to /dev/null)" % (ms(g(st, "plain_pull", "p50")), st.get("plain_pull_mb_s"),
                                       st.get("registry_mb_s")), "-"))
        pct = st.get("second_vs_cached_pct")
        gets = st.get("registry_blob_requests_in_second_jobs")
        sa = g(st, "second_at_attach", "output")
        pa = st.get("second_at_attach_vs_cached_pct")
        out.append(("... a second job's first pod from it (job A ended; the image in the node's "
                    "store), created %s s after the job's shim attached" % st.get("settle_s"),
                    "output p50 %s (Running p50 %s, n=%d), %s %% over a cached start; registry "
                    "blob requests %s; created the moment the shim attached: output p50 %s, %s %%"
                    " (the job's podman set-up, once per job, not yet done)" % (
                        ms(s2["p50"]), ms(g(st, "second", "running", "p50")), s2["n"],
                        "%+.1f" % pct if pct is not None else "?", gets,
                        ms(sa["p50"]) if sa and sa.get("n") else "-",
                        "%+.1f" % pa if pa is not None else "?"),
                    "no pull; within 10 % of a cached start",
                    "cached start (the job's second pod of the image): output p50 %s, Running "
                    "p50 %s; in job A: output p50 %s" % (
                        ms(c["p50"]), ms(g(st, "cached", "running", "p50")),
                        ms(ca["p50"]) if ca and ca.get("n") else "-"),
                    verdict(gets == 0 and pct is not None and pct <= 10)))
    r = g(life, "shim", "pod_delete_gone")
    if r and r.get("n"):
        out.append(("pod DELETE (process exits on SIGTERM) -> gone, process runtime",
                    "p50 %s, p99 %s (n=%d)" % (ms(r["p50"]), ms(r["p99"]), r["n"]),
                    "< 100 ms", "kubelet delete -> gone 980 ms", verdict(r["p99"] < 100)))
    grace = g(life, "grace_s")
    for rt, name in (("shim", "process runtime"), ("fake", "fake runtime")):
        r = g(life, rt, "deregister_all_gone")
        if r and r.get("n"):
            out.append(("job end (deregister, grace %ss) -> pods stopped, Node and Lease deleted, %s"
                        % (grace, name),
                        "p50 %s, p99 %s (n=%d); pods exit on SIGTERM, so no grace is used"
                        % (ms(r["p50"]), ms(r["p99"]), r["n"]),
                        "grace + < 500 ms", "-", verdict(r["p99"] < 500)))
    st = b.get("steady", {})
    if st:
        rate = st.get("req_per_node_per_s")
        out.append(("steady-state API requests per virtual node (%d nodes x %d pods, %.0f s)"
                    % (st["nodes"], st["pods_per_node"], st["window_s"]),
                    "%.3f req/s" % rate if rate is not None else
                    "not counted: %s" % st.get("requests_absent", "no count"), "<= 0.1 req/s",
                    "kubelet: 0.21 req/s measured idle (Lease every 10 s = 0.1 req/s, plus "
                    "status every 5 min, plus its own watches/lists)",
                    verdict(rate <= 0.1 + 1e-9) if rate is not None else "-"))
    res = b.get("resources", {})
    if res:
        n, p = res["nodes"], res["pods_per_node"]
        kubelet = n * (80 + 48) + n * p * 13
        total_pss = (res["agent_pss_kib"] + res["shims_pss_kib"]) / 1024
        pn = res.get("per_node")
        if pn:
            out.append(("agent + shim memory, %d nodes x %d pods, per compute node (an agent "
                        "serves its own host: each node of a %d-node job holds one agent and the "
                        "job's shim with %d pods)" % (n, p, n, p),
                        "RSS: agent %.1f MiB + shim %.1f MiB = %.1f MiB (%.1f MB); PSS %.1f MiB"
                        % (pn["agent_rss_kib"] / 1024, pn["shims_rss_kib"] / 1024,
                           pn["total_rss_mib"], pn["total_rss_mib"] * 1.048576,
                           (pn["agent_pss_kib"] + pn["shims_pss_kib"]) / 1024),
                        "< 20 MB RSS", "kubelet 80 MiB + containerd 48 MiB + 13 MiB per pod = "
                        "%d MiB per node" % (80 + 48 + 13 * p),
                        verdict(pn["total_rss_mib"] * 1.048576 < 20)))
        out.append(("agent + shim memory, %d nodes x %d pods all on one agent (%d jobs on one "
                    "host: one agent, %d shims)" % (n, p, n, n),
                    "RSS: agent %.1f MiB + shims %.1f MiB (max %.1f each) = %.1f MiB; "
                    "PSS (shared pages split): %.1f MiB"
                    % (res["agent_rss_kib"] / 1024, res["shims_rss_kib"] / 1024,
                       res["shim_rss_kib_max"] / 1024, res["total_rss_mib"], total_pss),
                    "< 20 MB RSS",
                    "kubelet 80 MiB + containerd 48 MiB per node + 13 MiB per pod = %d MiB for "
                    "%d nodes x %d pods" % (kubelet, n, p),
                    verdict(res["total_rss_mib"] * 1.048576 < 20)))
        fl = res.get("floor")
        if fl:
            out.append(("memory floor of one shim-like process (bench/rss_floor: libstdc++, "
                        "jsoncpp, libuv, libc; parses one JSON document, idle)",
                        "RSS %.1f MiB, PSS %.1f MiB; x %d processes = %.1f MiB RSS"
                        % (fl["rss_kib"] / 1024, fl["pss_kib"] / 1024, n,
                           n * fl["rss_kib"] / 1024),
                        "(reference)", "-", "-"))
        out.append(("CPU time (agent + shims) per pod start",
                    "%.2f ms (%d pods Running after %.2f s); idle afterwards %.2f %% of a core"
                    % (res["cpu_ms_per_pod_start"], res["pods"], res["all_running_s"],
                       res["idle_cpu_percent"]), "(no target)", "-", "-"))
    cg = b.get("cgroups")
    if cg:
        out.append(("a pod's own cgroups at its start (%s: dirs, deny rules, limits, the move; "
                    "bench/pod_cgroup_cost, n=%d)" % (", ".join(cg["hierarchies"]), cg["n"]),
                    "p50 %.2f ms, p99 %.2f ms" % (cg["start_us"]["p50"] / 1000, cg["start_us"]["p99"] / 1000),
                    "(no target)", "a process start without them: 0 ms", "-"))
        out.append(("... and at its end (kill, reap, rmdir), next to the same kill and reap without",
                    "p50 %.2f ms, p99 %.2f ms; without: p50 %.2f ms, p99 %.2f ms"
                    % (cg["end_us"]["p50"] / 1000, cg["end_us"]["p99"] / 1000,
                       cg["baseline_us"]["p50"] / 1000, cg["baseline_us"]["p99"] / 1000),
                    "(no target)", "-", "-"))
    pn = b.get("pod_network")
    if pn:
        d = pn["mtu_1500"]
        pct_ms = lambda x: "p50 %.1f ms, p99 %.1f ms" % (x["p50"] / 1000, x["p99"] / 1000)  # noqa: E731
        out.append(("a pod's own network at its start (the shim's sandbox + the agent's checks, "
                    "held namespaces, bridge + host-local ADD; bench/pod_network_cost, n=%d)"
                    % d["n"], pct_ms(d["start_us"]), "<= 20 ms p50",
                    "a pod on the node's network: 0 ms (of it the sandbox: %s)"
                    % pct_ms(d["sandbox_us"]), "ok" if d["start_us"]["p50"] <= 20000 else "MISSED"))
        out.append(("... and at its end (DEL, the namespaces let go)", pct_ms(d["end_us"]),
                    "(no target)", "-", "-"))
        for key, label in (("mtu_1500", "MTU 1500"), ("mtu_65520", "pod_network_mtu = 65520")):
            if key not in pn:
                continue
            p = pn[key]["push_mib_s"]
            out.append(("weight push host -> pod, 2 GiB over one TCP connection (%s)" % label,
                        "%d MiB/s = %.0f %% of the host network's" % (p["pod"], 100.0 * p["pod"] / p["host"]),
                        ">= 90 %", "host network (loopback): %d MiB/s" % p["host"],
                        "ok" if p["pod"] >= 0.9 * p["host"] else "MISSED"))
    v2 = b.get("cgroup_v2")
    if v2:
        for side, label in (("v1", "this host, cgroup v1"), ("v2", "QEMU guest (TCG), cgroup v2")):
            c = g(v2, side, "cgroups")
            if c:
                out.append(("%s: a pod's own cgroup at its start / end (%s; n=%d)"
                            % (label, ", ".join(c["hierarchies"]), c["n"]),
                            "start p50 %.2f ms, p99 %.2f ms; end p50 %.2f ms"
                            % (c["start_us"]["p50"] / 1000, c["start_us"]["p99"] / 1000,
                               c["end_us"]["p50"] / 1000),
                            "(no target)", "kill and reap without: p50 %.2f ms"
                            % (c["baseline_us"]["p50"] / 1000), "-"))
            s2 = g(v2, side, "slurm_start") or {}
            off = g(s2, "off", "p50")
            o = g(s2, "on+k8s_overhead")
            if o and off:
                out.append(("%s: job start overhead of a --k8s-gpus job (sbatch -> script runs)"
                            % label,
                            "%s p50, x%.2f; %d jobs" % (ms(o["p50_diff_ms"]), o["p50_ratio"],
                                                        g(s2, "on+k8s", "n")),
                            "(no target)", "without the plugin: %s p50" % ms(off), "-"))
    sc = b.get("scale", {})
    for n in sorted((k for k in sc if k.isdigit()), key=int):
        r = sc[n]
        t = r.get("all_ready_s")
        if r.get("agent_requests") is not None:
            reqs = "%d agent requests (%.1f/node) at %.0f req/s" % (
                r["agent_requests"], r["requests_per_node"], r["req_per_s"])
        else:
            reqs = "agent requests not counted (%s)" % r.get("requests_absent", "-")
        cpu = r.get("api_server_cpu_percent")
        out.append(("%s virtual nodes registering at once (one agent, %d parallel calls)"
                    % (n, r["concurrency"]),
                    "all Ready %s; %s; API server latency p99 %s; agent %.1f ms CPU/node, RSS "
                    "%.0f MiB; %s; %s"
                    % ("%.2f s" % t if t is not None else "NOT all (%d)" % r["ready"],
                       reqs, ms(g(r, "server_latency", "p99")), r["agent_cpu_ms_per_node"],
                       r["agent_rss_kib"] / 1024,
                       "test API server CPU %s%%" % cpu if cpu is not None
                       else "API server CPU not measured (not on this machine)",
                       connections(r)),
                    "1000: all Ready < 10 s, API server not overloaded" if n == "1000" else "-",
                    "-",
                    verdict(t is not None and t < 10) if n == "1000" else "-"))
    return out


def connections(r):
    """The agent's connections after a scale burst, and its HTTP/2 run's (bench_scale.py)."""
    out = "%s agent connections (%s)" % (r.get("agent_connections", "?"),
                                         r.get("transport", "as the server speaks"))
    h2 = r.get("http2")
    if h2:
        t = h2.get("all_ready_s")
        out += "; over HTTP/2 (nghttpx in front, 100 streams per connection): all Ready %s, " \
               "%s agent connections, RSS %.0f MiB" % (
                   "%.2f s" % t if t is not None else "NOT all (%d)" % h2["ready"],
                   h2.get("agent_connections", "?"), h2["agent_rss_kib"] / 1024)
    ni = r.get("node_identities")
    if ni:
        t = ni.get("all_ready_s")
        out += "; with node identities: all Ready %s, requests by identity %s" % (
            "%.2f s" % t if t is not None else "NOT all (%d)" % ni["ready"],
            ", ".join("%s %d" % kv for kv in sorted((ni.get("requests_by_identity") or {}).items())))
    return out


def api_lines(b):
    """Which API server each benchmark measured against (its results' "api")."""
    seen = {}
    for name in sorted(b):
        a = b[name].get("api") if isinstance(b[name], dict) else None
        if not a:
            continue
        if a.get("kind") == "cluster":
            desc = ("a cluster: %s (%s) as %s, agent as %s; request counts %s"
                    % (a.get("server"), a.get("version"), a.get("user") or "?",
                       a.get("agent_user") or "?",
                       "from its audit log" if a.get("audit_log") else
                       "not taken (no audit log)"))
        else:
            desc = "the test double (tests/kube, %s)" % a.get("version")
        seen.setdefault(desc, []).append(name)
    return ["API server: %s [%s]" % (d, ", ".join(n)) for d, n in seen.items()]


def main():
    with open(sys.argv[1]) as f:
        res = json.load(f)
    m = res.get("machine", {})
    print("Machine: %s CPUs (%s), %s RAM, kernel %s; load average at start %s"
          % (m.get("nproc"), m.get("cpu_model"), m.get("mem_total"), m.get("kernel"),
             " ".join(m.get("loadavg_at_start", []))))
    for line in api_lines(res.get("benchmarks", {})):
        print(line)
    if res.get("command"):
        print("Command: `%s`" % res["command"])
    print()
    print("| what | measured | target | reference (which) | target met |")
    print("|---|---|---|---|---|")
    for r in rows(res.get("benchmarks", {})):
        print("| " + " | ".join(str(c).replace("|", "/") for c in r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
