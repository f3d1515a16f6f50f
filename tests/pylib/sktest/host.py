"""The local host as the tests see it: free TCP ports and processes (alive, found by a marker
in their command line or environment, RSS and CPU time from /proc), certificate files."""
import os
import socket
import ssl
import subprocess

CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def alive(pid):
    """Whether pid is a live process: a zombie is gone for our purposes."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return open(f"/proc/{pid}/stat").read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def marked_procs(marker, by_env=False, zombies=False):
    """pids whose command line (or, by_env, environment) carries `marker`; zombies only when
    asked for."""
    out = []
    m = marker.encode()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            hit = m in open(f"/proc/{d}/cmdline", "rb").read()
            if not hit and by_env:
                hit = m in open(f"/proc/{d}/environ", "rb").read()
            if hit and (zombies or alive(int(d))):
                out.append(int(d))
        except OSError:
            pass
    return out


def proc_cpu_s(pid):
    """utime + stime of a live process, seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_rss_kib(pid):
    """VmRSS of a live process in KiB (0 for a process without one, a zombie)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def not_after(pem_path):
    """The end of the first certificate in a PEM file (unix s), read by openssl; 0 when none."""
    out = subprocess.run(["openssl", "x509", "-noout", "-enddate", "-in", pem_path],
                         capture_output=True, text=True).stdout.strip()
    return ssl.cert_time_to_seconds(out.split("=", 1)[1]) if "=" in out else 0
