#!/usr/bin/env python3
"""Benchmark: cost of one GPU exporter scrape with 8 GPUs and 100 GPU processes.

The exporter is the real one (agents/ccc_gpu_exporter.py), served over HTTP on 127.0.0.1; below
it, NVML is the FAKE of tests/agents/fake_nvml.py (8 GPUs, 100 compute processes spread over 25
containers), Docker is a fake ``api.containers()``/``inspect_container()`` of 30 labelled running
containers, and each process has a cgroup-v1 file (10 controller lines, as on this host) under a
temporary proc root, as has each container's main process its network files (``net/dev``,
``net/route``, a ``net/tcp`` with 2 SSH sessions), so the cgroup parsing, the attribution and the
per-container network read are measured for real. What the fake leaves out is the time of the
real NVML calls (about 14 per GPU per scrape) and of the Docker API round trips. The script
stops with an error when a scrape misses the GPU processes or a container's metrics.

Prints p50/p95 over 50 scrapes (after 5 warm-up scrapes) of:

* server-side collection time (``ccc_gpu_exporter_scrape_duration_seconds`` of each response);
* CPU time of the collection in the serving thread (``time.thread_time``);
* wall time of the whole HTTP scrape as the client sees it;
* in-process ``generate_latest`` (collect + text encoding, no HTTP): wall and CPU
  (``time.process_time``) per scrape.

    .venv/bin/python bench/gpu_exporter_scrape.py [--scrapes 50]

Smallest (the suite's smoke test): ``--scrapes 1``, a second.

The exporter and its library are imported in this process: ``_utils/`` goes first on the import
path here, as ``PYTHONPATH`` does for the installed service.
"""

import argparse
import importlib.util
import json
import pathlib
import statistics
import sys
import tempfile
import time
import urllib.request

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "_utils"), str(REPO / "tests" / "agents")]

import ccc_exporter_config
import ccc_nvml
from fake_nvml import FakeNvml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

GPUS, PROCESSES, CONTAINERS = 8, 100, 25
TCP_HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
TCP_SSH = ("{n:4d}: 02001FAC:0016 0100000A:{port:04X} 01 00000000:00000000 00:00000000 00000000     0        0 "
           "{n} 1 0000000000000000 20 4 30 10 -1\n")  # an established session to port 22


def load_exporter():
    spec = importlib.util.spec_from_file_location("ccc_gpu_exporter", REPO / "agents" / "ccc_gpu_exporter.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakeDockerClient:
    """FAKE Docker SDK client: the calls the exporter makes, ``api.containers()`` (label filter
    honoured) and ``api.inspect_container()`` (running, its PID's /proc under the proc root)."""

    def __init__(self, entries, pids):
        self.entries, self.pids = entries, pids
        self.api = self

    def containers(self, filters=None, **_):
        wanted = dict(label.split("=", 1) for label in [(filters or {}).get("label")] if label)
        return [dict(entry) for entry in self.entries
                if all(entry["Labels"].get(key) == value for key, value in wanted.items())]

    def inspect_container(self, container):
        entry = next(entry for entry in self.entries if entry["Id"] == container)
        return {"Id": entry["Id"], "Name": entry["Names"][0], "RestartCount": 0,
                "Config": {"Labels": dict(entry["Labels"])},
                "State": {"Running": True, "Pid": self.pids[entry["Id"]], "StartedAt": "2026-01-01T00:00:00Z"},
                "NetworkSettings": {"Networks": {"lab-unrestricted": {"IPAddress": "172.31.0.2", "IPPrefixLen": 24}}}}

    def close(self):
        pass


def container_id(n):
    return "%064x" % (0xC0FFEE0000 + n)


def make_world(root):
    """Fake NVML, fake Docker and real cgroup files for 100 processes under ``root``/proc."""
    nvml = FakeNvml(gpus=[{"temperature": 50 + i, "utilization_gpu": 90, "memory_used": 20 << 30,
                           "memory_total": 24 << 30, "fan": None} for i in range(GPUS)])
    proc_root = root / "proc"
    for n in range(PROCESSES):
        pid = 20000 + n
        nvml.add_process(n % GPUS, pid, (256 + n) << 20)
        cid = container_id(n % CONTAINERS)
        path = proc_root / str(pid)
        path.mkdir(parents=True)
        lines = [f"{i}:{c}:/docker/{cid}" for i, c in enumerate(
            ("cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "name=systemd"), 1)]
        (path / "cgroup").write_text("\n".join(lines + [f"0::/docker/{cid}"]) + "\n")
    pids = {}
    for n in range(CONTAINERS + 5):  # each container's main process: its network namespace's files
        pid, cid = 40000 + n, container_id(n)
        net = proc_root / str(pid) / "net"
        net.mkdir(parents=True)
        (proc_root / str(pid) / "cgroup").write_text(f"0::/system.slice/docker-{cid}.scope\n")
        (net / "dev").write_text("Inter-| x\n face | x\n  eth0: " + " ".join(["1000"] * 16) + "\n")
        (net / "route").write_text("Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n"
                                   "eth0\t00001FAC\t00000000\t0001\t0\t0\t0\t00FFFFFF\n")
        (net / "tcp").write_text(TCP_HEADER + "".join(TCP_SSH.format(n=i, port=50000 + i) for i in range(2)))
        pids[cid] = pid
    entries = [{"Id": container_id(n), "Names": [f"/user{n}-main"], "Labels": {
        "ccc.managed-by": "ccc-salt", "ccc.stack": f"user{n}-main", "ccc-user.email": f"user{n}@example.org",
        "ccc-user.name": f"user{n}", "frp.22": "tcp"}} for n in range(CONTAINERS + 5)]
    state = root / "fan-state.json"
    state.write_text(json.dumps({"mode": "standard", "failsafe": False, "max_temperature_c": 57.2,
                                 "zones": {"2": 35, "3": 35}, "updated": time.time()}))
    return nvml, FakeDockerClient(entries, pids), proc_root, state


def pct(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def report(name, seconds):
    print(f"{name:<52} p50 {pct(seconds, 0.5) * 1000:8.2f} ms   p95 {pct(seconds, 0.95) * 1000:8.2f} ms"
          f"   mean {statistics.mean(seconds) * 1000:8.2f} ms")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scrapes", type=int, default=50)
    args = parser.parse_args()
    exporter = load_exporter()
    with tempfile.TemporaryDirectory() as tmp:
        nvml, docker, proc_root, state = make_world(pathlib.Path(tmp))
        config = ccc_exporter_config.check(dict(ccc_exporter_config.DEFAULTS, proc_root=str(proc_root),
                                                fan_state_file=str(state)))
        registry, collector = exporter.build(config, nvml_loader=lambda: ccc_nvml.load_nvml(nvml),
                                             docker_factory=lambda: docker)
        thread_cpu = []
        collect = collector.collect

        def timed_collect():
            start = time.thread_time()
            try:
                return collect()
            finally:
                thread_cpu.append(time.thread_time() - start)

        collector.collect = timed_collect
        server = exporter.serve(registry, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        server_side, client_wall, size, samples = [], [], 0, 0
        for i in range(5 + args.scrapes):
            start = time.perf_counter()
            with urllib.request.urlopen(url, timeout=10) as response:
                body = response.read().decode()
            wall = time.perf_counter() - start
            families = {f.name: f for f in text_string_to_metric_families(body)}
            if i >= 5:
                client_wall.append(wall)
                server_side.append(families["ccc_gpu_exporter_scrape_duration_seconds"].samples[0].value)
            size, samples = len(body), sum(len(f.samples) for f in families.values())
        process_samples = len(families["ccc_gpu_process_memory_used_bytes"].samples)
        assert process_samples == PROCESSES, process_samples
        assert families["ccc_gpu_exporter_collection_success"].samples[0].value == 1
        ssh = [sample.value for sample in families["ccc_container_ssh_sessions"].samples]
        received = families["ccc_container_network_receive_bytes"].samples
        if ssh != [2] * (CONTAINERS + 5) or len(received) != CONTAINERS + 5:  # the container collector read them all
            raise SystemExit(f"container metrics incomplete: ssh sessions {ssh}, {len(received)} network counters")
        thread_cpu = thread_cpu[5:]
        server.shutdown()

        wall_inproc, cpu_inproc = [], []
        for _ in range(args.scrapes):
            start_wall, start_cpu = time.perf_counter(), time.process_time()
            generate_latest(registry)
            wall_inproc.append(time.perf_counter() - start_wall)
            cpu_inproc.append(time.process_time() - start_cpu)

    print(f"GPU exporter scrape: {GPUS} fake GPUs, {PROCESSES} GPU processes in {CONTAINERS} containers, "
          f"{args.scrapes} scrapes; exposition {size} bytes, {samples} samples")
    report("server-side collection (scrape_duration metric)", server_side)
    report("collection CPU in the serving thread", thread_cpu)
    report("HTTP scrape wall time (client side)", client_wall)
    report("generate_latest in process: wall", wall_inproc)
    report("generate_latest in process: CPU", cpu_inproc)


if __name__ == "__main__":
    main()
