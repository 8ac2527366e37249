"""An admin adds a container to the site's pillar on the master and does nothing else: the
master's pillar watch (``ccc.pillar_watch`` on its schedule) refreshes the pillar of the nodes
whose ``ccc`` pillar changed and reconciles them, so the container runs on its node within a
minute and that node's settings beacon watches the new container's settings file (the user's
first edit is applied). The other containers are left as they were. When the admin takes the
container out of pillar again, it is removed the same way."""

import time

import pytest
import yaml

from support import site

from .test_redeploy import EDIT_TIMEOUT, SETTLE, settings_dir, shm_of, wait_for

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
