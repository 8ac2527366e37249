#!/usr/bin/env python3
"""Benchmark: one container's network read (``ccc_netstats.container_usage``, what every GPU
exporter scrape and usage sample does per container) when the container holds many sockets.

Two sources of ``/proc/<pid>/net/tcp``:

* ``--fake N`` (default 100000): a crafted ``/proc/<pid>`` (FAKE of procfs, as tests/unit/
  test_netstats.py makes) whose ``net/tcp`` holds N lines in the kernel's format: listeners
  and established connections to other ports first, then 3 SSH sessions (the kernel lists
  listeners first, so sessions can come last);
* ``--real N``: a real process in its own network namespace (``unshare -n``, root) holding N
  TCP sockets on loopback (N/2 connected pairs through one listener); its ``/proc/<pid>`` is
  read as the exporter reads a container's.

Each run is a fresh Python process: prints the wall time of one read, the peak traced Python
memory (tracemalloc) and the process's max RSS growth, the SSH peers found and whether the read
was cut. ``--module DIR`` imports ``ccc_netstats`` from DIR (e.g. an older copy) instead.

    .venv/bin/python bench/netstats_sockets.py [--fake N | --real N] [--module DIR]

Smallest (the suite's smoke tests): ``--fake 1000`` and ``--real 20``, a second each.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent
CONTAINER_ID = "ab" * 32
PAIRS_PER_WORKER = 9000  # 18,000 descriptors: below the usual hard limit of 20,000
HEADER = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n")
LINE = ("{n:6d}: 0301E80A:{lport:04X} 0201E80A:{rport:04X} {state} 00000000:00000000 00:00000000 00000000"
        "     0        0 {inode} 1 0000000000000000 20 4 30 10 -1\n")


def fake_proc(root, count):
    """``root/<pid>`` with dev, route, cgroup and a net/tcp of ``count`` lines; returns the pid."""
    pid = 4242
    net = root / str(pid) / "net"
    net.mkdir(parents=True)
    (root / str(pid) / "cgroup").write_text(f"0::/system.slice/docker-{CONTAINER_ID}.scope\n")
    (net / "dev").write_text("Inter-| x\n face | x\n    lo: " + " ".join(["0"] * 16) + "\n")
    (net / "route").write_text("Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n")
    with open(net / "tcp", "w") as handle:
        handle.write(HEADER)
        for n in range(count - 3):
            state = "0A" if n % 2 else "01"
            handle.write(LINE.format(n=n, lport=1024 + n % 60000, rport=40000 + n % 20000, state=state, inode=n + 1))
        for n in range(count - 3, count):  # three SSH sessions, listed last
            handle.write(LINE.format(n=n, lport=22, rport=50000 + n % 1000, state="01", inode=n + 1))
    return pid


def real_sockets(count):
    """Processes in a new network namespace holding ``count`` TCP sockets on loopback: connected
    pairs, each worker (at most ``PAIRS_PER_WORKER``: the fd limit) to its own port, and 3 SSH
    sessions to port 22; returns (pid of one of them, the holder to stop)."""
    code = f"""
import os, socket, sys
os.system("ip link set lo up; sysctl -qw net.ipv4.ip_local_port_range='1024 60000'")

def hold(port, pairs):
    listener = socket.socket(); listener.bind(("127.0.0.1", port)); listener.listen(4096)
    held = []
    for _ in range(pairs):
        held.append(socket.create_connection(("127.0.0.1", port))); held.append(listener.accept()[0])
    return held

pairs, workers = ({count} - 6) // 2, []
for index in range(0, pairs, {PAIRS_PER_WORKER}):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            held = hold(61000 + index // {PAIRS_PER_WORKER}, min({PAIRS_PER_WORKER}, pairs - index))
            os.write(write, b"x")
            sys.stdin.read()
        finally:
            os._exit(0)
    os.close(write)
    workers.append(pid)
    if os.read(read, 1) != b"x":
        sys.exit("a worker could not make its sockets")
held = hold(22, 3)
print("ready", flush=True)
sys.stdin.read()
"""
    child = subprocess.Popen(["unshare", "-n", sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    if child.stdout.readline().strip() != "ready":
        child.kill()
        raise SystemExit("the socket holder did not start")
    return child.pid, child


def measure(proc_root, pid, module_dir):
    """One read in a fresh interpreter: wall s, tracemalloc peak, max RSS growth, peers, cut."""
    code = f"""
import json, resource, sys, time, tracemalloc
sys.path[:0] = [{str(module_dir)!r}, {str(REPO / "_utils")!r}]
import ccc_netstats
attrs = {{"Id": {CONTAINER_ID!r}, "Name": "/bench", "State": {{"Running": True, "Pid": {pid}, "StartedAt": "x"}},
         "NetworkSettings": {{"Networks": {{}}}}}}
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
started = time.perf_counter()
usage = ccc_netstats.container_usage(attrs, lambda: attrs, {str(proc_root)!r})
wall = time.perf_counter() - started
peak = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
print(json.dumps({{"wall_s": round(wall, 3), "traced_peak_mib": round(peak / 2**20, 1),
                  "rss_growth_mib": round((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024, 1),
                  "ssh_peers": len(usage["ssh_peers"]), "truncated": usage.get("ssh_peers_truncated")}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fake", type=int, default=100000)
    parser.add_argument("--real", type=int, default=0)
    parser.add_argument("--module", default=str(REPO / "_utils"))
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    if args.real:
        pid, child = real_sockets(args.real)
        try:
            with open(f"/proc/{pid}/net/tcp", "rb") as handle:
                lines = sum(1 for _ in handle) - 1
            print(f"real: {args.real} sockets, /proc/{pid}/net/tcp has {lines} lines:",
                  measure("/proc", pid, args.module))
        finally:
            child.stdin.close()
            child.wait(timeout=60)
        return
    with tempfile.TemporaryDirectory() as tmp:
        pid = fake_proc(pathlib.Path(tmp), args.fake)
        size = (pathlib.Path(tmp) / str(pid) / "net" / "tcp").stat().st_size
        print(f"fake: {args.fake} lines ({size / 2**20:.1f} MiB) in net/tcp:", measure(tmp, pid, args.module))


if __name__ == "__main__":
    main()
