"""The Portainer agent of the docker role (``salt/cluster/docker/portainer.sls``) applied for real on
a systemd test node: it never gets docker.sock, but its own Docker API proxy (``ccc_docker_api``,
haproxy under a systemd socket unit). By default (``docker_api: read-only``) the agent's own start
(info, its container, its network) and the dashboard's reads pass, events stream, and every write
or leaking read from inside the agent's container is answered 403 and changes nothing
(``docker_api_support``); the volumes folder is bound read-only. ``docker_api: full`` is the
admin's explicit choice of a managing agent: writes then pass (host root for whoever controls
Portainer, as docs/pillar.md says). Switched off, the agent and its proxy are gone.

The agent image cannot be pulled here: ``ccc-test/tiny:1`` (busybox that sleeps) is tagged under
the configured name, so what is checked is the container and its API, not the agent program."""

import json
import subprocess

import pytest

from support.sysnode import failed as _failed

from . import docker_api_support as api

pytestmark = pytest.mark.docker

NODE = "portainer"
NAME = "portainer-agent"
IMAGE = "portainer/agent:2.21-ccc-test"
SECRET = "agent-secret-4b7e"


def _pillar(enabled=True, docker_api="read-only"):
    return {"ccc": {
        "roles": {"docker": True},
        "only_roles": "docker",
        "cluster": {"networks": {"lab-unrestricted": {"subnet": "172.31.0.0/24", "gateway": "172.31.0.1",
                                                      "bridge_name": "ccc-lab"}}},
        # a plain value stands in for the GPG pillar (tests/nodes/test_frp_client.py decrypts real ones)
        "secrets": {"portainer": {"agent_secret": SECRET}},
        "docker": {"nvidia_toolkit": {"enabled": False}, "registries": [],
                   "portainer_agent": {"enabled": enabled, "image": IMAGE, "docker_api": docker_api}},
    }}


def _apply(node):
    return node.salt_call("state.apply", "cluster", check=False).states()


@pytest.fixture(scope="module")
def node(sysnodes):
    made = sysnodes(NODE)
    made.add_apt_source()
    made.write_pillar(f"site/nodes/{NODE}.sls", json.dumps(_pillar(enabled=False)))
    made.salt_call("saltutil.sync_all")
    assert _failed(_apply(made)) == {}  # the engine first
    saved = subprocess.run(["docker", "save", "ccc-test/tiny:1"], capture_output=True, check=True).stdout
    subprocess.run(["docker", "exec", "-i", made.container, "docker", "load"], input=saved, capture_output=True,
                   check=True)
    made.exec(["docker", "tag", "ccc-test/tiny:1", IMAGE])
    made.exec(["docker", "run", "-d", "--name", "bystander", "--network", "lab-unrestricted", "ccc-test/tiny:1"])
    return made


@pytest.fixture(scope="module")
def applied(node):
    node.write_pillar(f"site/nodes/{NODE}.sls", json.dumps(_pillar()))
    states = _apply(node)
    assert _failed(states) == {}, _failed(states)
    return states


def _inspect(node, name):
    return json.loads(node.exec(["docker", "inspect", name]).stdout)[0]


def test_the_agent_gets_a_read_only_proxy_and_read_only_volumes(node, applied):
    changes = applied["ccc-cluster-docker-portainer-agent"]["changes"]
    assert changes["created"] == NAME
    assert f"ccc-docker-api@{NAME}.socket enabled and started" in changes["docker api proxy"]
    attrs = _inspect(node, NAME)
    assert sorted(attrs["HostConfig"]["Binds"]) == [f"/run/ccc-docker-api/{NAME}.sock:/var/run/docker.sock:ro",
                                                   "/var/lib/docker/volumes:/var/lib/docker/volumes:ro"]
    api.assert_no_engine_socket(node, NAME)
    assert "profile portainer-read-only" in node.exec(["head", "-1", f"/etc/ccc-docker-api/{NAME}.cfg"]).stdout


def test_the_agents_start_and_the_dashboards_reads_pass(node, applied):
    attrs = _inspect(node, NAME)
    network = attrs["NetworkSettings"]["Networks"]["bridge"]["NetworkID"]
    bystander = _inspect(node, "bystander")["Id"]
    api.assert_needs_pass(node, NAME, [
        ("GET", "/_ping"), ("GET", "/v1.41/version"), ("GET", "/v1.41/info"),
        ("GET", f"/v1.41/containers/{attrs['Config']['Hostname']}/json"), ("GET", f"/v1.41/networks/{network}"),
        ("GET", "/v1.41/containers/json?all=1"), ("GET", f"/v1.41/containers/{bystander}/json"),
        ("GET", f"/v1.41/containers/{bystander}/top"), ("GET", "/v1.41/images/json"), ("GET", "/v1.41/networks"),
        ("GET", "/v1.41/volumes"), ("GET", "/v1.41/system/df")])
    event = api.event_through_proxy(node, NAME)
    assert (event["Type"], event["Action"]) == ("container", "create")


def test_attacks_from_inside_the_agent_are_refused_and_change_nothing(node, applied):
    api.assert_attacks_refused(node, NAME, _inspect(node, "bystander")["Id"])
    assert _inspect(node, "bystander")["State"]["Running"] is True


def test_a_second_apply_changes_nothing(node, applied):
    again = _apply(node)
    assert _failed(again) == {}
    assert {key: value["changes"] for key, value in again.items() if value["changes"]} == {}


def test_full_is_the_admins_explicit_choice_and_really_full(node, applied):
    node.write_pillar(f"site/nodes/{NODE}.sls", json.dumps(_pillar(docker_api="full")))
    states = _apply(node)
    assert _failed(states) == {}
    changes = states["ccc-cluster-docker-portainer-agent"]["changes"]
    assert changes["recreated"] == NAME and changes["differences"] == ["binds"]
    assert changes["docker api proxy"] == ["Docker API allowlist portainer-full written"]
    api.assert_no_engine_socket(node, NAME)  # still the proxy's socket, now passing every call
    made = api.probe(node, NAME, [("POST", "/v1.41/containers/create?name=made-by-portainer",
                                   {"Image": "ccc-test/tiny:1"})])[0]
    try:
        assert made["status"] == 201, made
    finally:
        node.exec(["docker", "rm", "-f", "made-by-portainer"], check=False)


def test_switched_off_the_agent_and_its_proxy_are_gone(node, applied):
    node.write_pillar(f"site/nodes/{NODE}.sls", json.dumps(_pillar(enabled=False)))
    states = _apply(node)
    assert _failed(states) == {}
    assert states["ccc-cluster-docker-portainer-agent"]["changes"] == {
        "removed": NAME, "docker api proxy removed": f"ccc-docker-api@{NAME}.socket"}
    assert node.exec("docker ps -a --format '{{.Names}}'").stdout.split() == ["bystander"]
    assert node.exec("ls -A /etc/ccc-docker-api; ls -A /run/ccc-docker-api", check=False).stdout.split() == []
