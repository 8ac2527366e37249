"""Event-driven redeploy on a live master with minions node1 and node2 (see conftest.py):
settings beacon -> master reactor -> the stack applied on the nodes where it may run (the fast
redeploy, or `state.apply containers` limited to it while a pillar change is under way). Each test edits the shared settings files exactly as a user inside a container would."""

import pathlib
import time

import pytest

from support import site  # noqa: F401  (puts the product's _utils on the path)

import ccc_redeploy
from .conftest import QUIET_PERIOD, managed_stacks

pytestmark = pytest.mark.docker

EDIT_TIMEOUT = 30
SETTLE = QUIET_PERIOD + 3  # quiet period + beacon loop + reactor hop


def settings_dir(storage, email):
    return pathlib.Path(storage) / "shared" / "user_data" / email / "container-settings"


def wait_for(predicate, timeout=EDIT_TIMEOUT, interval=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


def container_attrs(daemon, name):
    try:
        return daemon.client().api.inspect_container(name)
    except Exception:  # noqa: BLE001 - absent or being replaced
        return None


def shm_of(daemon, name):
    attrs = container_attrs(daemon, name)
    if attrs and attrs["State"]["Running"]:
        return attrs["HostConfig"]["ShmSize"]
    return None


def apply_returns(event_listener, master, node, after, stack=None):
    """Returns from ``node`` since ``after`` of the jobs that apply containers: those that
    redeploy ``stack`` when given (a fast redeploy or a ``state.apply`` limited to it, as
    ``ccc_redeploy.job_stack`` tells), else every ``state.apply`` and fast redeploy."""
    found = []
    for event in event_listener.get_events([(master.id, f"salt/job/*/ret/{node}")], after_time=after):
        fun, args = event.data.get("fun"), event.data.get("fun_args")
        if stack is None and fun in ("state.apply", ccc_redeploy.FAST_FUN) or \
                stack is not None and ccc_redeploy.job_stack(fun, args) == stack:
            found.append(event)
    return found


def redeploy_failure(event, stack):
    """The comment of a redeploy of ``stack`` that failed (either kind of job); None when it did
    not fail. A state run says it in the container's state and counts it in the summary."""
    ret = event.data.get("return")
    if event.data.get("fun") == ccc_redeploy.FAST_FUN:
        facts = ret.get("facts") if isinstance(ret, dict) else None
        return (facts or {}).get("problem") or (ret if isinstance(ret, str) else None)
    ret = ret if isinstance(ret, dict) else {}
    state = next((v for k, v in ret.items() if f"ccc-container-{stack}_" in k), None)
    summary = next((v for k, v in ret.items() if "ccc-containers-summary" in k), None)
    if state and state["result"] is False and summary and f"failed: {stack}" in summary["comment"]:
        return state["comment"]
    return None


def test_an_allowed_edit_recreates_the_container_with_the_new_value(master, minions, dockerds, cluster_storage):
    node1 = dockerds["node1"]
    before = container_attrs(node1, "ana-main")["Id"]
    path = settings_dir(cluster_storage, "ana.novak@example.org") / "ana-main.yml"
    started = time.monotonic()
    path.write_text("ana-main:\n  SHM_SIZE: 3g\n")
    assert wait_for(lambda: shm_of(node1, "ana-main") == 3 * 1024**3), "edit was not applied in time"
    latency = time.monotonic() - started
    assert container_attrs(node1, "ana-main")["Id"] != before
    assert latency < EDIT_TIMEOUT
    report = path.parent / "ana-main.deploy"
    assert wait_for(lambda: "shm_size: 3g" in report.read_text())
    assert "recreated with the new settings" in report.read_text()


def test_one_save_both_nodes_see_is_reported_at_once_and_applied_once(master, minions, dockerds, cluster_storage,
                                                                      event_listener):
    """Both nodes watch ana-main's file (it may run on either): each reports the save, with the same
    version, when the quiet period ends (the beacon's dispatch thread, through the real minion);
    the master applies it once."""
    node1 = dockerds["node1"]
    path = settings_dir(cluster_storage, "ana.novak@example.org") / "ana-main.yml"
    time.sleep(SETTLE)  # events of an earlier test's edit are still on their way
    started = time.time()
    path.write_text("ana-main:\n  SHM_SIZE: 6g\n")
    assert wait_for(lambda: shm_of(node1, "ana-main") == 6 * 1024**3)
    time.sleep(SETTLE)  # the other node's report, and a job it would have caused
    reports = event_listener.get_events([(master.id, "salt/beacon/*/ccc_settings/ana-main")], after_time=started)
    assert sorted(event.tag.split("/")[2] for event in reports) == ["node1", "node2"]
    assert len({event.data["version"] for event in reports}) == 1
    delays = [event.stamp.timestamp() - started for event in reports]
    assert all(delay < QUIET_PERIOD + 0.75 for delay in delays), delays  # not at the beacon's next call (1 s)
    for node in ("node1", "node2"):
        assert len(apply_returns(event_listener, master, node, started, stack="ana-main")) == 1


def test_a_move_between_nodes_keeps_the_home(master, minions, dockerds, cluster_storage):
    node1, node2 = dockerds["node1"], dockerds["node2"]
    home = pathlib.Path(cluster_storage) / "shared" / "user_data" / "bor.kralj@example.org" / "bor-main"
    assert "bor-main" in managed_stacks(node1)
    (home / "before-move.txt").write_text("written on node1\n")
    path = settings_dir(cluster_storage, "bor.kralj@example.org") / "bor-main.yml"
    path.write_text("bor-main:\n  DEPLOYMENT_NODES: [node2]\n")
    assert wait_for(lambda: "bor-main" in managed_stacks(node2) and "bor-main" not in managed_stacks(node1))
    inside = node2.client().containers.get("bor-main").exec_run(["cat", "/home/bor/before-move.txt"])
    assert inside.output == b"written on node1\n"


def test_a_burst_of_saves_ends_in_the_last_value_with_few_applies(master, minions, dockerds, cluster_storage, event_listener):
    node1 = dockerds["node1"]
    path = settings_dir(cluster_storage, "ana.novak@example.org") / "ana-main.yml"
    started = time.time()
    for size in range(1, 51):
        path.write_text(f"ana-main:\n  SHM_SIZE: {size}m\n")
        time.sleep(0.02)
    assert wait_for(lambda: shm_of(node1, "ana-main") == 50 * 1024**2)
    time.sleep(3)
    applies = apply_returns(event_listener, master, "node1", started, stack="ana-main")
    assert 1 <= len(applies) <= 5, [e.data.get("jid") for e in applies]
    for event in applies:
        assert event.data["retcode"] == 0, event.data.get("return")
        assert "is running as PID" not in str(event.data.get("return"))


def test_an_invalid_edit_keeps_the_container_and_explains(master, minions, dockerds, cluster_storage):
    node1 = dockerds["node1"]
    before = container_attrs(node1, "ana-main")
    path = settings_dir(cluster_storage, "ana.novak@example.org") / "ana-main.yml"
    report = path.parent / "ana-main.deploy"
    path.write_text("ana-main:\n  SHM_SIZE: 900t\n")
    assert wait_for(lambda: "'900t' is more than the cluster maximum" in report.read_text())
    after = container_attrs(node1, "ana-main")
    assert after["Id"] == before["Id"] and after["State"]["Running"]
    assert "NOT applied" in report.read_text()


def test_writes_beside_the_settings_trigger_nothing(master, minions, dockerds, cluster_storage, event_listener):
    folder = settings_dir(cluster_storage, "ana.novak@example.org")
    (folder / "logs").mkdir(exist_ok=True)
    time.sleep(SETTLE)  # events of an earlier test's edit are still on their way
    started = time.time()
    for name in ("ana-main.status", "ana-main.env-backup", "ana-main.deploy", "logs/node1.log", "notes.yml"):
        (folder / name).write_text("touched\n")
    time.sleep(4 + 2)
    assert not event_listener.get_events([(master.id, "salt/beacon/*/ccc_settings/*")], after_time=started)


def test_a_stack_that_may_not_run_here_causes_no_apply_here(master, minions, dockerds, cluster_storage, event_listener):
    folder = settings_dir(cluster_storage, "cene.zupan@example.org")
    folder.mkdir(parents=True, exist_ok=True)
    time.sleep(SETTLE)
    started = time.time()
    (folder / "cene-thesis.yml").write_text("cene-thesis:\n  SHM_SIZE: 1g\n")
    time.sleep(6)
    for node in ("node1", "node2"):
        assert not event_listener.get_events([(master.id, f"salt/beacon/{node}/ccc_settings/*")], after_time=started)
        assert not apply_returns(event_listener, master, node, started, stack="cene-thesis")


def test_an_edit_made_while_the_minion_is_down_is_applied_after_it_starts(master, minions, dockerds, cluster_storage):
    node2 = dockerds["node2"]
    minions["node2"].terminate()
    path = settings_dir(cluster_storage, "bor.kralj@example.org") / "bor-main.yml"
    path.write_text("bor-main:\n  DEPLOYMENT_NODES: [node2]\n  SHM_SIZE: 5g\n")
    time.sleep(3)
    assert shm_of(node2, "bor-main") != 5 * 1024**3
    minions["node2"].start()
    assert wait_for(lambda: shm_of(node2, "bor-main") == 5 * 1024**3, timeout=120)
