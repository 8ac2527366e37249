"""The Portainer agent's swarm mode (``ccc:docker:portainer_agent:swarm``) on two systemd test nodes
in a swarm made as tests/nodes/test_swarm.py makes it (``state.apply cluster``: the leader inits,
the worker joins with the token from its GPG secrets). With swarm mode on, the worker applying
first finds no agents' overlay, keeps its agent running and says pending: it makes none. The
leader's apply creates the overlay (attachable, internal, labelled, encrypted where the kernel has
ESP) and attaches its agent as ``<node>_agent``; the worker's next apply attaches its agent. A
container on the overlay resolves both agents by those names (``getent hosts``). Second applies
change nothing. Switched off, each agent leaves the overlay and the leader removes it.

The agent image cannot be pulled here: ``ccc-test/tiny:1`` (busybox that sleeps) is tagged under
the configured name, as in tests/nodes/test_portainer_agent.py, so what is checked is the
container's networks, aliases and environment, not the agent program."""

import json
import subprocess

import pytest

from support import secrets
from support.sysnode import failed as _failed, changed as _changed

from .test_swarm import ESP

pytestmark = pytest.mark.docker

LEADER, WORKER = "pswarm-a", "pswarm-b"
AGENT = "portainer-agent"
IMAGE = "portainer/agent:2.21-ccc-test"
OVERLAY = "portainer-agent-network"
STATE = "ccc-cluster-swarm-portainer-agent"


def _site(leader_ip, agent=False, swarm_mode=False):
    return {"ccc": {
        "only_roles": "docker,swarm",
        "roles": {"swarm": True},
        "cluster": {"networks": {"lab-unrestricted": {"subnet": "172.31.0.0/24", "gateway": "172.31.0.1",
                                                      "bridge_name": "ccc-lab"}}},
        "docker": {"registries": [], "nvidia_toolkit": {"enabled": False},
                   "portainer_agent": {"enabled": agent, "image": IMAGE, "swarm": swarm_mode}},
        "containers": [],
        "swarm": {"leader": LEADER, "leader_addr": leader_ip, "encrypted": ESP},
    }}


def _apply(node):
    return node.salt_call("state.apply", "cluster", check=False).states()


def _write_site(node, **options):
    node.write_pillar("site/init.sls", json.dumps(_site(node.leader_ip, **options)))


@pytest.fixture(scope="module")
def nodes(sysnodes, tmp_path_factory):
    made = {name: sysnodes(name) for name in (LEADER, WORKER)}
    leader_ip = made[LEADER].ip()
    for name, node in made.items():
        node.leader_ip = leader_ip
        node.add_apt_source()
        _write_site(node)
        node.write_pillar(f"site/nodes/{name}.sls", json.dumps({"ccc": {"swarm": {"advertise_addr": node.ip()}}}))
        node.write_pillar("site/secrets.sls", "{}\n")
        node.salt_call("saltutil.sync_all")
    leader, worker = made[LEADER], made[WORKER]
    assert _failed(_apply(leader)) == {}
    token = leader.exec("docker swarm join-token -q worker").stdout.strip()
    worker.keyring = tmp_path_factory.mktemp("pswarm-gpg") / "gpgkeys"
    secrets.make_keyring(worker.keyring)
    worker.import_pillar_key(worker.keyring, tmp_path_factory.mktemp("pswarm-key"))
    worker.write_pillar("site/secrets.sls", secrets.secrets_sls(worker.keyring, {"swarm": {"worker_token": token}}))
    secrets.stop_agent(worker.keyring)
    assert _failed(_apply(worker)) == {}
    for image in ("ccc-test/tiny:1", "ccc-test/sshd:1"):
        saved = subprocess.run(["docker", "save", image], capture_output=True, check=True).stdout
        for node in made.values():
            subprocess.run(["docker", "exec", "-i", node.container, "docker", "load"], input=saved,
                           capture_output=True, check=True)
    for node in made.values():
        node.exec(["docker", "tag", "ccc-test/tiny:1", IMAGE])
    return made


def _overlay(node):
    found = node.exec(["docker", "network", "inspect", OVERLAY], check=False)
    return json.loads(found.stdout)[0] if found.returncode == 0 else None


def _agent(node):
    return json.loads(node.exec(["docker", "inspect", AGENT]).stdout)[0]


@pytest.fixture(scope="module")
def swarm_mode(nodes):
    """Agents with swarm mode on: the worker applies first, then the leader, the worker, both again."""
    for node in nodes.values():
        _write_site(node, agent=True, swarm_mode=True)
    runs = {"worker first": _apply(nodes[WORKER])}
    runs["leader overlay after worker"] = _overlay(nodes[LEADER])
    for label, name in (("leader", LEADER), ("worker", WORKER), ("leader again", LEADER), ("worker again", WORKER)):
        runs[label] = _apply(nodes[name])
    return runs


def test_the_worker_makes_no_overlay_and_says_pending(nodes, swarm_mode):
    first = swarm_mode["worker first"]
    assert _failed(first) == {}, first
    assert "pending" in first[STATE]["comment"] and first[STATE]["changes"] == {}, first[STATE]
    assert swarm_mode["leader overlay after worker"] is None
    assert _agent(nodes[WORKER])["State"]["Running"]  # the agent runs meanwhile, on its bridge


def test_the_leader_creates_the_overlay_and_both_agents_join_it_as_node_agent(nodes, swarm_mode):
    leader_run = swarm_mode["leader"]
    assert _failed(leader_run) == {}, leader_run
    assert leader_run[STATE]["changes"] == {"attached": AGENT, "aliases": [f"{LEADER}_agent", "ccc-portainer-agents"],
                                            "network_created": OVERLAY}
    worker_run = swarm_mode["worker"]
    assert _failed(worker_run) == {} and "network_created" not in worker_run[STATE]["changes"], worker_run[STATE]
    net = _overlay(nodes[LEADER])
    assert (net["Driver"], net["Scope"], net["Attachable"], net["Internal"]) == ("overlay", "swarm", True, True)
    assert net["Labels"] == {"ccc.swarm-agent-overlay": "portainer"}
    assert ("encrypted" in net["Options"]) is ESP, net["Options"]
    for name, node in nodes.items():
        attrs = _agent(node)
        assert f"{name}_agent" in attrs["NetworkSettings"]["Networks"][OVERLAY]["Aliases"]
        assert "bridge" in attrs["NetworkSettings"]["Networks"]  # still published on its address
        assert "AGENT_CLUSTER_ADDR=ccc-portainer-agents" in attrs["Config"]["Env"]
    for label in ("leader again", "worker again"):
        assert _failed(swarm_mode[label]) == {} and _changed(swarm_mode[label]) == {}, swarm_mode[label]


def test_a_container_on_the_overlay_resolves_each_agent_by_its_node_agent_name(nodes, swarm_mode):
    for here in nodes.values():
        addresses = {}
        for name in (LEADER, WORKER):
            found = here.exec(["docker", "run", "--rm", "--network", OVERLAY, "--entrypoint", "getent",
                               "ccc-test/sshd:1", "hosts", f"{name}_agent"], check=False)
            assert found.returncode == 0, found.stdout + found.stderr
            addresses[name] = found.stdout.split()[0]
        assert addresses[LEADER] != addresses[WORKER]
        own = _agent(here)["NetworkSettings"]["Networks"][OVERLAY]["IPAddress"]
        assert own in addresses.values()


def test_switched_off_the_agents_leave_and_the_leader_removes_the_overlay(nodes, swarm_mode):
    for node in nodes.values():
        _write_site(node, agent=True, swarm_mode=False)
    worker_run = _apply(nodes[WORKER])
    assert _failed(worker_run) == {}, worker_run
    leader_run = _apply(nodes[LEADER])
    assert _failed(leader_run) == {}, leader_run
    assert leader_run[STATE]["changes"].get("overlay") == "removed", leader_run[STATE]
    assert _overlay(nodes[LEADER]) is None
    for node in nodes.values():
        attrs = _agent(node)
        assert OVERLAY not in attrs["NetworkSettings"]["Networks"]
        assert not any(env.startswith("AGENT_CLUSTER_ADDR=") for env in attrs["Config"]["Env"] or [])
    again = _apply(nodes[LEADER])
    assert _changed(again) == {} and _failed(again) == {}, again
