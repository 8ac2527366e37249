"""Render checks: the containers SLS renders against sample-pillar/ for every sample node
(masterless salt-call, no Docker needed), and the containers=/users= filters shape it."""

import pytest

from support.site import SaltNode

SAMPLE_STACKS = ["ana-main", "ana-jupyter", "bor-main", "cene-thesis", "dara-course", "dara-old"]


@pytest.mark.parametrize("node", ["node1", "node2", "node3"])
def test_containers_sls_renders_for_every_sample_node(tmp_path, node):
    salt = SaltNode(tmp_path, node, "unix:///nonexistent.sock", tmp_path / "storage")
    rendered, code = salt.salt_call("state.show_sls", "containers")
    assert code == 0, rendered
    assert isinstance(rendered, dict), rendered
    for stack in SAMPLE_STACKS:
        assert "running" in rendered[f"ccc-container-{stack}"]["ccc_container"]
    for network in ("lab-unrestricted", "student-restricted", "claims"):
        assert f"ccc-cluster-docker-network-{network}" in rendered
        assert "present" in rendered[f"ccc-cluster-docker-network-{network}"]["ccc_docker_network"]
    assert "ccc-containers-orphans" in rendered
    assert "ccc-containers-usage-accounting" in rendered
    assert "ccc-containers-summary" in rendered


def test_filters_select_a_union_and_skip_orphan_removal_and_accounting(tmp_path):
    """A filtered run (the redeploy of one stack) leaves the orphans and the usage accounting
    schedule to the unfiltered runs; the networks its containers join are still checked."""
    salt = SaltNode(tmp_path, "node1", "unix:///nonexistent.sock", tmp_path / "storage")
    rendered, _ = salt.salt_call(
        "state.show_sls", "containers", 'pillar={"containers": "ana-main", "users": "dara.kos@example.org"}'
    )
    stacks = sorted(key[len("ccc-container-"):] for key in rendered if key.startswith("ccc-container-"))
    assert stacks == ["ana-main", "dara-course", "dara-old"]
    assert "ccc-containers-orphans" not in rendered
    assert "ccc-containers-usage-accounting" not in rendered
    assert "ccc-cluster-docker-network-claims" in rendered
    assert "ccc-containers-summary" in rendered


def test_unknown_filter_name_is_reported_in_the_summary(tmp_path):
    salt = SaltNode(tmp_path, "node1", "unix:///nonexistent.sock", tmp_path / "storage")
    rendered, _ = salt.salt_call("state.show_sls", "containers", 'pillar={"containers": "no-such-box"}')
    assert not [key for key in rendered if key.startswith("ccc-container-")]
    summary_args = {k: v for item in rendered["ccc-containers-summary"]["ccc_container"] if isinstance(item, dict) for k, v in item.items()}
    assert summary_args["errors"] == ["containers filter: no container named 'no-such-box'"]


def test_every_node_gets_the_periodic_reconcile_schedule(tmp_path):
    salt = SaltNode(tmp_path, "node2", "unix:///nonexistent.sock", tmp_path / "storage")
    schedule, _ = salt.salt_call("pillar.get", "schedule", "unmask=True")
    job = schedule["ccc-containers-reconcile"]
    assert job["function"] == "state.apply" and job["args"] == ["containers"]
    assert job["kwargs"] == {"queue": True} and job["minutes"] == 5
