#!/usr/bin/python3
"""Component test: the agent's credential as real clusters hand it out (agent/kube/api_auth.h).

The real agent (fake runtime) against the test API server, authenticated as the ServiceAccount
kube-system/slurm-k8s-agent with tokens from the TokenRequest API (what `kubectl create token`
gives; the server is started with short token lifetimes and no leeway):
- a token file rewritten before the old token expires: the agent uses the new one, no restart;
- a token that expires with nothing new in the file: one ERROR line that says what to do, the
  metric at 0, the `list` reply's (so `slurm-k8s status`'s) api state "refused" with the
  expiry; a new token written: accepted again, one INFO line, the Node Ready, pods run;
- a kubeconfig (current-context, inline certificate-authority-data, tls-server-name) whose user
  is an exec credential plugin asking the TokenRequest API for short tokens: run at start and
  again ahead of each expiry, never refused.
Prints `N passed, N failed`.
"""
import base64, json, os, re, shlex, shutil, sys, time, urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from sktest.env import NODE, REG, AgentEnv, phase, pod, suite_args  # noqa: E402
from sktest.host import free_port  # noqa: E402
from sktest.suite import check, run_suite, wait_for  # noqa: E402

SA_NS, SA_NAME = "kube-system", "slurm-k8s-agent"
SA_USER = "system:serviceaccount:%s:%s" % (SA_NS, SA_NAME)
TOKEN_URL = "/api/v1/namespaces/%s/serviceaccounts/%s/token" % (SA_NS, SA_NAME)

# The exec credential plugin: asks the TokenRequest API (as the admin) for a token of
# SECONDS and prints it as an ExecCredential with its expiry; counts its runs.
PLUGIN = r'''#!/usr/bin/python3
import json, os, ssl, sys, urllib.request
d = sys.argv[1]
n = int(open(d + "/plugin.count").read()) + 1 if os.path.exists(d + "/plugin.count") else 1
with open(d + "/plugin.count.tmp", "w") as f:  # renamed into place: the test reads it meanwhile
    f.write(str(n))
os.replace(d + "/plugin.count.tmp", d + "/plugin.count")
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
kd = d + "/kube"
req = urllib.request.Request(info["spec"]["cluster"]["server"] + "%s", method="POST",
                             data=json.dumps({"spec": {"expirationSeconds": int(os.environ["SECONDS_WANTED"])}}).encode())
req.add_header("Authorization", "Bearer " + open(kd + "/admin.token").read().strip())
req.add_header("Content-Type", "application/json")
ctx = ssl.create_default_context(cafile=kd + "/ca.crt")
tr = json.loads(urllib.request.urlopen(req, context=ctx, timeout=10).read())
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": tr["status"]["token"],
                             "expirationTimestamp": tr["status"]["expirationTimestamp"]}}))
''' % TOKEN_URL


class CredEnv(AgentEnv):
    def __init__(self, *a):
        super().__init__(*a)
        self.metrics_port = free_port()
        self.token_path = os.path.join(self.dir, "sa.token")

    def kube_args(self):
        return super().kube_args() + ["--min-token-expiration", "1", "--token-expiry-leeway", "0",
                                      "--role", "user:%s=agent" % SA_USER]

    def conf_settings(self):
        s = super().conf_settings()
        s["api_token_file"] = self.token_path
        s["metrics_port"] = self.metrics_port
        # An address the admin names (here another loopback address: metrics_address).
        s["metrics_address"] = "127.0.0.2"
        return s

    def write_conf(self):
        code, _ = self.api("POST", "/api/v1/namespaces/%s/serviceaccounts" % SA_NS, {"metadata": {"name": SA_NAME}})
        if code != 201:
            raise RuntimeError("cannot create the ServiceAccount: %d" % code)
        self.issue(600)
        super().write_conf()

    def issue(self, seconds):
        """A new token of `seconds` from the TokenRequest API, written to the token file as
        `kubectl create token > f.new; mv f.new f` would; returns its expiry (Unix s)."""
        code, tr = self.api("POST", TOKEN_URL, {"spec": {"expirationSeconds": seconds}})
        if code != 201:
            raise RuntimeError("TokenRequest: %d %s" % (code, tr))
        tok = tr["status"]["token"]
        with open(self.token_path + ".new", "w") as f:
            f.write(tok + "\n")
        os.rename(self.token_path + ".new", self.token_path)
        claims = json.loads(base64.urlsafe_b64decode(tok.split(".")[1] + "=="))
        return claims["exp"]

    def metric(self, name):
        m = urllib.request.urlopen("http://127.0.0.2:%d/metrics" % self.metrics_port, timeout=5).read().decode()
        r = re.search(r"^%s (\S+)$" % re.escape(name), m, re.M)
        return float(r.group(1)) if r else None

    def api_state(self):
        r = self.call("list", {})
        return (r or {}).get("body", {}).get("api", {})

    def log(self):
        return open(os.path.join(self.dir, "agent.log")).read()


def node_ready(env):
    code, n = env.api("GET", "/api/v1/nodes/" + NODE)
    conds = {c["type"]: c["status"] for c in n.get("status", {}).get("conditions", [])} if code == 200 else {}
    return conds.get("Ready") == "True"


def token_renew(env):
    import subprocess
    import yaml
    top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    kc = os.path.join(env.dir, "renew.kubeconfig")
    with open(kc, "w") as f:
        f.write("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                "    server: %s\n    certificate-authority: %s\nusers:\n- name: agent\n  user:\n"
                "    tokenFile: %s\ncontexts:\n- name: c\n  context: {cluster: c, user: agent}\n"
                "current-context: c\n" % (env.url, os.path.join(env.kdir, "ca.crt"), env.token_path))
    renew_env = dict(os.environ, SK_TOKEN_FILE=env.token_path, SK_KUBECONFIG=kc,
                     KUBECTL=shutil.which("kubectl") or "kubectl")
    script = os.path.join(top, "etc", "slurm-k8s-token-renew")
    before = open(env.token_path).read()
    r = subprocess.run(["sh", script], env=renew_env, capture_output=True, text=True, timeout=60)
    check("without the Role slurm-k8s-agent-token-renew the renewal is refused, the file untouched",
          r.returncode != 0 and "forbidden" in r.stderr.lower() and open(env.token_path).read() == before,
          (r.returncode, r.stderr[-300:]))
    rules = [dict(rule, namespaces=[d["metadata"]["namespace"]])
             for d in yaml.safe_load_all(open(os.path.join(top, "etc", "rbac.yaml")))
             if d and d["kind"] == "Role" and d["metadata"]["name"] == "slurm-k8s-agent-token-renew"
             for rule in d["rules"]]
    code, _ = env.api("POST", "/_test/rbac", {"subject": "user:" + SA_USER, "role": ["agent"] + rules})
    check("the double binds etc/rbac.yaml's Role slurm-k8s-agent-token-renew", code == 200 and rules, rules)
    reloads = env.metric("slurm_k8s_api_credential_reloads_total")
    r = subprocess.run(["sh", script], env=renew_env, capture_output=True, text=True, timeout=60)
    new = open(env.token_path).read()
    check("etc/slurm-k8s-token-renew renews the token with itself", r.returncode == 0 and new.strip()
          and new != before, (r.returncode, r.stdout, r.stderr[-300:]))
    check("... the agent takes the renewed token, accepted",
          wait_for(lambda: env.metric("slurm_k8s_api_credential_reloads_total") == reloads + 1
                   and env.api_state().get("state") == "ok", 10), env.api_state())
    env.api("POST", "/_test/rbac", {"subject": "user:" + SA_USER, "role": "agent"})


def run(env):
    open(os.path.join(env.dir, "alive_42"), "w").close()
    r = env.call("register", REG)
    check("register as the ServiceAccount's token", r and r.get("ok"), r)
    check("Node Ready", wait_for(lambda: node_ready(env), 10))
    # The server applies a request before the agent has read its answer (what marks the
    # credential accepted): the Node can be Ready a moment before the state says so.
    st = wait_for(lambda: (lambda s: s if s.get("state") == "ok" else None)(env.api_state()), 10) \
        or env.api_state()
    check("list: api credential accepted, from the token file, with the token's expiry",
          st.get("state") == "ok" and st.get("source") == "token file " + env.token_path
          and st.get("expires"), st)
    check("metric: accepted", env.metric("slurm_k8s_api_credential_accepted") == 1)
    try:
        urllib.request.urlopen("http://127.0.0.1:%d/metrics" % env.metrics_port, timeout=5)
        elsewhere = "answered"
    except OSError as e:
        elsewhere = str(e)
    check("/metrics on the metrics_address named (127.0.0.2), not on 127.0.0.1",
          "refused" in elsewhere.lower(), elsewhere)

    # 1. rotation before the expiry: the new token is used, no restart
    exp2 = env.issue(600)
    check("a rewritten token file is used (reload counted, its expiry shown)",
          wait_for(lambda: env.metric("slurm_k8s_api_credential_reloads_total") == 1
                   and env.metric("slurm_k8s_api_credential_expiry_timestamp_seconds") == exp2, 10),
          env.metric("slurm_k8s_api_credential_reloads_total"))
    check("log: the token file changed", "api_token_file %s changed: using the new token" % env.token_path
          in env.log())

    # 2. a token that expires, nothing new written: refused, said once, with the remedy
    exp3 = env.issue(3)
    wait_for(lambda: env.metric("slurm_k8s_api_credential_reloads_total") == 2, 10)
    st = wait_for(lambda: env.api_state().get("state") == "refused" and env.api_state(), 20)
    check("an expired token: list says refused, since when, that it expired and what to do",
          st and "401 Unauthorized with the credential from token file " + env.token_path in st.get("message", "")
          and ", which expired at " in st["message"] and "write a valid token to " + env.token_path in st["message"]
          and st.get("since"), st)
    check("metric: not accepted", env.metric("slurm_k8s_api_credential_accepted") == 0)
    check("expired at the token's exp", time.time() >= exp3)
    wait_for(lambda: False, 2)  # more 401s come (lease renewals each second): still one line
    check("one ERROR line for the refusal, not one per request",
          env.log().count("the API server refuses the agent's credential") == 1,
          env.log().count("the API server refuses the agent's credential"))

    # 3. a new token: accepted again at once, the node back to Ready, pods run
    env.issue(600)
    check("a new token: accepted again", wait_for(lambda: env.api_state().get("state") == "ok", 10), env.api_state())
    check("metric: accepted again", env.metric("slurm_k8s_api_credential_accepted") == 1)
    check("log: accepted again", "the API server accepts the agent's credential again" in env.log())
    check("the Node is Ready after the outage", wait_for(lambda: node_ready(env), 20))
    env.api("POST", "/api/v1/namespaces/default/pods", pod("after"))
    check("a pod runs after the outage", wait_for(lambda: phase(env, "default", "after") == "Running", 10))

    # 3b. the token renews itself: etc/slurm-k8s-token-renew (what its timer runs) with a
    # kubeconfig whose user reads the token file, under the Role etc/rbac.yaml gives
    token_renew(env)

    # 4. a kubeconfig with an exec credential plugin: short tokens, renewed ahead of expiry
    env.kill_agent()
    plugin = os.path.join(env.dir, "plugin.py")
    with open(plugin, "w") as f:
        f.write(PLUGIN)
    os.chmod(plugin, 0o700)
    ca = base64.b64encode(open(os.path.join(env.kdir, "ca.crt"), "rb").read()).decode()
    kc = os.path.join(env.dir, "agent.kubeconfig")
    with open(kc, "w") as f:
        f.write("""apiVersion: v1
kind: Config
current-context: agent
clusters:
- name: other
  cluster: {server: "https://192.0.2.1:6443"}
- name: test
  cluster:
    server: %s
    certificate-authority-data: %s
    tls-server-name: localhost
contexts:
- {name: wrong, context: {cluster: other, user: agent}}
- name: agent
  context: {cluster: test, user: agent}
users:
- name: agent
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./plugin.py
      args: [%s]
      env: [{name: SECONDS_WANTED, value: "63"}]
      provideClusterInfo: true
      interactiveMode: Never
""" % (env.url, ca, shlex.quote(env.dir)))
    s = env.conf_settings()
    for k in ("api_server", "api_ca_file", "api_token_file"):
        s.pop(k)
    s["kubeconfig"] = kc
    from sktest.agent import write_agent_conf
    write_agent_conf(env.conf, s)
    env.settings = s
    env.start_agent()
    check("kubeconfig + exec plugin: the agent starts and its Node is Ready",
          wait_for(lambda: node_ready(env), 20))
    st = env.api_state()
    check("list: the credential comes from the exec plugin",
          st.get("source") == "exec plugin " + plugin, st)
    # 63 s tokens are due 60 s ahead of their expiry, 3 s after each run; the plugin runs at
    # most once in 10 s: at start, then about every 10 s.
    runs = lambda: int(open(os.path.join(env.dir, "plugin.count")).read())  # noqa: E731
    check("the plugin runs again ahead of each expiry", wait_for(lambda: runs() >= 3, 30), runs())
    check("log: the renewals gave new credentials",
          wait_for(lambda: env.log().count("plugin.py: a new credential") >= 2, 15),
          env.log().count("plugin.py: a new credential"))
    check("renewed tokens are used and never refused",
          env.api_state().get("state") == "ok" and
          env.log().count("the API server refuses the agent's credential") == 1, env.api_state())
    env.api("POST", "/api/v1/namespaces/default/pods", pod("exec-cred"))
    check("a pod runs under the plugin's credential",
          wait_for(lambda: phase(env, "default", "exec-cred") == "Running", 10))


def main():
    a = suite_args()
    if not os.path.exists(a.server):
        print("test API server missing; skipping")
        return 77
    return run_suite(CredEnv(a.agent, a.server), run, ("agent.log", "kube.log"))


if __name__ == "__main__":
    sys.exit(main())
