"""The docker role's network rule against a real (test) dockerd (``ccc_docker_networks.ensure``):
a missing network is created, a changed definition recreates it while no container uses it, and
while one does the network is reported with its differences and its users and left exactly as
it is (never removed behind the containers' back)."""

import pytest

import support.site  # noqa: F401  (puts _utils on the path)

import ccc_docker_networks  # noqa: E402

pytestmark = pytest.mark.docker

NAME = "ccc-test-net-owner"
FIRST = {"subnet": "10.239.1.0/24", "gateway": "10.239.1.1", "bridge_name": "ccc-t-own"}
SECOND = {"subnet": "10.239.2.0/24", "gateway": "10.239.2.1", "bridge_name": "ccc-t-own"}
THIRD = {"subnet": "10.239.3.0/24", "gateway": "10.239.3.1", "bridge_name": "ccc-t-own", "internal": True}


def _subnet(client):
    return client.api.inspect_network(NAME)["IPAM"]["Config"][0]["Subnet"]


def test_created_recreated_while_unused_and_left_alone_while_in_use(node1_dockerd):
    client = node1_dockerd.client()
    for network in client.networks.list(names=[NAME]):
        for container in network.containers:
            container.remove(force=True)
        network.remove()
    try:
        assert ccc_docker_networks.ensure(client, NAME, FIRST)["action"] == "created"
        assert ccc_docker_networks.ensure(client, NAME, FIRST)["action"] == "present"
        assert ccc_docker_networks.ensure(client, NAME, SECOND, test=True)["action"] == "would be recreated"
        assert _subnet(client) == "10.239.1.0/24"  # test mode changed nothing
        outcome = ccc_docker_networks.ensure(client, NAME, SECOND)
        assert outcome["action"] == "recreated"
        assert outcome["differences"]["subnet"] == {"old": "10.239.1.0/24", "new": "10.239.2.0/24"}
        assert _subnet(client) == "10.239.2.0/24"
        user = client.containers.create("ccc-test/tiny:1", name="ccc-test-net-user", network=NAME)
        before = client.api.inspect_network(NAME)["Id"]
        outcome = ccc_docker_networks.ensure(client, NAME, THIRD)
        assert outcome["action"] == "in use"
        assert outcome["users"] == ["ccc-test-net-user"]
        assert set(outcome["differences"]) == {"subnet", "gateway", "internal"}
        assert client.api.inspect_network(NAME)["Id"] == before and _subnet(client) == "10.239.2.0/24"
        user.remove(force=True)
        assert ccc_docker_networks.ensure(client, NAME, THIRD)["action"] == "recreated"
        assert client.api.inspect_network(NAME)["Internal"] is True
    finally:
        for container in client.containers.list(all=True, filters={"name": "ccc-test-net-user"}):
            container.remove(force=True)
        for network in client.networks.list(names=[NAME]):
            network.remove()
