#!/usr/bin/env python3
"""Benchmark: CPU a minion uses at idle while its settings beacon watches 1,000 settings files
and its Docker events beacon holds the engine's events stream open.

Uses the same cluster as tests/cluster (salt-master + 2 minions, a private dockerd per node,
shared storage) with the product's beacon settings (pillar/ccc/beacons.sls, no
ccc:cluster:beacon overrides: quiet period, 30 s stat poll; the ccc_docker beacon on, unless
``--docker-beacon 0`` switches it off with the pillar a site would use) and ``--files`` more
containers that may run on node1 and node2 but are placed on node3 (so nothing starts them here;
both nodes watch their files, each in its own user's settings folder). After the start-up
reconcile has settled, the CPU time of each minion's whole process tree is read from /proc over
two quiet minutes (no edits, no jobs but the minion's own schedule), in total and by process
(ms of CPU per second).

    .venv/bin/python bench/minion_idle_cpu.py [--files 1000] [--docker-beacon 1] [--settle 40] [--measure 120]

Smallest (the suite's smoke test): ``--files 10 --settle 0 --measure 2``, under a minute with
the cluster's start-up. Compare file counts (200, 1000) and ``--docker-beacon 0/1`` run by run.
"""

import pathlib
import sys
import time

import psutil
import pytest
import yaml

import _harness

REPO = pathlib.Path(__file__).resolve().parent.parent
SIZES = {
    "files": (1000, "extra watched settings files per node"),
    "docker-beacon": (1, "1: the ccc_docker beacon runs as in the product; 0: the site switches it off"),
    "settle": (40, "seconds for the start-up reconcile and the beacons' first polls"),
    "measure": (120, "seconds of idle measured"),
}
WATCHED, DOCKER_BEACON = _harness.size(SIZES, "files"), _harness.size(SIZES, "docker-beacon")
SETTLE_S, MEASURE_S = _harness.size(SIZES, "settle"), _harness.size(SIZES, "measure")


@pytest.fixture(scope="package")
def beacon_settings():
    return {}


@pytest.fixture(scope="package")
def extra_site(cluster_storage):
    """WATCHED researcher containers allowed on node1 and node2, placed on node3, with their users
    and settings files (as users who deployed them before would have)."""
    sys.path.insert(0, str(REPO / "tests"))
    from support.site import sample_ccc

    containers, users = list(sample_ccc("node1")["containers"]), {}
    for index in range(WATCHED):
        email, stack = f"idle{index:04d}@example.org", f"idle-{index:04d}"
        users[email] = {"USER_NAME": f"idle{index:04d}", "USER_FULLNAME": f"Idle User {index}",
                        "USER_TYPE": "researcher"}
        containers.append({"STACK_NAME": stack, "USER_EMAIL": email,
                           "CONTAINER_IMAGE": "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1",
                           "DEPLOYMENT_NODES": ["node3"]})
        folder = pathlib.Path(cluster_storage) / "shared" / "user_data" / email / "container-settings"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{stack}.yml").write_text(f"{stack}: {{}}\n")
    return {"users": users, "containers": containers}


@pytest.fixture(scope="package")
def overrides_root(overrides_root):
    """The harness's per-node pillar, with ``beacons:ccc_docker`` switched off when asked (a
    site's pillar comes after pillar/ccc/beacons.sls, and a list replaces the product's)."""
    if not DOCKER_BEACON:
        for path in (overrides_root / "site" / "nodes").glob("*.sls"):
            pillar = yaml.safe_load(path.read_text())
            pillar["beacons"] = {"ccc_docker": [{"enabled": False}]}
            path.write_text(yaml.safe_dump(pillar))
    return overrides_root


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


def _beacons(master, node):
    """The beacons the minion runs, as it reports them (``beacons.list``), "(off)" if disabled."""
    listed = master.salt_cli(timeout=60).run("beacons.list", "return_yaml=False", minion_tgt=node).data
    listed = listed if isinstance(listed, dict) else {}
    beacons = {name: conf for name, conf in listed.items() if isinstance(conf, list)}
    off = {name for name, conf in beacons.items()
           if any(isinstance(item, dict) and item.get("enabled") is False for item in conf)}
    return " ".join(name + (" (off)" if name in off else "") for name in sorted(beacons))


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
    beacons = {node: _beacons(master, node) for node in minions}
    print(f"\n{WATCHED} extra watched settings files per node, ccc_docker beacon {'on' if DOCKER_BEACON else 'off'}, "
          f"{elapsed:.0f} s idle, {jobs} jobs meanwhile")
    for node in sorted(pids):
        spent = {pid: (name, cpu - before[node].get(pid, (name, 0.0))[1]) for pid, (name, cpu) in after[node].items()}
        used = sum(cpu for _, cpu in spent.values())
        print(f"{node}: {used:.2f} CPU s in {elapsed:.0f} s = {100 * used / elapsed:.2f} % of one core "
              f"({1000 * used / elapsed:.1f} ms per s); beacons: {beacons[node]}; by process: "
              + ", ".join(f"{name}[{pid}] {1000 * cpu / elapsed:.1f}" for pid, (name, cpu) in sorted(spent.items())))


if __name__ == "__main__":
    sys.exit(_harness.main(__file__, __doc__, SIZES))
