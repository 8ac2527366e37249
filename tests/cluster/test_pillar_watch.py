"""An admin adds a container to pillar on the master and does nothing else: the master's pillar
watch (``ccc.pillar_watch`` on its schedule) refreshes the pillar of the node concerned and
reconciles it, so the container runs there within a minute, and that node's settings beacon
watches the new container's settings file (the user's first edit is applied). When the admin
takes the container out of pillar again, it is removed the same way; the other node is left
alone throughout."""

import time

import yaml

import pytest

from support import site

from .test_redeploy import EDIT_TIMEOUT, SETTLE, settings_dir, shm_of, state_apply_returns, wait_for

pytestmark = pytest.mark.docker

GIB = 1024**3
# the watch's interval (scripts/master_config.py) + refresh + one full apply of the node
REACH_TIMEOUT = 60


def _with_container(node_sls_text, container):
    data = yaml.safe_load(node_sls_text)
    containers = yaml.safe_load((site.SAMPLE_SITE / "containers.sls").read_text())["ccc"]["containers"]
    data["ccc"]["containers"] = containers + [container]
    return yaml.safe_dump(data)


def _full_reconciles(returns):
    """Full ``state.apply containers`` runs (a settings redeploy names its stack in pillar)."""
    def stack_of(event):
        kwargs = next((arg for arg in event.data.get("fun_args") or [] if isinstance(arg, dict)), {})
        return (kwargs.get("pillar") or {}).get("containers")
    return [event for event in returns if not stack_of(event)]


def test_a_container_added_to_pillar_runs_on_its_node_and_its_file_is_watched(
        master, minions, dockerds, cluster_storage, overrides_root, event_listener):
    node1 = dockerds["node1"]
    node_sls = overrides_root / "site" / "nodes" / "node1.sls"
    good = node_sls.read_text()
    extra = {"STACK_NAME": "ana-extra", "USER_EMAIL": "ana.novak@example.org",
             "CONTAINER_IMAGE": "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1", "DEPLOYMENT_NODES": ["node1"]}
    started = time.time()
    try:
        node_sls.write_text(_with_container(good, extra))
        edited = time.monotonic()
        assert wait_for(lambda: shm_of(node1, "ana-extra"), timeout=REACH_TIMEOUT, interval=0.5), \
            "a container added to node1's pillar was not deployed without a manual refresh"
        print(f"pillar edit -> container running on node1: {time.monotonic() - edited:.1f} s")
        # node1's in-memory pillar is the new one: its beacon watches the new settings file
        time.sleep(SETTLE)
        path = settings_dir(cluster_storage, "ana.novak@example.org") / "ana-extra.yml"
        path.write_text("ana-extra:\n  SHM_SIZE: 3g\n")
        assert wait_for(lambda: shm_of(node1, "ana-extra") == 3 * GIB, timeout=EDIT_TIMEOUT), \
            "node1's beacon does not watch the settings file of the container added to pillar"
        # node2's pillar did not change (node1's file only): no reconcile there
        assert not _full_reconciles(state_apply_returns(event_listener, master, "node2", started))
    finally:
        node_sls.write_text(good)
    assert wait_for(lambda: shm_of(node1, "ana-extra") is None and "ana-extra" not in
                    {c.name for c in node1.client().containers.list(all=True)}, timeout=REACH_TIMEOUT, interval=0.5), \
        "the container taken out of pillar was not removed as an orphan"
