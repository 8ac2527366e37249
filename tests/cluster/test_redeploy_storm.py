"""A user saving a settings file about once a second, or touching it unchanged twice a second:
the master coalesces the redeploys per stack and rate-limits them per user (runner ``ccc``,
flushed by the master's schedule; every apply counts, also one that changes nothing), so the
nodes' state queues stay short, the container ends with the last save, and the user is told in
``.deploy`` when a redeploy was held back."""

import datetime
import itertools
import os
import time

import pytest

import ccc_redeploy
from .conftest import NODES, REDEPLOY_LIMITS, redeploys_settled
from .test_redeploy import EDIT_TIMEOUT, SETTLE, apply_returns, settings_dir, shm_of, wait_for

pytestmark = pytest.mark.docker

SAVES = 20
INTERVAL = 1.0  # s between saves
NOTICE = "redeploys are limited to"
SLACK = datetime.timedelta(seconds=0.2)


TOUCH_FOR = 60  # s of touching an unchanged settings file
TOUCH_INTERVAL = 0.5


def _published(event_listener, master, node, after, stack="ana-main"):
    """When the master published each redeploy of ``stack`` that targets ``node`` (its
    ``salt/job/<jid>/new`` events, either kind of job: ``ccc_redeploy.job_stack``), sorted."""
    found = []
    for event in event_listener.get_events([(master.id, "salt/job/*/new")], after_time=after):
        if ccc_redeploy.job_stack(event.data.get("fun"), event.data.get("arg")) == stack \
                and node in (event.data.get("minions") or ()):
            found.append(event.stamp)
    return sorted(found)


def _most_in_a_window(stamps):
    """The most of ``stamps`` within any rate-limit window (less a little slack for the event's
    own stamp)."""
    window = datetime.timedelta(seconds=REDEPLOY_LIMITS["window"]) - SLACK
    return max((len([t for t in stamps if first <= t < first + window]) for first in stamps), default=0)


class _Holds:
    """The master's ``hold`` decisions for ``stack`` since ``after`` (the ``hold`` actions in the
    returns of its ``ccc.redeploy`` and ``ccc.flush`` runs), gathered as they come: the listener
    forgets an event after 120 s. Whether a flood reaches the rate limit depends on how fast the
    jobs return (a job is published only once the previous one returned): on a loaded machine the
    jobs alone may pace it below the limit, and nothing is held."""

    def __init__(self, event_listener, master, after, stack="ana-main"):
        self.listener, self.master, self.after, self.stack = event_listener, master, after, stack
        self.jids, self.polled = set(), 0.0

    def poll(self, force=False):
        """Gathers the new hold decisions (at most once a second unless ``force``); returns how many."""
        if force or time.monotonic() - self.polled >= 1:
            self.polled = time.monotonic()
            for event in self.listener.get_events([(self.master.id, "salt/run/*/ret")], after_time=self.after):
                ret, fun = event.data.get("return"), event.data.get("fun")
                if isinstance(ret, dict) and (fun == "runner.ccc.flush" and ret.get(self.stack) == "hold" or
                                              fun == "runner.ccc.redeploy" and ret.get("stack") == self.stack
                                              and ret.get("action") == "hold"):
                    self.jids.add(event.data.get("jid"))
        return len(self.jids)


def _told_iff_held(master, holds, notice_seen, seen):
    """Once the record settled: the user read the limit notice in ``.deploy`` if and only if the
    master held an apply back (derived from what happened, not from the saves' pace)."""
    def settled():
        notice_seen()  # keep looking: the last applies rewrite the report
        return redeploys_settled(master, "ana-main")

    assert wait_for(settled, timeout=REDEPLOY_LIMITS["window"] + 2 * EDIT_TIMEOUT, interval=1), \
        "redeploys still pending"
    held = holds.poll(force=True)
    print(f"held back {held} times by the rate limit")
    if held:
        assert wait_for(notice_seen, timeout=EDIT_TIMEOUT), "no .deploy told the user about the limit"
        assert "waited" in seen[0]
    else:
        assert not notice_seen(), f"told about a limit that held nothing back: {seen}"


def test_a_save_every_second_is_coalesced_and_rate_limited(master, minions, dockerds, cluster_storage, event_listener):
    node1 = dockerds["node1"]
    path = settings_dir(cluster_storage, "ana.novak@example.org") / "ana-main.yml"
    report = path.parent / "ana-main.deploy"
    seen = []
    last = (100 + SAVES - 1) * 1024**2

    def notice_seen():  # each apply rewrites the report: look often
        holds.poll()
        text = report.read_text() if report.exists() else ""
        if not seen and NOTICE in text:
            seen.append(text)
        return bool(seen)

    def last_save_applied():
        notice_seen()
        return shm_of(node1, "ana-main") == last

    time.sleep(SETTLE)  # events of an earlier test's edit are still on their way
    started = time.time()
    holds = _Holds(event_listener, master, started)
    for index in range(SAVES):
        path.write_text(f"ana-main:\n  SHM_SIZE: {100 + index}m\n")
        deadline = time.monotonic() + INTERVAL
        while time.monotonic() < deadline:
            notice_seen()
            time.sleep(0.1)
    assert wait_for(last_save_applied, timeout=REDEPLOY_LIMITS["window"] + EDIT_TIMEOUT), "last save not applied"
    # a held-back apply may still come (a late duplicate event); its report is replaced by the next one
    _told_iff_held(master, holds, notice_seen, seen)
    events = event_listener.get_events([(master.id, "salt/beacon/*/ccc_settings/ana-main")], after_time=started)
    published = {e.data["jid"]: e.stamp for e in event_listener.get_events([(master.id, "salt/job/*/new")],
                                                                          after_time=started)}
    for node in NODES:
        applies = apply_returns(event_listener, master, node, started, stack="ana-main")
        print(f"{node}: {len(applies)} applies for {len(events)} settings events (both nodes)")
        assert applies, "no apply at all"
        # the rate limit itself: at most max_applies applies published per window
        stamps = _published(event_listener, master, node, started)
        assert _most_in_a_window(stamps) <= REDEPLOY_LIMITS["max_applies"], stamps
        assert all(event.data["retcode"] == 0 for event in applies)
        # coalesced: a job for the stack is published only once the previous one has returned
        # (give or take the moment between the master storing a return and firing its event)
        spans = sorted((published[e.data["jid"]], e.stamp) for e in applies if e.data["jid"] in published)
        assert all(later[0] > earlier[1] - SLACK for earlier, later in itertools.pairwise(spans)), spans


def test_touching_an_unchanged_file_twice_a_second_is_rate_limited(master, minions, dockerds, cluster_storage,
                                                                   event_listener):
    """Each touch is a new file version that both nodes report; the applies it causes change
    nothing, and still count: per node, no more applies are published than the limit allows,
    the user reads in ``.deploy`` that they were held back, and an edit after the flood is
    applied."""
    node1 = dockerds["node1"]
    path = settings_dir(cluster_storage, "ana.novak@example.org") / "ana-main.yml"
    report = path.parent / "ana-main.deploy"
    seen = []

    def notice_seen():  # each apply rewrites the report: look often
        holds.poll()
        text = report.read_text() if report.exists() else ""
        if not seen and NOTICE in text:
            seen.append(text)
        return bool(seen)

    time.sleep(SETTLE)  # events of an earlier test's edit are still on their way
    started, first = time.time(), time.monotonic()
    holds = _Holds(event_listener, master, started)
    for tick in range(int(TOUCH_FOR / TOUCH_INTERVAL)):
        os.utime(path)  # touch: a new mtime, the same settings
        while time.monotonic() < first + (tick + 1) * TOUCH_INTERVAL:
            notice_seen()
            time.sleep(0.05)
    touched = time.time()
    _told_iff_held(master, holds, notice_seen, seen)
    # a real edit after the flood: applied once the window allows
    size = (int(time.time()) % 100 + 300) * 1024**2
    path.write_text(f"ana-main:\n  SHM_SIZE: {size // 1024**2}m\n")
    assert wait_for(lambda: shm_of(node1, "ana-main") == size, timeout=REDEPLOY_LIMITS["window"] + EDIT_TIMEOUT), \
        "the edit after the flood was not applied"
    events = event_listener.get_events([(master.id, "salt/beacon/*/ccc_settings/ana-main")], after_time=started)
    events = [event for event in events if event.stamp.timestamp() <= touched]
    for node in NODES:
        stamps = _published(event_listener, master, node, started)
        during = [t for t in stamps if t.timestamp() <= touched]
        print(f"{node}: {len(during)} applies published in {TOUCH_FOR} s of touches "
              f"({len(events)} settings events, both nodes); at most {_most_in_a_window(stamps)} per "
              f"{REDEPLOY_LIMITS['window']} s")
        assert during, "the touches caused no apply at all"
        assert _most_in_a_window(stamps) <= REDEPLOY_LIMITS["max_applies"], stamps
        bound = REDEPLOY_LIMITS["max_applies"] * (TOUCH_FOR // REDEPLOY_LIMITS["window"] + 1)
        assert len(during) <= bound, stamps


START_EVENTS = 8


def _full_reconciles(event_listener, master, node, after):
    """When the master published each start-up reconcile (``state.apply containers`` with the
    modules synced first, ``ccc.node_start``) of ``node``."""
    found = []
    for event in event_listener.get_events([(master.id, "salt/job/*/new")], after_time=after):
        kwargs = next((arg for arg in event.data.get("arg") or [] if isinstance(arg, dict)), {})
        if event.data.get("fun") == "state.apply" and kwargs.get("sync_mods") == "all" \
                and event.data.get("minions") == [node]:
            found.append(event.stamp)
    return sorted(found)


def test_start_events_in_a_loop_are_coalesced_and_a_forged_one_is_ignored(master, minions, event_listener):
    """A minion that announces a start again and again (``salt/minion/<id>/start``, as a restart
    loop does) gets its sync and full reconcile coalesced and rate-limited, not one per start;
    a start event node1 sends in node2's name (tag and data disagree) reconciles nothing."""
    cli, run = master.salt_cli(timeout=60), master.salt_run_cli(timeout=60)

    def settled():  # no reconcile in flight or held: the next test starts clean
        return (run.run("ccc.redeploy_status").data or {}).get("nodes") == {}

    time.sleep(SETTLE)
    started = time.time()
    try:
        assert cli.run("event.send", "salt/minion/node2/start", minion_tgt="node1").returncode == 0
        for _ in range(START_EVENTS):
            assert cli.run("event.send", "salt/minion/node1/start", minion_tgt="node1").returncode == 0
    finally:
        assert wait_for(settled, timeout=REDEPLOY_LIMITS["window"] + 2 * EDIT_TIMEOUT, interval=1), \
            "reconciles still pending"
    sent = event_listener.get_events([(master.id, "salt/minion/node1/start")], after_time=started)
    assert len(sent) == START_EVENTS, "the start events did not reach the master's bus"
    sent = sorted(event.stamp for event in sent)
    stamps = _full_reconciles(event_listener, master, "node1", started)
    print(f"node1: {len(stamps)} start-up reconciles for {START_EVENTS} start events "
          f"over {(sent[-1] - sent[0]).total_seconds():.0f} s")
    assert 1 <= len(stamps) < START_EVENTS
    assert _most_in_a_window(stamps) <= REDEPLOY_LIMITS["max_applies"], stamps
    assert _full_reconciles(event_listener, master, "node2", started) == [], "a forged start reconciled node2"
