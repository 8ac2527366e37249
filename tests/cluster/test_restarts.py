"""A master outage longer than the minute a minion's request waits for an answer: the minions
(``master_alive_interval``, scripts/minion_config.py) notice it, drop the settings event of an
edit made meanwhile, and on reconnecting send ``salt/minion/<id>/start``, whose reconcile
(reactor/minion_start.sls) applies the edit. The bound is documented in README.md ("Master
outages")."""

import time

import pytest

from .conftest import MASTER_ALIVE_INTERVAL
from .test_redeploy import settings_dir, shm_of, wait_for

pytestmark = pytest.mark.docker

OUTAGE = 90  # s; a minion request times out after 60 s
# from starting the master to the edit running: master start-up, the minion's reconnect, its
# start event, its sync and full reconcile in one job (ccc.node_start; measured 5-10 s on this harness)
APPLY_BOUND = 60


def test_an_edit_made_during_a_master_outage_is_applied_by_the_reconnect_reconcile(
        master, minions, dockerds, cluster_storage, event_listener):
    node1 = dockerds["node1"]
    path = settings_dir(cluster_storage, "ana.novak@example.org") / "ana-main.yml"
    time.sleep(3)  # events of an earlier test's edit are still on their way
    master.terminate()
    stopped = time.monotonic()
    time.sleep(2 * MASTER_ALIVE_INTERVAL + 5)  # the minions have noticed
    edited_at = time.time()
    path.write_text("ana-main:\n  SHM_SIZE: 6g\n")
    time.sleep(OUTAGE - (time.monotonic() - stopped))
    assert shm_of(node1, "ana-main") != 6 * 1024**3
    restarted, restarted_at = time.monotonic(), time.time()
    master.start()
    applied = wait_for(lambda: shm_of(node1, "ana-main") == 6 * 1024**3, timeout=APPLY_BOUND + 30, interval=0.5)
    latency = time.monotonic() - restarted
    print(f"master down {restarted - stopped:.0f} s; edit applied {latency:.1f} s after starting the master")
    assert applied, "the edit made during the outage was not applied after the master came back"
    assert latency < APPLY_BOUND
    assert event_listener.get_events([(master.id, "salt/minion/node1/start")], after_time=restarted_at), \
        "node1 did not announce its reconnect"
    # the edit's own event never arrived: the reconnect reconcile applied it
    assert not event_listener.get_events([(master.id, "salt/beacon/node1/ccc_settings/ana-main")],
                                         after_time=edited_at)
