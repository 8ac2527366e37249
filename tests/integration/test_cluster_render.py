"""`state.apply cluster test=True` for every sample node, masterless on this machine (nothing is
applied; the node's Docker engine is a private test dockerd of this module's own, which no
cluster test restarts meanwhile): every role of the node renders and nothing fails, the roles
come in the documented order, and ``ccc:roles``/``ccc:only_roles`` decide which run, as
``ccc_cluster.roles`` says."""

import os

import pytest

from support import site
from support.nodes import node_dockerd

import ccc_roles  # noqa: E402  (site puts _utils on the path)

pytestmark = pytest.mark.docker

NODES = ("node1", "node2", "node3")
ORDER = ["fail2ban", "netplan", "nvidia", "docker", "frp_client", "cachefilesd", "nfs_storage", "monitoring_agent", "patroller", "inotify", "sshd_hostkeys", "timezone"]
# Roles the sample switches on for one node only (node1's ZFS scratch pool, node2's chassis fans).
NODE_ROLES = {"node1": ["zfs"], "node2": ["superfan_gpu"]}


def _order(node):
    """ORDER plus the node's own roles, in the roles' order (ccc_roles.ORDER)."""
    wanted = set(ORDER) | set(NODE_ROLES.get(node, []))
    return [role for role in ccc_roles.ORDER if role in wanted]


@pytest.fixture(scope="module")
def dockerd():
    """The engine every run reads (test mode: nothing is made on it)."""
    return node_dockerd("render")


def _run(tmp_path, docker_url, node, extra=None, *args):
    # Every node's run talks to the same test dockerd: node1's network definitions for all.
    extra = site.deep_merge({"cluster": {"networks": site.network_overrides("node1")}}, extra or {})
    salt_node = site.SaltNode(tmp_path / "work", node, docker_url, tmp_path / "storage", extra_ccc=extra)
    output, _ = salt_node.salt_call("state.apply", "cluster", "test=True", *args, check=False)
    assert isinstance(output, dict), output
    return sorted(output.values(), key=lambda state: state["__run_num__"])


def _roles(states):
    seen = []
    for state in states:
        sls = state.get("__sls__") or ""
        role = sls.split(".")[1] if sls.startswith("cluster.") else None
        if role in ccc_roles.ORDER and role not in seen:  # cluster.agents is shared, not a role
            seen.append(role)
    return seen


@pytest.mark.parametrize("node", NODES)
def test_every_sample_node_renders_every_role_in_order_and_nothing_fails(tmp_path, dockerd, node):
    states = _run(tmp_path, dockerd.url, node)
    assert [f"{s['__id__']}: {s['comment']}" for s in states if s["result"] is False] == []
    assert _roles(states) == _order(node)  # the sample switches the driver role on for its GPU nodes
    assert states[-1]["__id__"] == "ccc-cluster-roles-summary"
    assert states[-1]["name"].startswith(f"cluster roles applied: {', '.join(_order(node))}; cleaned: none")


def test_only_roles_and_an_absent_role_on_the_command_line(tmp_path, dockerd):
    states = _run(tmp_path, dockerd.url, "node1", {"roles": {"timezone": "absent"}, "only_roles": "inotify,timezone"})
    assert _roles(states) == ["inotify", "timezone"]
    assert [s["__sls__"] for s in states if s["__id__"].startswith("ccc-cluster-timezone")] == ["cluster.timezone.clean"] * \
        len([s for s in states if s["__id__"].startswith("ccc-cluster-timezone")])
    skipped = len(ccc_roles.ORDER) - 2
    assert states[-1]["name"] == f"cluster roles applied: inotify; cleaned: timezone; skipped: {skipped}"
    # the test host is a Docker container (/.dockerenv): the inotify role says what that means
    container = [s["comment"] for s in states if s["__id__"] == "ccc-cluster-inotify-container"]
    assert not os.path.exists("/.dockerenv") or container[0].startswith("this node is a docker container")


def test_an_unknown_role_fails_the_run_and_names_the_roles(tmp_path):
    salt_node = site.SaltNode(tmp_path / "work", "node1", "unix:///nonexistent.sock", tmp_path / "storage",
                              extra_ccc={"only_roles": "docker,frp"})
    output, returncode = salt_node.salt_call("state.apply", "cluster", "test=True", check=False)
    assert returncode != 0
    text = "\n".join(output) if isinstance(output, list) else str(output)
    assert f"unknown role 'frp'; the roles are: {', '.join(ccc_roles.ORDER)}" in text
    assert "fail2ban, mellanox, netplan, zfs, nvidia, docker, swarm, frp_client" in text


def test_the_originals_role_names_in_only_roles_say_what_they_run(tmp_path):
    salt_node = site.SaltNode(tmp_path / "work", "node1", "unix:///nonexistent.sock", tmp_path / "storage",
                              extra_ccc={"only_roles": "compute-container-nightwatch,timezone"})
    output, returncode = salt_node.salt_call("state.apply", "cluster", "test=True", check=False)
    assert returncode == 0, output
    states = sorted(output.values(), key=lambda state: state["__run_num__"])
    assert _roles(states) == ["timezone"]
    notes = [s["name"] for s in states if s["__id__"].startswith("ccc-cluster-roles-note-")]
    assert notes == [f"only_roles compute-container-nightwatch runs nothing: "
                     f"{ccc_roles.RETIRED['compute-container-nightwatch']}"]


def test_the_swarm_role_in_test_mode_on_the_leader_and_on_workers(tmp_path, dockerd):
    """Swarm on (the sample keeps it off), test=True against a test dockerd in no swarm: the
    leader would initialise it and make an overlay per active sample stack; a worker would join
    with the token from secrets (never shown); one without its token fails, saying where it goes."""
    on = {"roles": {"swarm": True}, "only_roles": "swarm"}
    leader = {s["__id__"]: s for s in _run(tmp_path / "leader", dockerd.url, "node1", on)}
    member, overlays = leader["ccc-cluster-swarm-member"], leader["ccc-cluster-swarm-overlays"]
    assert (member["result"], member["comment"]) == (None, "would: node1 initialises the swarm (it is ccc:swarm:leader)")
    assert overlays["result"] is None
    assert overlays["changes"] == {"created": ["overlay-ana-main", "overlay-ana-jupyter", "overlay-bor-main",
                                               "overlay-cene-thesis", "overlay-dara-course"]}  # dara-old is DISABLED
    token = "SWMTKN-1-render-test-worker-token"
    worker = {s["__id__"]: s for s in _run(tmp_path / "worker", dockerd.url, "node2",
                                           dict(on, secrets={"swarm": {"worker_token": token}}))}
    assert worker["ccc-cluster-swarm-member"]["result"] is None
    assert worker["ccc-cluster-swarm-member"]["comment"] == "would: node2 joins the swarm at 192.168.10.11:2377 as a worker"
    assert worker["ccc-cluster-swarm-overlays"]["comment"] == "overlays are created by the swarm leader node1"
    assert token not in str(worker)
    # the sample's secrets hold a worker token only: a node that is to join as a manager lacks its token
    missing = {s["__id__"]: s for s in _run(tmp_path / "missing", dockerd.url, "node3",
                                            dict(on, swarm={"manager": True}))}
    assert missing["ccc-cluster-swarm-member"]["result"] is False
    assert "secret ccc:secrets:swarm:manager_token is not in this node's pillar" in missing["ccc-cluster-swarm-member"]["comment"]
