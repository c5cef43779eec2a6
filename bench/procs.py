"""Process handling shared by the bench/run suites: a server's CPU time, starting a server that
prints "listening PORT", and stopping one."""
import os
import signal
import subprocess
import sys


def cpu_s(pid):
    """User + system CPU seconds of a running process (from /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_listening(cmd, cpus="0"):
    """Starts cmd pinned to cpus and waits for its "listening PORT" line: (process, port)."""
    p = subprocess.Popen(["taskset", "-c", cpus] + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line.startswith("listening"):
        p.kill()
        sys.exit(f"bench/run: {cmd[0]} did not start: {line!r} {p.stderr.read()}")
    return p, int(line.split()[1])


def stop(p):
    """SIGTERM, then SIGKILL if it has not exited within 10 s."""
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
