"""The ``ccc_docker_network.present`` state (the docker role owns the node's networks): what an
admin reads for a present, created, recreated or in-use network, in test mode and for real, with a
fake ``__salt__``; and the real ``ccc_docker_host`` module against a Docker engine that does not
answer (one clean line, no traceback). The moved tests of ``ccc_container.network_present``."""

import pathlib

import pytest
from salt.exceptions import CommandExecutionError

from support.scripts import load_module
from support.site import sample_ccc

REPO = pathlib.Path(__file__).resolve().parents[2]
DEAD_ENGINE = "unix:///nonexistent/ccc-test-docker.sock"
SUBNET = {"subnet": {"old": "10.0.0.0/24", "new": "172.30.2.0/24"}}


def state(status, test=False):
    calls = []

    def network_present(name, test):
        calls.append((name, test))
        return status if isinstance(status, dict) else {"action": status, "differences": {}, "users": []}
    module = load_module("_states/ccc_docker_network.py", "ccc_docker_network_state",
                  salt={"ccc_docker_host.network_present": network_present}, opts={"test": test})
    return module, calls


@pytest.mark.parametrize("test, status, expected", [
    (False, "present", (True, {}, "network claims is as defined")),
    (True, "present", (True, {}, "network claims is as defined")),
    (True, "would be created", (None, {"network": "would be created"}, "network claims would be created")),
    (False, "created", (True, {"network": "created"}, "network claims created")),
    (True, {"action": "would be recreated", "differences": SUBNET, "users": []},
     (None, {"network": "would be recreated", "differences": SUBNET},
      "network claims would be recreated (subnet '10.0.0.0/24' -> '172.30.2.0/24')")),
    (False, {"action": "recreated", "differences": SUBNET, "users": []},
     (True, {"network": "recreated", "differences": SUBNET},
      "network claims recreated (subnet '10.0.0.0/24' -> '172.30.2.0/24')")),
])
def test_network_present(test, status, expected):
    module, calls = state(status, test=test)
    result = module.present("claims")
    assert (result["name"], result["result"], result["changes"], result["comment"]) == ("claims", *expected)
    assert calls == [("claims", test)]


@pytest.mark.parametrize("test", [True, False])
def test_a_changed_network_in_use_fails_naming_the_difference_and_the_containers(test):
    status = {"action": "in use", "differences": SUBNET, "users": ["ana-main", "bor-main"]}
    result = state(status, test=test)[0].present("claims")
    assert result["result"] is False and result["changes"] == {}
    assert result["comment"] == (
        "network claims differs from ccc:cluster:networks:claims (subnet '10.0.0.0/24' -> '172.30.2.0/24') "
        "but is not recreated while containers use it: ana-main, bor-main; stop or move them "
        "(or remove the network by hand), then apply again")


@pytest.fixture
def dead_engine(tmp_path):
    ccc = sample_ccc("node1")
    ccc["node"].update(docker_url=DEAD_ENGINE, state_dir=str(tmp_path / "state"))
    return load_module("_modules/ccc_docker_host.py", "ccc_docker_host_module", pillar={"ccc": ccc},
                grains={"id": "node1"}, context={}, salt={})


@pytest.mark.parametrize("test", [True, False])
def test_the_state_fails_in_one_line_when_the_engine_does_not_answer(dead_engine, test):
    module = load_module("_states/ccc_docker_network.py", "ccc_docker_network_state", opts={"test": test},
                  salt={"ccc_docker_host.network_present": dead_engine.network_present})
    assert module.present("claims") == {"name": "claims", "result": False, "changes": {},
                                        "comment": f"the Docker engine of this node does not answer ({DEAD_ENGINE})"}


def test_the_execution_module_raises_command_execution_error_when_the_engine_does_not_answer(dead_engine):
    with pytest.raises(CommandExecutionError, match="^the Docker engine of this node does not answer"):
        dead_engine.network_present("claims", test=True)


def test_the_node_needs_every_defined_network_and_every_network_containers_join(dead_engine):
    dead_engine.__pillar__["ccc"]["cluster"]["access_networks"]["extra"] = ["plain-net"]
    wanted = dead_engine.networks()
    assert list(wanted) == ["lab-unrestricted", "student-restricted", "claims", "plain-net"]
    assert wanted["claims"]["bridge_name"] == "ccc-claims" and wanted["plain-net"] == {}
    with pytest.raises(CommandExecutionError, match="network nowhere is neither"):
        dead_engine.network_present("nowhere")
