#!/usr/bin/env python3
"""Benchmark: a redeploy storm, one user saving a settings file once a second for a minute.

Uses the same cluster as tests/cluster (salt-master + 2 minions, a private dockerd per node,
shared storage) but with the product's redeploy limits (scripts/master_config.py), not the
tests' tighter ones. Prints, per node, the settings events, the redeploy jobs for the stack,
the most of them queued or running at once and the ones held back by the rate limit, and the
time from the last save to the container running with the last value.

    .venv/bin/python bench/redeploy_storm.py [--saves 60] [--interval 1.0] [--tail 15]

Smallest (the suite's smoke test): ``--saves 3 --tail 0``, under a minute with the cluster's
start-up.
"""

import pathlib
import sys
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import master_config  # noqa: E402

import _harness  # noqa: E402  (beside this script)
from redeploy_latency import _shm  # noqa: E402  (beside this script)

import ccc_redeploy  # noqa: E402  (on the path through redeploy_latency)

SIZES = {"saves": (60, "saves of one settings file"), "interval": (1.0, "seconds between two saves"),
         "tail": (15, "seconds counted after the last value runs: late duplicate events and their jobs")}
SAVES, INTERVAL, TAIL_S = (_harness.size(SIZES, name) for name in ("saves", "interval", "tail"))


@pytest.fixture(scope="package")
def redeploy_limits():
    return master_config.master_config()["ccc_redeploy"]


class _Events:
    """The master's events since ``after``, gathered every few seconds: the listener forgets
    events after two minutes, and a storm under the product's limits lasts longer than that."""

    def __init__(self, event_listener, master, after):
        self.listener, self.master, self.after, self.seen = event_listener, master, after, {}

    def gather(self):
        for event in self.listener.get_events([(self.master.id, "salt/*")], after_time=self.after):
            self.seen[(event.tag, event.stamp)] = event

    def tagged(self, prefix, suffix=""):
        return [e for (tag, _), e in sorted(self.seen.items()) if tag.startswith(prefix) and tag.endswith(suffix)]

    def jobs(self, node, stack):
        """(published, returned, held back) of the redeploy jobs for ``stack`` on ``node`` (either
        kind: ``ccc_redeploy.job_stack``; held back: the job carries the master's notice)."""
        new = {}
        for event in self.tagged("salt/job/", "/new"):
            kwargs = next((a for a in event.data.get("arg") or [] if isinstance(a, dict)), {})
            if ccc_redeploy.job_stack(event.data.get("fun"), event.data.get("arg")) == stack \
                    and node in event.data.get("minions", []):
                held = "notice" in kwargs or "ccc_notice" in (kwargs.get("pillar") or {})
                new[event.data["jid"]] = (event.stamp.timestamp(), held)
        returned = {e.data["jid"]: e.stamp.timestamp() for e in self.tagged("salt/job/", f"/ret/{node}")}
        return [(published, returned.get(jid), held) for jid, (published, held) in sorted(new.items())]


def _most_at_once(jobs):
    edges = sorted([(p, 1) for p, _, _ in jobs] + [(r, -1) for _, r, _ in jobs if r is not None])
    most = current = 0
    for _, step in edges:
        current += step
        most = max(most, current)
    return most


def test_redeploy_storm(master, minions, dockerds, cluster_storage, event_listener, redeploy_limits):
    node1 = dockerds["node1"]
    path = pathlib.Path(cluster_storage) / "shared" / "user_data" / "ana.novak@example.org" / "container-settings"
    path = path / "ana-main.yml"
    time.sleep(5)  # the start-up reconcile's events
    started, first = time.time(), time.monotonic()
    events = _Events(event_listener, master, started)
    for index in range(SAVES):
        path.write_text(f"ana-main:\n  SHM_SIZE: {200 + index}m\n")
        last_save = time.monotonic()
        if index % 10 == 9:
            events.gather()
        time.sleep(max(0.0, first + (index + 1) * INTERVAL - time.monotonic()))
    last = (200 + SAVES - 1) * 1024**2
    deadline = last_save + redeploy_limits["window"] + 60
    next_gather = time.monotonic() + 10
    while _shm(node1, "ana-main") != last and time.monotonic() < deadline:
        time.sleep(0.05)
        if time.monotonic() >= next_gather:
            events.gather()
            next_gather += 10
    latency = time.monotonic() - last_save
    assert _shm(node1, "ana-main") == last, "the last save was not applied"
    time.sleep(TAIL_S)  # late duplicate events and their jobs
    events.gather()
    print(f"\n{SAVES} saves in {SAVES * INTERVAL:.0f} s, limits {redeploy_limits}")
    for node in dockerds:
        beacon = events.tagged(f"salt/beacon/{node}/ccc_settings/ana-main")
        jobs = events.jobs(node, "ana-main")
        print(f"{node}: {len(beacon)} settings events, {len(jobs)} redeploy jobs for ana-main "
              f"(at most {_most_at_once(jobs)} queued or running at once, {sum(h for *_, h in jobs)} held back)")
    print(f"last save -> container running with the last value: {latency:.2f} s")


if __name__ == "__main__":
    sys.exit(_harness.main(__file__, __doc__, SIZES))
