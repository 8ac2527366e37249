"""The Portainer agent of the docker role (``salt/cluster/docker/portainer.sls`` through the generic
``_states/ccc_service_container.py``) on node1's private test dockerd. The SLS is rendered by a
masterless salt-call for sample node1 with the agent switched on (nothing applied); its spec is then
fed to the state module against the private dockerd. The real agent image cannot be pulled here:
the local stand-in ``ccc-test/tiny:1`` (tests/images/build.sh, a static busybox that sleeps) is
tagged under the configured image name, so what is checked is the container, not the agent program.
The agent's Docker API proxy is a systemd unit (this host has no systemd): its spec is checked here
and the container made here without it; the proxy itself, and the attack through it from inside the
deployed agent, are in tests/nodes/test_portainer_agent.py.

What an admin sees: created running with the configured publish address, mounts, restart policy
and AGENT_SECRET (the one inline secret env: the agent image has no shell); a second run changes
nothing; a new port or secret recreates it (the secret is never shown); an agent made by the older
``ccc_docker_portainer`` state is taken over; switched off, it is removed; a foreign container of
that name is never touched."""

import json
import socket

import pytest

from support.salt_modules import load_state
from support.site import SaltNode

IMAGE = "ccc-test/portainer-agent:stand-in"
NAME = "ccc-test-portainer-agent"
SECRET, NEW_SECRET = "agent-Secret-0001", "agent-Secret-0002"
DEAD = "unix:///nonexistent/ccc-portainer.sock"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """The spec portainer.sls renders for sample node1 (agent on, secret in the sample pillar)."""
    tmp = tmp_path_factory.mktemp("portainer-render")
    agent = {"enabled": True, "name": NAME, "image": IMAGE, "publish_ip": "127.0.0.1", "publish_port": 9001}
    salt = SaltNode(tmp, "node1", DEAD, tmp / "storage", extra_ccc={"docker": {"portainer_agent": agent}})
    on, _ = salt.salt_call("state.show_sls", "cluster.docker.portainer")
    salt.write_pillar(dict(salt.extra_ccc, docker={"portainer_agent": dict(agent, docker_api="full")}))
    full, _ = salt.salt_call("state.show_sls", "cluster.docker.portainer")
    salt.write_pillar(dict(salt.extra_ccc, docker={"portainer_agent": dict(agent, enabled=False)}))
    off, _ = salt.salt_call("state.show_sls", "cluster.docker.portainer")
    return {"on": on["ccc-cluster-docker-portainer-agent"], "off": off["ccc-cluster-docker-portainer-agent"],
            "full": full["ccc-cluster-docker-portainer-agent"]}


def args(state):
    return {k: v for item in state[next(k for k in state if not k.startswith("__"))] if isinstance(item, dict)
            for k, v in item.items() if k != "order"}


def test_the_sls_asks_for_the_agent_with_its_secret_by_key_only(rendered):
    assert "ccc_service_container" in rendered["on"] and "PGP" not in json.dumps(rendered)
    spec = args(rendered["on"])["spec"]
    assert spec["secret_env"] == {"AGENT_SECRET": ["portainer", "agent_secret"]} and spec["secret_env_inline"] is True
    assert spec["ports"] == {"9001/tcp": ["127.0.0.1", 9001]} and spec["role"] == "docker"
    # never docker.sock: the read-only allowlist by default, the volumes folder read-only too
    assert spec["docker_api"] == "portainer-read-only"
    assert spec["binds"] == [{"source": "/var/lib/docker/volumes", "target": "/var/lib/docker/volumes", "read_only": True}]
    full = args(rendered["full"])["spec"]  # the admin's explicit choice: every call
    assert full["docker_api"] == "portainer-full" and full["binds"][0]["read_only"] is False
    assert args(rendered["off"]) == {"name": NAME, "role": "docker", "former_roles": ["docker-portainer-agent"]}


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


def agent(daemon, tmp_path, rendered, secret=SECRET, test=False, enabled=True, port=9001):
    ccc = {"node": {"docker_url": daemon.url, "state_dir": str(tmp_path / "state")}}
    if secret:
        ccc["secrets"] = {"portainer": {"agent_secret": secret}}
    module = load_state("_states/ccc_service_container.py", "ccc_service_container_portainer",
                        ["_modules/ccc_service_container.py"], pillar={"ccc": ccc}, grains={"id": "node1"},
                        opts={"test": test})
    if not enabled:
        return module.absent(**args(rendered["off"]))
    spec = dict(args(rendered["on"])["spec"], ports={"9001/tcp": ["127.0.0.1", port]}, docker_api=None)
    if not secret:
        spec["secret_env"] = {}
    return module.running(NAME, spec)


@pytest.mark.docker
def test_created_then_unchanged_then_recreated_then_removed(daemon, tmp_path, rendered):
    port = free_port()
    preview = agent(daemon, tmp_path, rendered, test=True, port=port)
    assert preview["result"] is None and preview["changes"] == {"created": NAME}

    created = agent(daemon, tmp_path, rendered, port=port)
    assert created == {"name": NAME, "result": True, "changes": {"created": NAME}, "comment": f"{NAME} created"}
    attrs = daemon.client().api.inspect_container(NAME)
    assert attrs["State"]["Running"] and attrs["Config"]["Image"] == IMAGE
    assert attrs["HostConfig"]["PortBindings"] == {"9001/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(port)}]}
    assert attrs["HostConfig"]["Binds"] == ["/var/lib/docker/volumes:/var/lib/docker/volumes:ro"]
    assert attrs["HostConfig"]["RestartPolicy"]["Name"] == "always"
    assert f"AGENT_SECRET={SECRET}" in attrs["Config"]["Env"]

    again = agent(daemon, tmp_path, rendered, port=port)
    assert (again["result"], again["changes"], again["comment"]) == (True, {}, f"{NAME} runs as configured")

    new_port = free_port()
    moved = agent(daemon, tmp_path, rendered, secret=NEW_SECRET, port=new_port)
    assert moved["result"] is True and moved["comment"] == f"{NAME} recreated"
    assert moved["changes"]["differences"] == ["secret AGENT_SECRET changed", "published ports"]
    assert SECRET not in json.dumps(moved) and NEW_SECRET not in json.dumps(moved)
    assert f"AGENT_SECRET={NEW_SECRET}" in daemon.client().api.inspect_container(NAME)["Config"]["Env"]

    off_preview = agent(daemon, tmp_path, rendered, test=True, enabled=False)
    assert off_preview["result"] is None and daemon.client().api.inspect_container(NAME)["State"]["Running"]
    off = agent(daemon, tmp_path, rendered, enabled=False)
    assert (off["result"], off["changes"]) == (True, {"removed": NAME})
    assert not daemon.client().containers.list(all=True, filters={"name": f"^/{NAME}$"})
    assert agent(daemon, tmp_path, rendered, enabled=False)["comment"] == f"{NAME} is not there"


@pytest.mark.docker
def test_an_agent_of_the_older_state_is_taken_over(daemon, tmp_path, rendered):
    daemon.client().api.create_container(IMAGE, name=NAME, labels={"ccc.cluster-role": "docker-portainer-agent"})
    result = agent(daemon, tmp_path, rendered, port=free_port())
    assert result["result"] is True and result["changes"]["recreated"] == NAME
    assert "label ccc.cluster-role" in result["changes"]["differences"]
    assert daemon.client().api.inspect_container(NAME)["Config"]["Labels"]["ccc.cluster-role"] == "docker"


@pytest.mark.docker
def test_a_foreign_container_with_that_name_is_left_alone(daemon, tmp_path, rendered):
    daemon.client().api.create_container("ccc-test/tiny:1", name=NAME)
    for enabled in (True, False):
        result = agent(daemon, tmp_path, rendered, enabled=enabled, port=free_port())
        assert (result["result"], result["changes"]) == (False, {})
        assert result["comment"] == (f"a container named {NAME} exists that ccc-salt did not create "
                                     "(no ccc.cluster-role=docker label); left alone")
    assert daemon.client().api.inspect_container(NAME)["Config"]["Image"] == "ccc-test/tiny:1"


@pytest.mark.docker
def test_without_a_secret_in_pillar_the_agent_has_no_agent_secret(daemon, tmp_path, rendered):
    assert agent(daemon, tmp_path, rendered, secret=None, port=free_port())["result"] is True
    env = daemon.client().api.inspect_container(NAME)["Config"]["Env"] or []
    assert not [item for item in env if item.startswith("AGENT_SECRET=")]
