"""node1's dockerd dies and starts again: the ccc_docker beacon sees the engine come back, the
master's reactor has ``ccc.reconcile_node`` apply ``containers`` on node1, and its compute
containers run again within seconds, with the same homes, instead of at the next scheduled
reconcile (up to 6 min).

Two crashes: dockerd with its containerd and shims SIGKILLed (Docker may restart the
``unless-stopped`` containers by itself), and dockerd alone SIGKILLed (the shims keep the
containers alive; the next dockerd, without live-restore, stops them as if by hand, and Docker
leaves them exited: only Salt starts them again)."""

import datetime
import os
import pathlib
import signal
import time

import pytest

from support.dockerd import start_dockerd
from support.nodes import TEST_BASE, bridge_cidr

from .conftest import REDEPLOY_LIMITS, managed_stacks, redeploys_settled
from .test_redeploy import SETTLE, apply_returns, wait_for

pytestmark = pytest.mark.docker

RECOVERY_LIMIT = 10  # s from dockerd answering again until every compute container runs
MIN_INTERVAL = 30  # the beacon's default: at most one event per node per this many seconds
TAG = "salt/beacon/node1/ccc_docker/restarted"
HOMES = {"ana-main": ("ana.novak@example.org", "/home/ana"), "bor-main": ("bor.kralj@example.org", "/home/bor")}


def kill_all(daemon):
    """dockerd, its containerd and the shims SIGKILLed; then what the harness needs to start the
    next daemon (stale mounts of the data and exec roots, the bridge) is cleaned up."""
    daemon._kill_leftovers(daemon.pid())
    daemon.stop()


def kill_dockerd(daemon):
    """dockerd alone SIGKILLed (its containerd follows it; the shims and containers live on)."""
    pid = daemon.pid()
    os.kill(pid, signal.SIGKILL)
    if daemon._proc is not None:
        daemon._proc.wait()
    assert wait_for(lambda: daemon.pid() is None, timeout=10)


def running_or_none(daemon):
    """``managed_stacks`` of a daemon that may not answer (None then)."""
    try:
        return managed_stacks(daemon)
    except Exception:  # noqa: BLE001 - the engine is down or starting
        return None


def home_sources(daemon):
    """{stack: bind source of its home} for the running stacks of ``HOMES``."""
    found = {}
    for entry in daemon.client().api.containers(filters={"label": "ccc.managed-by=ccc-salt"}):  # one call: no 404 mid-swap
        stack = entry["Labels"].get("ccc.stack")
        if stack in HOMES:
            found[stack] = next((m["Source"] for m in entry["Mounts"] if m["Destination"] == HOMES[stack][1]), None)
    return found


def full_reconciles(event_listener, master, after):
    """Returns of unfiltered ``state.apply containers`` jobs on node1 that the master published
    after ``after`` (a job published earlier, still queued when the engine died, fails honestly:
    it ran while nothing answered; only the jobs the beacon's event caused must succeed)."""
    published = {event.data.get("jid") for event in event_listener.get_events([(master.id, "salt/job/*/new")],
                                                                             after_time=after)}
    return [event for event in apply_returns(event_listener, master, "node1", after)
            if event.data.get("jid") in published and event.data.get("fun") == "state.apply"
            and not any(isinstance(arg, dict) and arg.get("pillar") for arg in event.data.get("fun_args") or [])]


def crash_and_recover(kill, master, dockerds, storage, event_listener):
    """Kill node1's engine with ``kill``, start it again, and measure until every compute
    container runs again; checks homes, the beacon event and the reconcile. Returns the report."""
    node1 = dockerds["node1"]
    assert wait_for(lambda: {"ana-main", "ana-jupyter", "bor-main"} <= managed_stacks(node1), timeout=60)
    expected, homes = managed_stacks(node1), home_sources(node1)
    assert set(homes) == set(HOMES) and all(homes.values()), homes
    for stack, (email, _) in HOMES.items():
        (pathlib.Path(storage) / "shared" / "user_data" / email / stack / "before-crash.txt").write_text(stack)
    earlier = event_listener.get_events([(master.id, TAG)], after_time=time.time() - 3600.0)
    if earlier:  # the beacon's rate limit: this crash must not be held back by the last one's event
        last = max(event.stamp for event in earlier)
        wait = MIN_INTERVAL + 1 - (datetime.datetime.now(datetime.timezone.utc) - last).total_seconds()
        time.sleep(max(0, wait))
    time.sleep(SETTLE)  # an earlier test's settings events are still on their way
    # and its jobs, or the cluster's start-up reconcile, are queued: the reconcile this crash
    # causes must not wait behind them, nor must they run while the engine is down
    assert wait_for(lambda: redeploys_settled(master), timeout=REDEPLOY_LIMITS["window"] + 60, interval=1), \
        "redeploys still pending"

    started = time.time()
    kill(node1)
    assert running_or_none(node1) is None
    time.sleep(2)  # down for a moment
    node1 = start_dockerd("node1", TEST_BASE, bridge_cidr("node1"), fake_nvidia=True)
    answering = time.monotonic()
    dockerds["node1"] = node1
    seen = []  # (s after answering, running stacks): what Docker did by itself, then Salt

    def recovered():
        running = running_or_none(node1) or set()
        if not seen or seen[-1][1] != sorted(running):
            seen.append((round(time.monotonic() - answering, 1), sorted(running)))
        return running >= expected

    assert wait_for(recovered, timeout=60, interval=0.2), f"not recovered: {seen}"
    recovery = time.monotonic() - answering
    assert home_sources(node1) == homes
    for stack, (_, home) in HOMES.items():
        inside = node1.client().containers.get(stack).exec_run(["cat", f"{home}/before-crash.txt"])
        assert inside.output == stack.encode()
    fired = wait_for(lambda: list(event_listener.get_events([(master.id, TAG)], after_time=started)), timeout=30)
    assert len(fired) == 1 and set(fired[0].data) <= {"engine", "away_s", "id", "_stamp"}, fired
    full = wait_for(lambda: full_reconciles(event_listener, master, fired[0].stamp), timeout=60)
    assert full and all(event.data["retcode"] == 0 for event in full), full
    report = (f"recovered {recovery:.1f} s after dockerd answered; running (s after answering, stacks): {seen}; "
              f"beacon fired at {fired[0].stamp.time()} (away_s {fired[0].data['away_s']}), "
              f"full reconcile returned at {[e.stamp.time() for e in full]}")
    print("\n" + report)
    assert recovery <= RECOVERY_LIMIT, report
    return seen


def test_an_engine_killed_with_its_containerd_and_shims_is_reconciled_within_seconds(
        master, minions, dockerds, cluster_storage, event_listener):
    crash_and_recover(kill_all, master, dockerds, cluster_storage, event_listener)


def test_containers_the_restarted_engine_stopped_are_started_again_by_salt(
        master, minions, dockerds, cluster_storage, event_listener):
    seen = crash_and_recover(kill_dockerd, master, dockerds, cluster_storage, event_listener)
    assert seen[0][1] == [], f"Docker restarted them by itself, Salt was not needed: {seen}"
