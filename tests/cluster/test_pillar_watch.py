"""An admin adds a container to the site's pillar on the master and does nothing else: the
master's pillar watch (``ccc.pillar_watch`` on its schedule) refreshes the pillar of the nodes
whose ``ccc`` pillar changed and reconciles them, so the container runs on its node within a
minute and that node's settings beacon watches the new container's settings file (the user's
first edit is applied). The other containers are left as they were. When the admin takes the
container out of pillar again, it is removed the same way. A user's edit goes by the fast
redeploy while the nodes' pillar is current, and by a state run that compiles the pillar while
an admin's edit is not yet acted on."""

import json
import pathlib
import time

import pytest
import yaml

from support import site

import ccc_pillar_watch
import ccc_redeploy
from .test_redeploy import EDIT_TIMEOUT, SETTLE, apply_returns, settings_dir, shm_of, wait_for

pytestmark = pytest.mark.docker

GIB = 1024**3
# The chain's budget: the watch's interval (scripts/master_config.py, 20 s), the refresh, a full
# reconcile already in flight on the node (the new one waits for it), the node's share of the
# rate limit (full reconciles of a node share one: REDEPLOY_LIMITS' window, 15 s here) and one
# full apply; on CI's loaded two cores that passed 60 s once.
REACH_TIMEOUT = 120
EXTRA = {"STACK_NAME": "ana-extra", "USER_EMAIL": "ana.novak@example.org",
         "CONTAINER_IMAGE": "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1", "DEPLOYMENT_NODES": ["node1"]}


def _names(daemon):
    """Container name -> id on one engine, from one listing (the SDK's ``containers.list`` inspects
    each container after listing, and one a swap removes in between fails it with 404)."""
    return {entry["Names"][0].lstrip("/"): entry["Id"] for entry in daemon.client().api.containers(all=True)}


def _container_ids(daemons):
    """Container name -> id per node; a swap still in flight (``.ccc-new``/``.ccc-old``) counts as none."""
    ids = {node: _names(daemon) for node, daemon in daemons.items()}
    if any(".ccc-" in name for names in ids.values() for name in names):
        return None
    return ids


def test_a_container_added_to_pillar_runs_on_its_node_and_its_file_is_watched(
        master, minions, dockerds, cluster_storage, overrides_root):
    node1 = dockerds["node1"]
    # The admin's file: the site's containers.sls (this pillar root comes first, so it shadows the sample's).
    containers_sls = overrides_root / "site" / "containers.sls"
    sample = yaml.safe_load((site.SAMPLE_SITE / "containers.sls").read_text())
    time.sleep(SETTLE)  # redeploys of earlier tests' edits are over
    before = wait_for(lambda: _container_ids(dockerds), interval=0.5)
    assert before, "a swap of an earlier test did not finish"
    try:
        containers_sls.write_text(yaml.safe_dump({"ccc": {"containers": sample["ccc"]["containers"] + [EXTRA]}}))
        edited = time.monotonic()
        assert wait_for(lambda: shm_of(node1, "ana-extra"), timeout=REACH_TIMEOUT, interval=0.5), \
            "a container added to pillar was not deployed on its node without a manual pillar refresh"
        print(f"pillar edit -> container running on node1: {time.monotonic() - edited:.1f} s")
        # node1's in-memory pillar is the new one: its beacon watches the new settings file
        time.sleep(SETTLE)
        path = settings_dir(cluster_storage, "ana.novak@example.org") / "ana-extra.yml"
        path.write_text("ana-extra:\n  SHM_SIZE: 3g\n")
        assert wait_for(lambda: shm_of(node1, "ana-extra") == 3 * GIB, timeout=EDIT_TIMEOUT), \
            "node1's beacon does not watch the settings file of the container added to pillar"
        after = wait_for(lambda: _container_ids(dockerds), interval=0.5)
        for node, ids in before.items():
            assert {name: after[node].get(name) for name in ids} == ids, f"{node}'s other containers were recreated"
    finally:
        containers_sls.unlink()
    assert wait_for(lambda: "ana-extra" not in _names(node1),
                    timeout=REACH_TIMEOUT, interval=0.5), \
        "the container taken out of pillar was not removed as an orphan"


def _pillar_current(master, nodes=("node1", "node2")):
    """Whether the master would send the fast redeploy to ``nodes`` now (its own rule, on its
    pillar watch's record and the pillar files as they are)."""
    record = pathlib.Path(master.config["cachedir"]) / "ccc-pillar-watch.json"
    seen = json.loads(record.read_text()) if record.exists() else {}
    files = ccc_pillar_watch.file_map(ccc_pillar_watch.watched_roots(master.config))
    return ccc_pillar_watch.holds_current(seen, files, list(nodes), time.time())


def test_an_edit_while_the_nodes_pillar_is_current_is_applied_by_the_fast_redeploy(
        master, minions, dockerds, cluster_storage, event_listener):
    node1 = dockerds["node1"]
    path = settings_dir(cluster_storage, "ana.novak@example.org") / "ana-main.yml"
    time.sleep(SETTLE)  # redeploys of earlier tests' edits are over
    assert wait_for(lambda: _pillar_current(master), timeout=REACH_TIMEOUT, interval=0.5)
    started = time.time()
    path.write_text("ana-main:\n  SHM_SIZE: 3g\n")
    assert wait_for(lambda: shm_of(node1, "ana-main") == 3 * GIB)
    returned = wait_for(lambda: apply_returns(event_listener, master, "node1", started, stack="ana-main"))
    assert [event.data["fun"] for event in returned] == [ccc_redeploy.FAST_FUN]
    assert returned[0].data["retcode"] == 0 and returned[0].data["return"]["success"] is True
    assert "result: recreated with the new settings" in (path.parent / "ana-main.deploy").read_text()


def test_a_user_edit_right_after_an_admin_edit_is_applied_with_the_new_pillar(
        master, minions, dockerds, cluster_storage, overrides_root, event_listener):
    """The admin disables ana-main; its user saves a new value a moment later, before the pillar
    watch has run. The master sends the state run that compiles the new pillar (not the fast
    redeploy on the node's old pillar in memory): the container is removed, never recreated
    with the new value first."""
    node1 = dockerds["node1"]
    containers_sls = overrides_root / "site" / "containers.sls"
    sample = yaml.safe_load((site.SAMPLE_SITE / "containers.sls").read_text())["ccc"]["containers"]
    path = settings_dir(cluster_storage, "ana.novak@example.org") / "ana-main.yml"
    report = path.parent / "ana-main.deploy"
    time.sleep(SETTLE)
    assert wait_for(lambda: _pillar_current(master), timeout=REACH_TIMEOUT, interval=0.5)  # the fast path is open
    ran_with_new_value = []

    def removed():
        if shm_of(node1, "ana-main") == 5 * GIB:
            ran_with_new_value.append(time.time())
        return "ana-main" not in _names(node1) and "removed: the administrators disabled this container" in report.read_text()

    try:
        disabled = [dict(entry, DISABLED=True) if entry["STACK_NAME"] == "ana-main" else entry for entry in sample]
        containers_sls.write_text(yaml.safe_dump({"ccc": {"containers": disabled}}))
        edited = time.time()
        path.write_text("ana-main:\n  SHM_SIZE: 5g\n")
        assert wait_for(removed, timeout=REACH_TIMEOUT, interval=0.05), "the disabled container was not removed"
        assert not ran_with_new_value, "the edit was applied with the pillar from before the admin's edit"
        funs = {event.data["fun"] for event in apply_returns(event_listener, master, "node1", edited, stack="ana-main")}
        assert ccc_redeploy.FAST_FUN not in funs
        # the watch has seen the disabled entry (else, the file taken back before it ran, it would
        # see no change at all and leave ana-main to the periodic reconcile)
        assert wait_for(lambda: _pillar_current(master), timeout=REACH_TIMEOUT, interval=0.5)
    finally:
        containers_sls.unlink()
    assert wait_for(lambda: shm_of(node1, "ana-main") == 5 * GIB, timeout=REACH_TIMEOUT, interval=0.5), \
        "ana-main did not come back once the admin enabled it again"
