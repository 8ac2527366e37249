#!/usr/bin/env python3
"""Benchmark: `state.apply containers` on one node with N containers (default 10, 50 and 200).

Runs on a private dockerd ("bench", fake NVIDIA hook) with the tiny test image, through
masterless salt-call exactly as an admin would. Prints, per N: wall time of the first deploy
(N new stacks on a node in service: an apply without containers ran before, whose background
top-up made ``ccc:cluster:host_keys:spare_sets`` spare SSH host keys, default N here; ``--cold``:
on a fresh node; containers created ``ccc:node:create_parallelism`` at a time) and its cost per
container, then the best of three no-op re-applies: wall time, Salt's own "Total run time" of
the states, and that per container (it should stay flat as N grows).

Then two Salt floors on the same node (best of three each): the salt-call floor,
``salt-call --local test.true`` (start-up, grains and pillar), and the state floor,
``state.apply`` of an SLS of as many states as the no-op ran, each ``test.succeed_without_changes``
(the salt-call floor plus the state engine, its loaders and one state per container): what no
apply with one state per container can beat, however little its states do. Last, the Docker floor: the same N containers
(the specs the apply made, pins and networks already in place) removed and made again straight
through the Docker API, create + connect + start, as many at a time as the apply used. No apply can beat it on that machine; the first
deploy minus the floor is what ccc-salt itself costs (Salt start-up, plans, host keys, pins,
reports); ratio is the first deploy over the Docker floor. Figures swing by a third or more on a
shared host: compare the columns of one run.

Every salt-call runs with the environment a node's has: Python's bytecode cache on, as Salt's
loader uses it for the synced modules (a ``PYTHONDONTWRITEBYTECODE`` of the calling shell is
dropped; with it, each run compiles ccc-salt's modules again: about 0.05 s of a no-op of 50).

    .venv/bin/python bench/containers_apply.py [--parallelism P] [--rsa-bits B] [N ...]

Smallest (the suite's smoke test): ``1`` (one container), about a minute.
"""

import argparse
import contextlib
import fcntl
import functools
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "_modules"))

from support.dockerd import start_dockerd  # noqa: E402
from support.site import SALT_CALL, SaltNode, unmount_below  # noqa: E402

import ccc_engine  # noqa: E402 (the apply's own translation of a spec into create arguments)
import ccc_pillar  # noqa: E402
import ccc_rules  # noqa: E402

MANAGED = {"label": f"{ccc_rules.MANAGED_BY_LABEL}={ccc_rules.MANAGED_BY_VALUE}"}
IMAGE = "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1"
# salt-call as on a node: the bytecode cache of the synced modules on (see the docstring)
NODE_ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}


def bench_pillar(count, parallelism=None, rsa_bits=None, spare_sets=None):
    users, containers = {}, []
    for index in range(count):
        email = f"bench{index:03d}@example.org"
        users[email] = {"USER_FULLNAME": f"Bench User {index}", "USER_NAME": f"bench{index:03d}", "USER_TYPE": "researcher"}
        containers.append({"STACK_NAME": f"bench-{index:03d}", "USER_EMAIL": email, "CONTAINER_IMAGE": IMAGE,
                           "FRP_PORTS": {"TCP": [22], "HTTP": [{"port": 8080, "subdomain": f"bench-{index:03d}", "pass": "x"}]}})
    # /20s: every container joins its access network and claims (a /24 holds 253 of them).
    networks = {name: {"subnet": f"10.233.{16 * (slot + 1)}.0/20", "gateway": f"10.233.{16 * (slot + 1)}.1",
                       "bridge_name": f"cccb-{slot}"}
                for slot, name in enumerate(("lab-unrestricted", "student-restricted", "claims"))}
    node = {"create_parallelism": parallelism} if parallelism else {}
    cluster = {"networks": networks}
    cluster["host_keys"] = {key: value for key, value in (("rsa_bits", rsa_bits), ("spare_sets", spare_sets))
                            if value is not None}
    return {"users": users, "containers": containers, "cluster": cluster, "node": node}


def wait_for_key_top_up(work):
    """Until the background host key top-up a deploy started is done (it holds its lock)."""
    for lock in pathlib.Path(work).glob("storage/**/host-keys-spare/.top-up.lock"):
        with open(lock) as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)


def timed_apply(node):
    command = SALT_CALL + ["--local", "-c", str(node.config_dir), "--retcode-passthrough", "state.apply", "containers"]
    start = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, env=NODE_ENV)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(proc.stdout[-3000:] + proc.stderr[-3000:])
    match = re.search(r"Total run time:\s+([\d.]+) (ms|s)", proc.stdout)
    states = float(match.group(1)) / (1000 if match.group(2) == "ms" else 1)
    changed = re.search(r"Succeeded: \d+ \(changed=(\d+)\)", proc.stdout)
    ran = re.search(r"Total states run:\s+(\d+)", proc.stdout)
    return wall, states, int(changed.group(1)) if changed else 0, int(ran.group(1))


def best_of_three(command):
    best = None
    for _ in range(3):
        start = time.monotonic()
        proc = subprocess.run(command, capture_output=True, text=True, env=NODE_ENV)
        if proc.returncode:
            raise SystemExit(f"{' '.join(command[3:])} exited {proc.returncode}:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        best = min(best or 1e9, time.monotonic() - start)
    return best


def salt_call_floor(node):
    """Seconds of the cheapest salt-call on this node (``test.true``: start-up, grains, pillar),
    the best of three: no apply can be faster."""
    return best_of_three(SALT_CALL + ["--local", "-c", str(node.config_dir), "test.true"])


def state_floor(node, states, work):
    """Seconds of ``state.apply`` of ``states`` states that do nothing (``test.succeed_without_changes``)
    on this node, its pillar included, from a file root of their own: the best of three."""
    root = pathlib.Path(work) / "state-floor"
    root.mkdir(exist_ok=True)
    (root / "ccc_state_floor.sls").write_text("".join(
        f"ccc-state-floor-{index}:\n  test.succeed_without_changes: []\n" for index in range(states)))
    return best_of_three(SALT_CALL + ["--local", "-c", str(node.config_dir), f"--file-root={root}",
                                      "--retcode-passthrough", "state.apply", "ccc_state_floor"])


def docker_floor(client, parallelism):
    """Seconds to remove and make again every managed container through the Docker API alone."""
    specs = []
    for container in client.containers.list(all=True, filters=MANAGED):
        attrs = container.attrs  # the SDK's list inspects each container already
        spec = ccc_engine.spec_of_container(attrs)
        first = attrs["HostConfig"]["NetworkMode"]
        spec["networks"] = [first] + [name for name in spec["networks"] if name != first]
        specs.append((attrs["Name"].lstrip("/"), spec))
    remove_managed(client)
    time.sleep(2)  # the engine finishes tearing down network namespaces and mounts in the background

    def make(item):
        name, spec = item
        created = client.api.create_container(name=name, **ccc_engine.create_kwargs(client, spec))
        for network in spec["networks"][1:]:
            client.api.connect_container_to_network(created["Id"], network)
        client.api.start(created["Id"])

    start = time.monotonic()
    with ThreadPoolExecutor(parallelism) as pool:
        list(pool.map(make, specs))
    return time.monotonic() - start


def remove_managed(client):
    for container in client.containers.list(all=True, filters=MANAGED):
        container.remove(force=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("counts", nargs="*", type=int, default=[10, 50, 200])
    parser.add_argument("--parallelism", type=int, help="ccc:node:create_parallelism (default: the built-in one)")
    parser.add_argument("--rsa-bits", type=int, help="ccc:cluster:host_keys:rsa_bits (default: the built-in 3072); a small "
                        "size shows what making the SSH host keys costs a first deploy")
    parser.add_argument("--spare-sets", type=int, help="ccc:cluster:host_keys:spare_sets (default: N, the admin sized "
                        "the spare host keys for the burst; 0: keys made during the first deploy)")
    parser.add_argument("--no-docker-floor", action="store_true", help="skip the Docker floor (it recreates all N "
                        "containers: minutes at 500)")
    parser.add_argument("--cold", action="store_true", help="first deploy on a node nothing was applied to yet "
                        "(its networks made then, no spare host keys)")
    args = parser.parse_args()
    daemon = start_dockerd("bench", pathlib.Path("/var/tmp/ccc-bench-docker"), "10.233.8.1/24", fake_nvidia=True)
    subprocess.run(["bash", str(REPO / "tests" / "images" / "build.sh"), daemon.url], check=True, capture_output=True)
    client = daemon.client()
    client.images.get("ccc-test/tiny:1").tag(*IMAGE.rsplit(":", 1))
    remove_managed(client)
    for network in client.networks.list(filters=MANAGED):
        network.remove()  # made by an earlier run, maybe with other subnets: the apply makes them again
    print(f"{'N':>4} {'first deploy':>13} {'per container':>14} {'no-op wall':>11} {'no-op states':>13} "
          f"{'per container':>14} {'salt-call floor':>15} {'state floor':>11} {'docker floor':>13} {'ratio':>6}")
    try:
        for count in args.counts:
            remove_managed(client)
            with tempfile.TemporaryDirectory() as work, contextlib.ExitStack() as cleanup:
                cleanup.callback(unmount_below, work)  # also when an apply fails: the folders can go
                pillar = functools.partial(bench_pillar, parallelism=args.parallelism, rsa_bits=args.rsa_bits,
                                           spare_sets=count if args.spare_sets is None else args.spare_sets)
                node = SaltNode(pathlib.Path(work) / "salt", "node1", daemon.url, pathlib.Path(work) / "storage",
                                extra_ccc=pillar(0 if not args.cold else count))
                if not args.cold:  # the node in service (an apply without containers), then N new stacks
                    timed_apply(node)
                    wait_for_key_top_up(work)
                    node.write_pillar(pillar(count))
                first, _, changed, _ = timed_apply(node)
                assert changed >= count, f"first deploy changed only {changed} states"
                wait_for_key_top_up(work)  # the next spares are made before the no-op runs
                noop_runs = [timed_apply(node) for _ in range(3)]
                wall, states, changed, state_count = min(noop_runs)
                assert changed == 0, "a no-op apply changed something"
                call_floor = salt_call_floor(node)
                states_floor = state_floor(node, state_count, work)
                floor = float("nan") if args.no_docker_floor else \
                    docker_floor(client, args.parallelism or ccc_pillar.NODE_DEFAULTS["create_parallelism"])
                print(f"{count:>4} {first:>12.2f}s {1000 * first / count:>11.1f} ms {wall:>10.2f}s {states:>12.2f}s "
                      f"{1000 * states / count:>11.1f} ms {call_floor:>14.2f}s {states_floor:>10.2f}s {floor:>12.2f}s "
                      f"{first / floor:>6.2f}",
                      flush=True)
    finally:
        remove_managed(client)
        daemon.stop()


if __name__ == "__main__":
    main()
