"""The agents through the Salt file server and the superfan_gpu role in test mode, masterless on
this machine (nothing is applied): ``salt://agents/`` resolves, the library a node would get is
the one computed from the agents' imports, the sample's fan node (node2) renders the role with
its curve, and a pillar that still uses the retired ``ccc:fans:enabled`` switch fails only the
controller's configuration (and the restart waiting on it), saying where the switch went."""

import pytest
import yaml

from support import site

import ccc_agents

pytestmark = pytest.mark.docker

ONLY_FANS = {"only_roles": "superfan_gpu"}


def read_utils(name):
    path = site.REPO / "_utils" / f"{name}.py"
    return path.read_text() if path.exists() else None


@pytest.fixture(scope="module")
def node2(tmp_path_factory):
    root = tmp_path_factory.mktemp("agents-render")
    return site.SaltNode(root / "work", "node2", "unix:///nonexistent.sock", root / "storage", extra_ccc=ONLY_FANS)


def states_of(node):
    output, _ = node.salt_call("state.apply", "cluster", "test=True", check=False)
    assert isinstance(output, dict), output
    return {state["__id__"]: state for state in output.values()}


def test_the_file_server_serves_the_agents_and_the_computed_library(node2):
    listed, _ = node2.salt_call("cp.list_master", "prefix=agents/")
    assert {"agents/ccc_fan_controller.py", "agents/ccc_gpu_exporter.py", "agents/config/fan-controller.yaml.jinja",
            "agents/systemd/ccc-fan-controller.service", "agents/systemd/ccc-gpu-exporter.service"} <= set(listed)
    library, _ = node2.salt_call("ccc_agents.library")
    agents = {path.name: path.read_text() for path in (site.REPO / "agents").glob("*.py")}
    assert library == ccc_agents.library(agents, read_utils)


def test_the_sample_fan_node_renders_the_role_and_its_curve(node2):
    states = states_of(node2)
    assert {key: state["comment"] for key, state in states.items() if state["result"] is False} == {}
    for key in ("ccc-cluster-agents-venv", "ccc-cluster-agents-venv-pip", "ccc-cluster-agents-bin",
                "ccc-cluster-agents-lib", "ccc-cluster-superfan_gpu-packages", "ccc-cluster-superfan_gpu-modules-load",
                "ccc-cluster-superfan_gpu-module-ipmi_devintf", "ccc-cluster-superfan_gpu-config",
                "ccc-cluster-superfan_gpu-unit", "ccc-cluster-superfan_gpu-service"):
        assert states[key]["__sls__"] in ("cluster.agents", "cluster.superfan_gpu"), key
    assert states["ccc-cluster-roles-summary"]["name"].startswith("cluster roles applied: superfan_gpu; cleaned: none")
    config, _ = node2.salt_call("ccc_fans.config")
    sample = yaml.safe_load((site.SAMPLE_SITE / "nodes" / "node2.sls").read_text())["ccc"]["fans"]["curve"]
    assert config["curve"] == {str(temperature): duty for temperature, duty in sample.items()}  # JSON keys
    assert config["zones"] == [2, 3]


def test_the_retired_enabled_switch_fails_the_configuration_and_says_where_it_went(node2):
    node2.write_pillar(dict(ONLY_FANS, fans={"enabled": True}))
    try:
        states = states_of(node2)
    finally:
        node2.write_pillar(ONLY_FANS)
    failed = {key: state["comment"] for key, state in states.items() if state["result"] is False}
    # the running controller keeps its last good configuration: the restart waits for a valid one
    assert set(failed) == {"ccc-cluster-superfan_gpu-config", "ccc-cluster-superfan_gpu-service"}
    assert "requisite failed" in failed["ccc-cluster-superfan_gpu-service"]
    assert "'enabled' is no longer a key: the role's switch is ccc:roles:superfan_gpu" in failed["ccc-cluster-superfan_gpu-config"]
