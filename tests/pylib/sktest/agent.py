"""slurm-k8s-agent for the tests and benchmarks: its config file, starting it until its unix
socket answers, and one request on that socket (newline-delimited JSON {v, id, op, body})."""
import json
import socket
import subprocess
import time


def write_agent_conf(path, settings):
    """Writes `settings` ({key: value}, in order) as the agent's `key = value` config file."""
    with open(path, "w") as f:
        for k, v in settings.items():
            f.write(f"{k} = {v}\n")


def start_agent(argv, sock, log_path, timeout):
    """Starts the agent (`argv`: wrapper, program, options; output appended to log_path) and
    waits until `sock` accepts a connection: a socket file left by a killed agent may exist, so
    only an answer counts. RuntimeError when the agent exits or does not answer in `timeout` s."""
    proc = subprocess.Popen(argv, stdout=open(log_path, "a"), stderr=subprocess.STDOUT)
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError("agent exited at start; see " + log_path)
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(sock)
            s.close()
            return proc
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("agent did not open its socket; see " + log_path)


def agent_call(sock_path, op, body, timeout=30):
    """One request on the agent socket (newline-delimited JSON); the reply as
    a dict, or None when the agent closed the connection without one."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(sock_path)
    s.sendall((json.dumps({"v": 1, "id": 1, "op": op, "body": body}) + "\n").encode())
    buf = b""
    while not buf.endswith(b"\n"):
        d = s.recv(65536)
        if not d:
            break
        buf += d
    s.close()
    return json.loads(buf) if buf else None
