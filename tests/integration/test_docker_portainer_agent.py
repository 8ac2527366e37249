"""The Portainer agent of the docker role (``_states/ccc_docker_portainer.py``) on node1's private
test dockerd. The real agent image cannot be pulled here: the local stand-in ``ccc-test/tiny:1``
(tests/images/build.sh, a static busybox that sleeps) is tagged under the configured image name,
so what is checked is the container the state makes, not the agent program.

What an admin sees: created running with the configured publish address, mounts, restart policy
and AGENT_SECRET; a second run changes nothing; a new port or secret recreates it (the secret is
never shown); switched off, it is removed; a foreign container of that name is never touched."""

import importlib.util
import json
import pathlib
import socket

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
IMAGE = "ccc-test/portainer-agent:stand-in"
NAME = "ccc-test-portainer-agent"
SECRET, NEW_SECRET = "agent-Secret-0001", "agent-Secret-0002"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def daemon(node1_dockerd):
    client = node1_dockerd.client()
    client.images.get("ccc-test/tiny:1").tag(*IMAGE.split(":"))
    for name in (NAME,):
        try:
            client.api.remove_container(name, force=True)
        except Exception:
            pass
    yield node1_dockerd
    try:
        client.api.remove_container(NAME, force=True)
    except Exception:
        pass


def agent(daemon, tmp_path, secret=SECRET, test=False, **kwargs):
    spec = importlib.util.spec_from_file_location("ccc_docker_portainer_state", REPO / "_states" / "ccc_docker_portainer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ccc = {"node": {"docker_url": daemon.url, "state_dir": str(tmp_path / "state")}}
    if secret:
        ccc["secrets"] = {"portainer": {"agent_secret": secret}}
    module.__pillar__ = {"ccc": ccc}
    module.__grains__ = {"id": "node1"}
    module.__opts__ = {"test": test}
    return module.agent(NAME, **dict({"enabled": True, "image": IMAGE, "publish_ip": "127.0.0.1"}, **kwargs))


@pytest.mark.docker
def test_created_then_unchanged_then_recreated_then_removed(daemon, tmp_path):
    port = free_port()
    preview = agent(daemon, tmp_path, test=True, publish_port=port)
    assert preview["result"] is None and preview["changes"] == {"agent": ["created"]}

    created = agent(daemon, tmp_path, publish_port=port)
    assert created == {"name": NAME, "result": True, "changes": {"agent": ["created"]},
                       "comment": f"portainer agent {NAME} created"}
    attrs = daemon.client().api.inspect_container(NAME)
    assert attrs["State"]["Running"] and attrs["Config"]["Image"] == IMAGE
    assert attrs["HostConfig"]["PortBindings"] == {"9001/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(port)}]}
    assert sorted(attrs["HostConfig"]["Binds"]) == ["/var/lib/docker/volumes:/var/lib/docker/volumes",
                                                    "/var/run/docker.sock:/var/run/docker.sock"]
    assert attrs["HostConfig"]["RestartPolicy"]["Name"] == "always"
    assert f"AGENT_SECRET={SECRET}" in attrs["Config"]["Env"]

    again = agent(daemon, tmp_path, publish_port=port)
    assert (again["result"], again["changes"]) == (True, {})
    assert again["comment"] == f"portainer agent {NAME} runs as configured"

    new_port = free_port()
    moved = agent(daemon, tmp_path, secret=NEW_SECRET, publish_port=new_port)
    assert moved["result"] is True and moved["comment"] == f"portainer agent {NAME} recreated"
    assert moved["changes"]["agent"] == [f"published at 127.0.0.1:{port} -> 127.0.0.1:{new_port}", "AGENT_SECRET changed"]
    assert SECRET not in json.dumps(moved) and NEW_SECRET not in json.dumps(moved)
    assert f"AGENT_SECRET={NEW_SECRET}" in daemon.client().api.inspect_container(NAME)["Config"]["Env"]

    off_preview = agent(daemon, tmp_path, test=True, enabled=False)
    assert off_preview["result"] is None and daemon.client().api.inspect_container(NAME)["State"]["Running"]
    off = agent(daemon, tmp_path, enabled=False)
    assert (off["result"], off["changes"]) == (True, {"removed": NAME})
    assert not daemon.client().containers.list(all=True, filters={"name": f"^/{NAME}$"})
    assert agent(daemon, tmp_path, enabled=False)["comment"] == "portainer agent is off"


@pytest.mark.docker
def test_a_foreign_container_with_that_name_is_left_alone(daemon, tmp_path):
    daemon.client().api.create_container("ccc-test/tiny:1", name=NAME)
    for enabled in (True, False):
        result = agent(daemon, tmp_path, enabled=enabled, publish_port=free_port())
        assert result == {"name": NAME, "result": False, "changes": {},
                          "comment": f"a container named {NAME} exists that ccc-salt did not create; left alone"}
    assert daemon.client().api.inspect_container(NAME)["Config"]["Image"] == "ccc-test/tiny:1"


@pytest.mark.docker
def test_without_a_secret_in_pillar_the_agent_has_no_agent_secret(daemon, tmp_path):
    assert agent(daemon, tmp_path, secret=None, publish_port=free_port())["result"] is True
    env = daemon.client().api.inspect_container(NAME)["Config"]["Env"] or []
    assert not [item for item in env if item.startswith("AGENT_SECRET=")]
