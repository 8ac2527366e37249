"""A user saving a settings file about once a second: the master coalesces the redeploys per
stack and rate-limits them per user (runner ``ccc``, flushed by the master's schedule), so the
nodes' state queues stay short, the container ends with the last save, and the user is told in
``.deploy`` when a redeploy was held back."""

import datetime
import itertools
import time

import pytest

from .conftest import NODES, REDEPLOY_LIMITS
from .test_redeploy import EDIT_TIMEOUT, SETTLE, settings_dir, shm_of, state_apply_returns, wait_for

pytestmark = pytest.mark.docker

SAVES = 20
INTERVAL = 1.0  # s between saves
NOTICE = "redeploys are limited to"
SLACK = datetime.timedelta(seconds=0.2)


def _changed(event):
    """Whether this apply changed the container (applies that changed nothing are not counted)."""
    ret = event.data.get("return") or {}
    return any(value.get("changes") for key, value in ret.items()
               if isinstance(value, dict) and "ccc-container-ana-main_" in key)


def test_a_save_every_second_is_coalesced_and_rate_limited(master, minions, dockerds, cluster_storage, event_listener):
    node1 = dockerds["node1"]
    path = settings_dir(cluster_storage, "ana.novak@example.org") / "ana-main.yml"
    report = path.parent / "ana-main.deploy"
    seen = []
    last = (100 + SAVES - 1) * 1024**2

    def notice_seen():  # each apply rewrites the report: look often
        text = report.read_text() if report.exists() else ""
        if not seen and NOTICE in text:
            seen.append(text)
        return bool(seen)

    def last_save_applied():
        notice_seen()
        return shm_of(node1, "ana-main") == last

    time.sleep(SETTLE)  # events of an earlier test's edit are still on their way
    started = time.time()
    for index in range(SAVES):
        path.write_text(f"ana-main:\n  SHM_SIZE: {100 + index}m\n")
        deadline = time.monotonic() + INTERVAL
        while time.monotonic() < deadline:
            notice_seen()
            time.sleep(0.1)
    assert wait_for(last_save_applied, timeout=REDEPLOY_LIMITS["window"] + EDIT_TIMEOUT), "last save not applied"
    # a held-back apply may still come (a late duplicate event); its report is replaced by the next one
    assert wait_for(notice_seen, timeout=REDEPLOY_LIMITS["window"]), "no .deploy told the user about the limit"
    assert "waited" in seen[0]
    time.sleep(3)  # the last job's other returns
    events = event_listener.get_events([(master.id, "salt/beacon/*/ccc_settings/ana-main")], after_time=started)
    published = {e.data["jid"]: e.stamp for e in event_listener.get_events([(master.id, "salt/job/*/new")],
                                                                          after_time=started)}
    for node in NODES:
        applies = state_apply_returns(event_listener, master, node, started, stack="ana-main")
        print(f"{node}: {len(applies)} applies for {len(events)} settings events (both nodes)")
        assert applies, "no apply at all"
        # the rate limit itself: at most max_applies applies that changed the container per window
        changing = sorted(published[e.data["jid"]] for e in applies
                          if e.data["jid"] in published and _changed(e))
        window = datetime.timedelta(seconds=REDEPLOY_LIMITS["window"]) - SLACK
        for first in changing:
            in_window = [t for t in changing if first <= t < first + window]
            assert len(in_window) <= REDEPLOY_LIMITS["max_applies"], changing
        assert all(event.data["retcode"] == 0 for event in applies)
        # coalesced: a job for the stack is published only once the previous one has returned
        # (give or take the moment between the master storing a return and firing its event)
        spans = sorted((published[e.data["jid"]], e.stamp) for e in applies if e.data["jid"] in published)
        assert all(later[0] > earlier[1] - SLACK for earlier, later in itertools.pairwise(spans)), spans
