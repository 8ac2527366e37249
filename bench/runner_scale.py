#!/usr/bin/env python3
"""Benchmark: the master's ``ccc.targets`` (and what ``ccc.redeploy`` reads before it publishes)
with a pillar cache of 100 minions; then the runner's cost per settings event by the number of
minions.

A synthetic master (temporary cachedir and pki_dir, ``minion_data_cache``) whose cache holds
100 minions' grains and pillar: the same site on each (``CONTAINERS`` containers, researchers
allowed on every node) plus the node's own ``ccc:node``. The runner reads it through Salt's
``MasterPillarUtil``, as on a master. Prints the median of ``ccc.targets`` per site size, split
into reading the cache and deciding, and ``ccc.redeploy``'s reads (targets and the stack's user)
before it would publish.

Then, with ``EVENT_CONTAINERS`` containers and ``EVENT_MINIONS`` minions, the median cost of one
``ccc.redeploy`` call (one beacon event) that the record coalesces: while the stack's job is in
flight, and while its user is held by the rate limit. The publisher and job cache are a fake
``LocalClient`` (jobs are published and return at once, or never), the pillar cache is real.

No Docker, no master process: ``.venv/bin/python bench/runner_scale.py``
"""

import importlib.util
import os
import pathlib
import statistics
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "_utils")]
import salt.cache  # noqa: E402
import salt.config  # noqa: E402

MINIONS = 100
SIZES = (10, 200, 1000)
REPEAT = 5
EVENT_MINIONS = (10, 500)
EVENT_CONTAINERS = 50
EVENTS = 50


def _site(containers, minions=MINIONS):
    users, entries = {}, []
    for index in range(containers):
        email = f"user{index:04d}@example.org"
        users[email] = {"USER_NAME": f"user{index:04d}", "USER_FULLNAME": f"User {index}", "USER_TYPE": "researcher"}
        entries.append({"STACK_NAME": f"box-{index:04d}", "USER_EMAIL": email, "CONTAINER_IMAGE": "vicoslab/ccc:base",
                        "FRP_PORTS": {"TCP": [22]}, "INSTALL_PACKAGES": "htop nano"})
    nodes = [f"gpu{index:03d}" for index in range(minions)]
    return {"user_types": {"researcher": {"allowed_nodes": nodes, "default_nodes": nodes[:1]}},
            "users": users, "containers": entries}


def _master(root, containers, minions=MINIONS):
    opts = salt.config.master_config(None)
    opts.update(cachedir=str(root / "cache"), pki_dir=str(root / "pki"), minion_data_cache=True, cache="localfs",
                conf_file=str(root / "master"))
    os.makedirs(root / "pki" / "minions", exist_ok=True)
    cache, site = salt.cache.factory(opts), _site(containers, minions)
    for index in range(minions):
        minion = f"gpu{index:03d}.lab"
        (root / "pki" / "minions" / minion).write_text("key\n")
        cache.store("grains", minion, {"id": minion})
        cache.store("pillar", minion, {"ccc": dict(site, node={"name": f"gpu{index:03d}"})})
    return opts


def _runner(opts):
    spec = importlib.util.spec_from_file_location("ccc_runner", REPO / "_runners" / "ccc.py")
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    runner.__opts__ = opts
    return runner


def _median_ms(function):
    walls = []
    for _ in range(REPEAT):
        started = time.perf_counter()
        result = function()
        walls.append(1000 * (time.perf_counter() - started))
    return statistics.median(walls), result


class _FakeClient:
    """The master's publisher and job cache: every job is published to the minions asked;
    its returns are every target's (``returned``) or none (still queued)."""

    def __init__(self):
        self.jobs, self.returned = {}, True

    def run_job(self, minions, fun, **_):
        jid = f"{len(self.jobs):020d}"
        self.jobs[jid] = list(minions)
        return {"jid": jid, "minions": list(minions)}

    def get_cache_returns(self, jid):
        return {minion: {"ret": {}} for minion in self.jobs.get(jid, ())} if self.returned else {}


def _event_costs(minions):
    """Median ms of a coalesced ``ccc.redeploy`` event: a job in flight, then the user held."""
    import salt.client

    with tempfile.TemporaryDirectory() as tmp:
        opts = _master(pathlib.Path(tmp), EVENT_CONTAINERS, minions)
        opts["ccc_redeploy"] = {"max_applies": 3, "window": 3600, "job_timeout": 3600}
        runner, client = _runner(opts), _FakeClient()
        salt.client.get_local_client = lambda *_args, **_kwargs: client
        stack, costs = "box-0001", {}
        for phase, returned in (("in flight", False), ("held", True)):
            client.returned = returned
            walls, actions = [], set()
            for event in range(EVENTS):
                if returned:
                    runner.flush()  # the job-return reactor's flush
                started = time.perf_counter()
                actions.add(runner.redeploy(stack, version=f"{phase}:{event}")["action"])
                walls.append(1000 * (time.perf_counter() - started))
            costs[phase] = (statistics.median(walls[5:]), sorted(actions))
        return costs, len(client.jobs)


def main():
    print(f"{MINIONS} minions in the master's pillar cache; median of {REPEAT} (ms)")
    print(f"{'containers':>10} {'ccc.targets':>12} {'read cache':>11} {'decide':>8} {'redeploy reads':>15}")
    for containers in SIZES:
        with tempfile.TemporaryDirectory() as tmp:
            runner = _runner(_master(pathlib.Path(tmp), containers))
            stack = f"box-{containers // 2:04d}"
            total, targets = _median_ms(lambda: runner.targets(stack))
            assert len(targets) == MINIONS, len(targets)
            read, cccs = _median_ms(runner._cached_cccs)
            decide, _ = _median_ms(lambda: runner._targets_for(cccs, stack))

            def redeploy_reads():
                master = runner._Master()
                return runner._targets_for(master.cccs(), stack), runner._user_for(master.cccs(), stack)

            reads, _ = _median_ms(redeploy_reads)
        print(f"{containers:>10} {total:12.1f} {read:11.1f} {decide:8.1f} {reads:15.1f}")
    print(f"\none settings event (ccc.redeploy) coalesced by the record, {EVENT_CONTAINERS} containers; "
          f"median of the last {EVENTS - 5} of {EVENTS} events (ms)")
    print(f"{'minions':>8} {'in flight':>10} {'held':>8} {'jobs published':>15}")
    for minions in EVENT_MINIONS:
        costs, jobs = _event_costs(minions)
        print(f"{minions:>8} {costs['in flight'][0]:10.2f} {costs['held'][0]:8.2f} {jobs:>15}   "
              f"actions: {costs['in flight'][1]} {costs['held'][1]}")


if __name__ == "__main__":
    main()
