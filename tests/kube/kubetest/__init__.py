"""kubetest - a Kubernetes API *test double* (NOT a Kubernetes API server).
Python 3 standard library only (plus the openssl CLI).  It imitates the parts of a kube-apiserver v1.28
(plus the node-lifecycle controller, the pod garbage collector for Leases, a
tiny scheduler, the workload controllers and the CSR approving and signing controllers) that
slurm-k8s' node agent and SPANK plugin talk to.  Behaviours
follow facts read off a real kube-apiserver 1.28 cluster; see tests/kube/README.md for usage and known differences.

Usage (tests/kube/kube_test_server.py is the entry point; main.py has the options):
  kube_test_server.py --listen 127.0.0.1:0 --state-dir DIR [options]
  (writes DIR/ready containing the URL once it listens; SIGTERM stops it)

Modules, lowest layer first (each imports only from those before it): util (log, version, time
formats, quantities), errors, resources, objects, selectors, patch, store (objects,
resourceVersions, watch history), validation, csr (the CertificateSigningRequest API: parsing,
strategies, validation), auth (tokens, RBAC, the authorizer chain), node_authorizer (the Node
authorizer and NodeRestriction), tokens (TokenRequest, ServiceAccount token
authentication), tables, api (the verbs on the store, admission),
node_lifecycle, scheduler and workloads (the controllers), discovery, tls (certificates, CSR signing),
certificates (the csrapproving and csrsigning controllers), server (HTTP(S)
server, request log, refuse fault), kubelet (the kubelet endpoint of a node: address, TLS dial,
Go-worded dial errors), the handler's mixins resource_handler, watch, pod_log, streaming (exec,
attach, portforward, nodes/proxy), metrics (the metrics.k8s.io API from kubelet scrapes), reviews
(TokenReview, SubjectAccessReview and the self reviews) and controls (the /_test endpoints and faults), handler (plumbing, authentication, routing), main
(command line, state dir).

Test controls (NOT part of the Kubernetes API; admin identity required):
  GET  /_test/info                      {"double":true, options...}; tests detect the double with it
  GET  /_test/requests[?since=SEQ]      request log: seq, time, method, path, query, status, user,
                                        contentType, accept, client, template
  GET  /_test/counters                  {"byUser":{user:{"METHOD template STATUS":n}},
                                         "byClient":{ip:{...}}, "total":n}
  POST /_test/reset                     clear request log and counters
  POST /_test/fault  {"mode":"refuse","seconds":S}   close the listening socket (connections are
                                        refused) and drop every open connection, for S seconds
                                        (default 5; SIGUSR1 or the timer clears it)
                     {"mode":"status","code":503}   every API request (not /_test) answers CODE
                     {"mode":"delay","ms":500}       every API request is delayed
                     status and delay also take "users":[NAME or PREFIX*] (only their requests),
                     "ratio":R (that share of them, at random) and, for 429/503,
                     "retryAfter":S (the Retry-After header, default 1; 0 = none)
                     {"mode":"none"}                 clear (also DELETE /_test/fault)
  GET  /_test/fault                     current fault
  POST /_test/history {"size":N}        watch history size per resource type (trims now)
  POST /_test/watches/close [{"abrupt":true}]  end every open watch (abrupt: drop the TCP connection)
  GET/POST /_test/controllers {"scheduler":bool,"nodeLifecycle":bool,"leaseGrace":s,
                                "monitorPeriod":s,"taintRemovalDelay":s,"fullDisruption":bool,
                                "bookmarkInterval":s,"nodeProxyGlobalOnly":bool,
                                "minTokenExpiration":s,"tokenExpiryLeeway":s,
                                "clusterSigningDuration":s (or "30s", "8760h"),
                                "csrApproving":bool,"csrSigning":bool,
                                "nodeAuthorizerLag":s (a binding reaches the Node authorizer
                                and NodeRestriction s seconds after its write)}
  POST /_test/rbac {"subject":"user:NAME"|"group:NAME","role":ROLE|[rules]|[ROLE|rule,...]}
                                (also "roles"; ROLE: admin, agent, none, node-bootstrapper,
                                nodeclient, selfnodeclient; rules {apiGroups,resources,verbs,
                                namespaces?,resourceNames?}; replaces the subject's binding)
  POST /_test/tokens {"token":T,"user":U,"uid":UID,"groups":[...]}   add a bearer token
"""
