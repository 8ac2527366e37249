#!/usr/bin/env python3
"""Benchmark: CPU a minion uses at idle while its settings beacon watches 200 settings files.

Uses the same cluster as tests/cluster (salt-master + 2 minions, a private dockerd per node,
shared storage) with the product's beacon settings (pillar/ccc/beacons.sls, no
ccc:cluster:beacon overrides: quiet period, 30 s stat poll) and 200 more containers that may run
on node1 and node2 but are placed on node3 (so nothing starts them here; both nodes watch their
files, each in its own user's settings folder). After the start-up reconcile has settled, the
CPU time of each minion's whole process tree is read from /proc over two quiet minutes (no
edits, no jobs but the minion's own schedule), in total and by process (ms of CPU per second).

    .venv/bin/python bench/minion_idle_cpu.py
"""

import pathlib
import subprocess
import sys
import time

import psutil
import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
WATCHED = 200
SETTLE_S = 40
MEASURE_S = 120


@pytest.fixture(scope="package")
def beacon_settings():
    return {}


@pytest.fixture(scope="package")
def extra_site(cluster_storage):
    """200 researcher containers allowed on node1 and node2, placed on node3, with their users and
    settings files (as users who deployed them before would have)."""
    sys.path.insert(0, str(REPO / "tests"))
    from support.site import sample_ccc

    containers, users = list(sample_ccc("node1")["containers"]), {}
    for index in range(WATCHED):
        email, stack = f"idle{index:03d}@example.org", f"idle-{index:03d}"
        users[email] = {"USER_NAME": f"idle{index:03d}", "USER_FULLNAME": f"Idle User {index}",
                        "USER_TYPE": "researcher"}
        containers.append({"STACK_NAME": stack, "USER_EMAIL": email,
                           "CONTAINER_IMAGE": "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1",
                           "DEPLOYMENT_NODES": ["node3"]})
        folder = pathlib.Path(cluster_storage) / "shared" / "user_data" / email / "container-settings"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{stack}.yml").write_text(f"{stack}: {{}}\n")
    return {"users": users, "containers": containers}


def _tree_cpu(pid):
    """User + system CPU seconds of a process and of each of its live descendants, by pid."""
    root, used = psutil.Process(pid), {}
    for process in [root] + root.children(recursive=True):
        try:
            times = process.cpu_times()
            used[process.pid] = (process.name(), times.user + times.system)
        except psutil.NoSuchProcess:
            continue
    return used


def test_minion_idle_cpu(master, minions, dockerds, event_listener):
    time.sleep(SETTLE_S)  # the start-up reconcile's jobs and the beacons' first stat polls
    jobs_before = len(event_listener.get_events([(master.id, "salt/job/*/new")]))
    pids = {node: factory.pid for node, factory in minions.items()}
    before = {node: _tree_cpu(pid) for node, pid in pids.items()}
    started = time.monotonic()
    time.sleep(MEASURE_S)
    elapsed = time.monotonic() - started
    after = {node: _tree_cpu(pid) for node, pid in pids.items()}
    jobs = len(event_listener.get_events([(master.id, "salt/job/*/new")])) - jobs_before
    print(f"\n{WATCHED} extra watched settings files per node, {elapsed:.0f} s idle, {jobs} jobs meanwhile")
    for node in sorted(pids):
        spent = {pid: (name, cpu - before[node].get(pid, (name, 0.0))[1]) for pid, (name, cpu) in after[node].items()}
        used = sum(cpu for _, cpu in spent.values())
        print(f"{node}: {used:.2f} CPU s in {elapsed:.0f} s = {100 * used / elapsed:.2f} % of one core "
              f"({1000 * used / elapsed:.1f} ms per s); by process: "
              + ", ".join(f"{name}[{pid}] {1000 * cpu / elapsed:.1f}" for pid, (name, cpu) in sorted(spent.items())))


if __name__ == "__main__":
    sys.exit(subprocess.call(
        [sys.executable, "-m", "pytest", __file__, "-p", "cluster.conftest", "-q", "-s", "--show-capture=no",
         "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning"],
        cwd=REPO,
    ))
