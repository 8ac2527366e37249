"""The Portainer agent's swarm mode, its rules (_utils/ccc_swarm.py) and the migration of the
original's overlay settings: when the agent is in swarm mode, the overlay it is made from (apart
from the stacks' overlays, so their prune never removes it), its names on the overlay, and the
Docker API calls its proxy passes in swarm mode. On real swarms: tests/nodes/test_swarm_portainer_agent.py."""

import pytest

import support.site  # noqa: F401  (puts _utils on the path)

from ccc_migrate import cluster as migrate_cluster  # noqa: E402  (support.site puts the checkout on the path)
import ccc_docker_api  # noqa: E402
import ccc_migrate_report  # noqa: E402
import ccc_swarm  # noqa: E402


@pytest.mark.parametrize("agent, role_on, expected", [
    ({"enabled": True, "swarm": True}, True, True),
    ({"enabled": "True", "swarm": "yes"}, True, True),
    ({"enabled": True, "swarm": True}, False, False),  # no swarm role on the node: the agent stays plain
    ({"enabled": False, "swarm": True}, True, False),
    ({"enabled": True, "swarm": False}, True, False),
    ({"enabled": True}, True, False),
    (None, True, False),
])
def test_swarm_mode_needs_the_agent_its_switch_and_the_swarm_role(agent, role_on, expected):
    assert ccc_swarm.agent_swarm_mode(agent, role_on) is expected


def test_the_agents_overlay_is_attachable_internal_encrypted_and_labelled_apart_from_the_stacks():
    made = ccc_swarm.agent_overlay_definition("portainer-agent-network")
    assert made == {"name": "portainer-agent-network", "driver": "overlay", "attachable": True, "internal": True,
                    "check_duplicate": True, "labels": {"ccc.swarm-agent-overlay": "portainer"},
                    "options": {"encrypted": ""}}
    assert ccc_swarm.agent_overlay_definition("x", encrypted=False)["options"] == {}
    summary = {"Name": made["name"], "Driver": "overlay", "Labels": made["labels"]}
    assert ccc_swarm.is_agent_overlay(summary)
    assert ccc_swarm.stack_of_overlay(made["name"], made["labels"]) is None  # never a stack's: never pruned as one
    assert not ccc_swarm.is_agent_overlay(dict(summary, Labels={}))  # one made by hand is not ours to remove
    assert not ccc_swarm.is_agent_overlay(dict(summary, Driver="bridge"))


def test_each_agent_is_named_node_agent_and_all_share_the_cluster_alias():
    assert ccc_swarm.agent_alias("gpu1") == "gpu1_agent"
    assert ccc_swarm.AGENT_CLUSTER_ALIAS not in (ccc_swarm.agent_alias("gpu1"), "localhost")


@pytest.mark.parametrize("path, allowed", [
    ("/v1.41/info", True), ("/v1.41/nodes", True), ("/nodes/abc", True), ("/services", True), ("/tasks", True),
    ("/v1.41/swarm", False), ("/swarm/unlockkey", False), ("/secrets", False), ("/configs", False),
])
def test_the_read_only_agent_reads_the_swarm_it_shows_but_never_its_join_tokens(path, allowed):
    """Swarm mode reads nodes, services and tasks; GET /swarm answers the join tokens (a worker or
    manager token lets anything join the swarm), /secrets and /configs the stacks' secrets."""
    import re
    patterns = [re.compile(f"^{ccc_docker_api.VERSION}/{entry}$") for entry in ccc_docker_api.PROFILES["portainer-read-only"]]
    assert any(p.match(path) for p in patterns) is allowed


def test_the_migration_maps_the_overlay_and_says_the_lock_file_is_not_needed():
    tree, report = {}, ccc_migrate_report.Report()
    for key, value in {"portainer_network_overlay": "agents-net", "portainer_network_lockfile": "/nfs/lock"}.items():
        assert migrate_cluster.map_var(key, value, tree, report, "cluster-vars.yml") is True
    assert tree == {"docker": {"portainer_agent": {"overlay": "agents-net"}}}
    lock = next(entry for entry in report.entries if entry["key"] == "portainer_network_lockfile")
    assert lock["status"] == "not_mapped" and "no lock file" in lock["reason"]


def _rendered(tmp_path, agent):
    from support.site import SaltNode
    salt = SaltNode(tmp_path, "node1", "unix:///nonexistent/ccc-swarm-agent.sock", tmp_path / "storage", extra_ccc={
        "roles": {"swarm": True}, "swarm": {"leader": "node1", "leader_addr": "10.0.0.1"},
        "docker": {"portainer_agent": agent}})
    docker, code = salt.salt_call("state.show_sls", "cluster.docker")
    assert code == 0, docker
    swarm, code = salt.salt_call("state.show_sls", "cluster.swarm")
    assert code == 0, swarm
    return _args(docker, "ccc-cluster-docker-portainer-agent"), _args(swarm, "ccc-cluster-swarm-portainer-agent")


def _args(rendered, state_id):
    return {k: v for item in next(iter(v for k, v in rendered[state_id].items() if not k.startswith("__")))
            if isinstance(item, dict) for k, v in item.items()}


def test_the_roles_render_the_agents_swarm_mode_on_and_off(tmp_path):
    container, overlay = _rendered(tmp_path / "on", {"enabled": True, "swarm": True, "overlay": "agents-net"})
    assert container["spec"]["env"] == {"AGENT_CLUSTER_ADDR": "ccc-portainer-agents"}
    assert container["spec"]["docker_api"] == "portainer-read-only"  # still behind its proxy, never the socket
    assert (overlay["name"], overlay["container"], overlay["wanted"]) == ("agents-net", "portainer-agent", True)
    container, overlay = _rendered(tmp_path / "off", {"enabled": True})
    assert container["spec"]["env"] == {}
    assert (overlay["name"], overlay["wanted"]) == ("portainer-agent-network", False)  # off: the agent leaves it
