#!/usr/bin/env python3
"""Benchmark: latency of event-driven redeploys on a live master with minions node1 and node2.

Uses the same cluster as tests/cluster (salt-master + 2 minions, a private dockerd per node,
shared storage) with the product's default beacon settings except where the test harness sets
them (see tests/cluster/conftest.py). Prints p50/p95 of 20 edits (file write -> recreated
container running with the new value) and of node moves (write -> running on the new node and
gone from the old one).

    .venv/bin/python bench/redeploy_latency.py
"""

import pathlib
import statistics
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent


def _percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _wait(predicate, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        time.sleep(0.05)
    raise AssertionError("timed out")


def _shm(daemon, name):
    try:
        attrs = daemon.client().api.inspect_container(name)
    except Exception:  # noqa: BLE001 - absent while being swapped
        return None
    return attrs["HostConfig"]["ShmSize"] if attrs["State"]["Running"] else None


def _running(daemon):
    client = daemon.client()
    return {c.labels["ccc.stack"] for c in client.containers.list(filters={"label": "ccc.managed-by=ccc-salt"})}


def test_redeploy_latency(master, minions, dockerds, cluster_storage):
    node1, node2 = dockerds["node1"], dockerds["node2"]
    settings = pathlib.Path(cluster_storage) / "shared" / "user_data"
    ana = settings / "ana.novak@example.org" / "container-settings" / "ana-main.yml"
    edits = []
    for index in range(20):
        size = 100 + index
        time.sleep(1.5)  # let the previous edit's quiet period pass: 20 separate user actions
        start = time.monotonic()
        ana.write_text(f"ana-main:\n  SHM_SIZE: {size}m\n")
        edits.append(_wait(lambda: _shm(node1, "ana-main") == size * 1024**2) - start)

    bor = settings / "bor.kralj@example.org" / "container-settings" / "bor-main.yml"
    moves = []
    for index in range(6):
        source, target = (node1, node2) if index % 2 == 0 else (node2, node1)
        time.sleep(1.5)
        start = time.monotonic()
        bor.write_text(f"bor-main:\n  DEPLOYMENT_NODES: [{target.name}]\n")
        started_there = _wait(lambda: "bor-main" in _running(target)) - start
        moves.append(_wait(lambda: "bor-main" not in _running(source)) - start)
        print(f"move to {target.name}: running there after {started_there:.2f} s, gone from {source.name} after {moves[-1]:.2f} s")

    print()
    for label, values in (("edit -> recreated", edits), ("node move", moves)):
        print(f"{label:18} n={len(values):2}  p50 {statistics.median(values):.2f} s  "
              f"p95 {_percentile(values, 0.95):.2f} s  max {max(values):.2f} s")


if __name__ == "__main__":
    sys.exit(subprocess.call(
        [sys.executable, "-m", "pytest", __file__, "-p", "cluster.conftest", "-q", "-s", "--show-capture=no",
         "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning"],
        cwd=REPO,
    ))
