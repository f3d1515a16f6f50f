"""kubetest - a Kubernetes API *test double* (NOT a Kubernetes API server).
Python 3 standard library only.  It imitates the parts of a kube-apiserver v1.28
(plus the node-lifecycle controller, the pod garbage collector for Leases and a
tiny scheduler) that slurm-k8s' node agent and SPANK plugin talk to.  Behaviours
follow facts read off a real kube-apiserver 1.28 cluster; see tests/kube/README.md for usage and known differences.

Usage (tests/kube/kube_test_server.py is the entry point; main.py has the options):
  kube_test_server.py --listen 127.0.0.1:0 --state-dir DIR [options]
  (writes DIR/ready containing the URL once it listens; SIGTERM stops it)

Modules, lowest layer first (each imports only from those before it): util (log, version, time
formats, quantities), errors, resources, objects, selectors, patch, store (objects,
resourceVersions, watch history), validation, auth, tokens (TokenRequest, ServiceAccount token
authentication), tables, api (the verbs on the store),
node_lifecycle and scheduler (the controllers), discovery, tls (certificates), server (HTTP(S)
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
                     {"mode":"none"}                 clear (also DELETE /_test/fault)
  GET  /_test/fault                     current fault
  POST /_test/history {"size":N}        watch history size per resource type (trims now)
  POST /_test/watches/close [{"abrupt":true}]  end every open watch (abrupt: drop the TCP connection)
  GET/POST /_test/controllers {"scheduler":bool,"nodeLifecycle":bool,"leaseGrace":s,
                                "monitorPeriod":s,"taintRemovalDelay":s,"fullDisruption":bool,
                                "bookmarkInterval":s,"nodeProxyGlobalOnly":bool,
                                "minTokenExpiration":s,"tokenExpiryLeeway":s}
  POST /_test/rbac {"subject":"user:NAME"|"group:NAME","role":"admin"|"agent"|"none"|[rules]}
"""
