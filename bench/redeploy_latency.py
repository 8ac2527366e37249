#!/usr/bin/env python3
"""Benchmark: latency of event-driven redeploys on a live master with minions node1 and node2.

Uses the same cluster as tests/cluster (salt-master + 2 minions, a private dockerd per node,
shared storage) with the product's default beacon settings except where the test harness sets
them (see tests/cluster/conftest.py). The per-user rate limit is set out of reach: 26 edits in
two minutes are far above it, and this measures the path of one edit, not the limiter
(bench/redeploy_storm.py measures that). Prints p50/p95 of 20 edits (``--edits``; file write ->
recreated container running with the new value) and of 12 node moves (``--moves``; write ->
running on the new node and gone from the old one), and where the time of each edit goes, from event timestamps:

    write        -> beacon event   the salt/beacon/<node>/ccc_settings/<stack> event at the master
    beacon       -> runner start   the reactor: salt/run/<jid>/new of ccc.redeploy
    runner start -> publish        the runner: salt/job/<jid>/new of the state.apply
    publish      -> pillar served  a state.apply only: the minion's job process starts and asks
                                   for its pillar, the master compiles it (GPG included):
                                   minion/refresh/<node>, the master's event once it served it
                 -> job start      a state.apply: the minion loads the state modules and renders
                                   the SLS (each file it renders is a request to the master), up
                                   to the first state's start_time in the job's return; the fast
                                   redeploy (ccc_docker.redeploy, no pillar compile, no SLS): from
                                   the publish to the function's start ("started" in its return)
    job start    -> deploy start   a state.apply: the states before the deployment (the
                                   networks); the fast redeploy: its checks and the node's lock
    deploy start -> started        the deployment (plan, Docker create, stop, start, swap) up to
                                   Docker's StartedAt of the new container
    started      -> seen           until the bench saw it running with the new value

Each edit's line ends with the kind of job that applied it: "fast" (the fast redeploy, which the
master sends while the node's in-memory pillar is current) or "state" (a state.apply limited to
the stack, which compiles the pillar).

A move is timed at both ends: the new copy running on the node it moved to, and the old one
gone from the node it left (make-before-break: that node removes it once the new one runs).

A "-" is a step whose event belongs to no job of its own: a job already queued for an earlier
report read the new file (coalesced).

    .venv/bin/python bench/redeploy_latency.py [--edits 20] [--moves 12]

Smallest (the suite's smoke test): ``--edits 1 --moves 1``, about a minute with the cluster's
start-up.
"""

import datetime
import pathlib
import statistics
import sys
import time

import pytest

import _harness

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))
from support import site  # noqa: E402,F401  (puts the product's _utils on the path)

import ccc_redeploy  # noqa: E402

SIZES = {"edits": (20, "settings edits timed (write -> recreated)"), "moves": (12, "node moves timed, at least 1")}
EDITS, MOVES = _harness.size(SIZES, "edits"), _harness.size(SIZES, "moves")
STEPS = ("write -> beacon event", "beacon -> runner start", "runner start -> publish", "publish -> pillar served",
         "-> job start", "job start -> deploy start", "deploy start -> started", "started -> seen")


@pytest.fixture(scope="package")
def redeploy_limits():
    return {"max_applies": 1000, "window": 60, "job_timeout": 60}


def _percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _wait(predicate, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        time.sleep(0.02)
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


def _epoch(stamp):
    return stamp.timestamp() if isinstance(stamp, datetime.datetime) else None


def _docker_time(text):
    """Docker's RFC 3339 time with nanoseconds (UTC) as epoch seconds."""
    head, _, rest = text.rstrip("Z").partition(".")
    moment = datetime.datetime.fromisoformat(head).replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp() + float("0." + (rest or "0"))


def _state_time(returned_at, clock):
    """A state's ``start_time`` (local ``HH:MM:SS.ffffff`` on the minion) as epoch seconds, on
    the day the job returned."""
    day = datetime.datetime.fromtimestamp(returned_at)
    moment = datetime.datetime.combine(day.date(), datetime.time.fromisoformat(clock))
    if moment.timestamp() > returned_at + 60:  # started before midnight
        moment -= datetime.timedelta(days=1)
    return moment.timestamp()


def _first(events, after, predicate=lambda event: True):
    found = [event for event in events if _epoch(event.stamp) >= after and predicate(event)]
    return min(found, key=lambda event: event.stamp) if found else None


def _breakdown(event_listener, master, daemon, node, stack, written, seen_at):
    """The seconds of each step of one edit (``None`` where an event was not found; a step after
    one is timed from the last mark found), and the kind of job that applied it."""
    deadline = time.monotonic() + 10  # the job's return comes after its last state
    while True:
        events = event_listener.get_events([(master.id, "salt/*"), (master.id, f"minion/refresh/{node}")],
                                           after_time=written - 1)
        if time.monotonic() > deadline or any(e.tag.startswith("salt/job/") and f"/ret/{node}" in e.tag
                                              and _epoch(e.stamp) >= seen_at for e in events):
            break
        time.sleep(0.1)
    beacon = _first(events, written, lambda e: e.tag.startswith("salt/beacon/") and e.tag.endswith(f"/ccc_settings/{stack}"))
    runner = _first(events, written, lambda e: e.tag.startswith("salt/run/") and e.tag.endswith("/new")
                    and e.data.get("fun") == "runner.ccc.redeploy")

    def ours(event):
        return (event.tag.endswith("/new") and ccc_redeploy.job_stack(event.data.get("fun"), event.data.get("arg")) == stack
                and node in event.data.get("minions", []))

    published = [e for e in events if e.tag.startswith("salt/job/") and _epoch(e.stamp) >= written and ours(e)]
    ret, publish = None, None
    for job in sorted(published, key=lambda e: e.stamp):  # the job that applied this edit: the last before it was seen
        back = _first(events, written, lambda e, jid=job.data["jid"]: e.tag == f"salt/job/{jid}/ret/{node}")
        if back is not None and _epoch(job.stamp) <= seen_at:
            publish, ret = job, back
    marks = [written, _epoch(beacon.stamp) if beacon else None, _epoch(runner.stamp) if runner else None,
             _epoch(publish.stamp) if publish else None, None, None, None, None, seen_at]
    fast = ret is not None and ret.data.get("fun") == ccc_redeploy.FAST_FUN
    if fast and isinstance(ret.data.get("return"), dict):
        marks[5], marks[6] = ret.data["return"].get("started"), ret.data["return"].get("deploy_started")
    elif ret is not None:
        states = [v for v in (ret.data.get("return") or {}).values() if isinstance(v, dict) and v.get("start_time")]
        if states:
            marks[5] = min(_state_time(_epoch(ret.stamp), s["start_time"]) for s in states)
        deploy = [v for v in states if v.get("__id__") == "ccc-containers-deploy"]
        if deploy:
            marks[6] = _state_time(_epoch(ret.stamp), deploy[0]["start_time"])
    if publish is not None and marks[5] is not None and not fast:  # the pillar this job's process asked for
        served = _first(events, _epoch(publish.stamp), lambda e: e.tag == f"minion/refresh/{node}")
        if served is not None and _epoch(served.stamp) <= marks[5]:
            marks[4] = _epoch(served.stamp)
    try:
        marks[7] = _docker_time(daemon.client().api.inspect_container(stack)["State"]["StartedAt"])
    except Exception:  # noqa: BLE001 - being swapped again
        pass
    steps, last = [], written
    for mark in marks[1:]:
        steps.append(None if mark is None else mark - last)
        last = mark if mark is not None else last
    return steps, "fast" if fast else "state" if ret is not None else "?"


def _table(rows):
    print(f"\n{'step (s)':30} {'p50':>6} {'p95':>6} {'max':>6}  n")
    for index, label in enumerate(STEPS):
        values = [row[index] for row in rows if row[index] is not None]
        if values:
            print(f"{label:30} {statistics.median(values):6.2f} {_percentile(values, 0.95):6.2f} "
                  f"{max(values):6.2f}  {len(values)}")


def test_redeploy_latency(master, minions, dockerds, cluster_storage, event_listener):
    node1, node2 = dockerds["node1"], dockerds["node2"]
    settings = pathlib.Path(cluster_storage) / "shared" / "user_data"
    ana = settings / "ana.novak@example.org" / "container-settings" / "ana-main.yml"
    edits, rows = [], []
    time.sleep(5)  # the start-up reconcile's last events
    for index in range(EDITS):
        size = 100 + index
        time.sleep(1.5)  # let the previous edit's quiet period pass: 20 separate user actions
        written, start = time.time(), time.monotonic()
        ana.write_text(f"ana-main:\n  SHM_SIZE: {size}m\n")
        seen = _wait(lambda: _shm(node1, "ana-main") == size * 1024**2)
        edits.append(seen - start)
        steps, kind = _breakdown(event_listener, master, node1, "node1", "ana-main", written, written + edits[-1])
        rows.append(steps)
        print(f"edit {index:2}: {edits[-1]:.2f} s  " + "  ".join("-" if s is None else f"{s:.2f}" for s in steps)
              + f"  {kind}")

    bor = settings / "bor.kralj@example.org" / "container-settings" / "bor-main.yml"
    moves, starts = [], []
    for index in range(MOVES):
        source, target = (node1, node2) if index % 2 == 0 else (node2, node1)
        if index:  # bor-main starts on node1 and node2; then it runs where the last move put it
            _wait(lambda: "bor-main" in _running(source) and "bor-main" not in _running(target))
        time.sleep(1.5)
        already = "bor-main" in _running(target)  # the first move only removes the copy on node1
        start = time.monotonic()
        bor.write_text(f"bor-main:\n  DEPLOYMENT_NODES: [{target.name}]\n")
        started_there = _wait(lambda: "bor-main" in _running(target)) - start
        moves.append(_wait(lambda: "bor-main" not in _running(source)) - start)
        if not already:
            starts.append(started_there)
        print(f"move to {target.name}: running there after {started_there:.2f} s{' (already)' if already else ''}, "
              f"gone from {source.name} after {moves[-1]:.2f} s")

    _table(rows)
    print()
    for label, values in (("edit -> recreated", edits), ("move: new running", starts), ("move: old gone", moves)):
        if not values:
            continue
        print(f"{label:18} n={len(values):2}  p50 {statistics.median(values):.2f} s  "
              f"p95 {_percentile(values, 0.95):.2f} s  max {max(values):.2f} s")


if __name__ == "__main__":
    sys.exit(_harness.main(__file__, __doc__, SIZES))
