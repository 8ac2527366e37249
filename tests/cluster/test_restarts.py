"""A master outage longer than the minute a minion's request waits for an answer: the minions
(``master_alive_interval``, scripts/minion_config.py) notice it, drop the settings event of an
edit made meanwhile, and on reconnecting send ``salt/minion/<id>/start``, whose reconcile
(reactor/minion_start.sls) applies the edit. The bound is documented in README.md ("Master
outages")."""

import pathlib
import time

import pytest

from .test_redeploy import settings_dir, shm_of, wait_for

pytestmark = pytest.mark.docker

OUTAGE = 90  # s; a minion request times out after 60 s
# from node1's reconnect (its ``salt/minion/node1/start`` reaching the master) to the edit running:
# the reactor, ccc.node_start, its sync and full reconcile in one job. Measured from that event, not
# from starting the master: how long the master takes to start and the minion to notice it is back
# (every master_alive_interval, then its sign-in) is the machine's and Salt's, and a loaded CI host
# stretched it past the whole bound (73 s from starting the master, 12 s of it the start-up).
APPLY_BOUND = 60
RECONNECT_TIMEOUT = 180  # s to give up waiting for the reconnect at all (not a bound the test claims)
SHM = 6 * 1024**3
ANA_MAIN = "ccc_container_|-ccc-container-ana-main_|-ana-main_|-running"


# what Salt's minion logs when its master-alive check finds the master gone (salt/minion.py)
CONNECTION_LOST = "Connection to master"


def _lost_since(log, offset):
    """Whether the minion log, after byte ``offset``, says its connection to the master was lost."""
    with log.open("rb") as handle:
        handle.seek(offset)
        return any(CONNECTION_LOST in line and line.rstrip().endswith("lost")
                   for line in handle.read().decode(errors="replace").splitlines())


def applied_by_start_reconcile(event_listener, master, after):
    """Returns from node1, since ``after``, of start-up reconciles (``state.apply containers`` with
    the modules synced first: ``ccc.node_start``) that recreated ana-main with the edited size."""
    found = []
    for event in event_listener.get_events([(master.id, "salt/job/*/ret/node1")], after_time=after):
        kwargs = next((arg for arg in event.data.get("fun_args") or [] if isinstance(arg, dict)), {})
        state = (event.data.get("return") or {}).get(ANA_MAIN) if isinstance(event.data.get("return"), dict) else None
        recreated = ((state or {}).get("changes") or {}).get("recreated") or {}
        if event.data.get("fun") == "state.apply" and kwargs.get("sync_mods") == "all" \
                and (recreated.get("shm_size") or {}).get("new") == SHM:
            found.append(event)
    return found


def test_an_edit_made_during_a_master_outage_is_applied_by_the_reconnect_reconcile(
        master, minions, dockerds, cluster_storage, event_listener):
    node1 = dockerds["node1"]
    path = settings_dir(cluster_storage, "ana.novak@example.org") / "ana-main.yml"
    time.sleep(3)  # events of an earlier test's edit are still on their way
    log = pathlib.Path(minions["node1"].config["log_file"])
    logged = log.stat().st_size
    master.terminate()
    stopped = time.monotonic()
    # A beacon event is dropped only once the minion knows the master is gone (Salt fires beacons
    # to the master only while connected; before that the request waits and is delivered when
    # the master is back, and that event's redeploy would race the reconcile this test is about).
    assert wait_for(lambda: _lost_since(log, logged),
                    timeout=OUTAGE - 10, interval=0.5), "node1 did not notice the master outage"
    noticed, edited_at = time.monotonic() - stopped, time.time()
    path.write_text("ana-main:\n  SHM_SIZE: 6g\n")
    time.sleep(OUTAGE - (time.monotonic() - stopped))
    assert shm_of(node1, "ana-main") != SHM
    restarted, restarted_at = time.monotonic(), time.time()
    master.start()
    started_in = time.monotonic() - restarted
    reconnects = wait_for(lambda: event_listener.get_events([(master.id, "salt/minion/node1/start")],
                                                            after_time=restarted_at),
                          timeout=RECONNECT_TIMEOUT, interval=1)
    assert reconnects, "node1 did not announce its reconnect"
    reconnected = min(event.stamp for event in reconnects).timestamp()
    applied = wait_for(lambda: shm_of(node1, "ana-main") == SHM,
                       timeout=APPLY_BOUND + 30 - (time.time() - reconnected), interval=0.5)
    latency = time.time() - reconnected
    print(f"node1 noticed the outage after {noticed:.1f} s; master down {restarted - stopped:.0f} s, started in {started_in:.1f} s; node1 reconnected "
          f"{reconnected - restarted_at:.1f} s after starting the master; edit applied {latency:.1f} s after that")
    assert applied, "the edit made during the outage was not applied after the master came back"
    assert latency < APPLY_BOUND
    # the edit's own event never arrived: the reconnect reconcile applied it
    assert wait_for(lambda: applied_by_start_reconcile(event_listener, master, restarted_at)), \
        "no start-up reconcile recreated ana-main with the edit"
    assert not event_listener.get_events([(master.id, "salt/beacon/node1/ccc_settings/ana-main")],
                                         after_time=edited_at)
