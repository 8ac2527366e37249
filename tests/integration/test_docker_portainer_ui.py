"""The Portainer server (web UI) of the docker role (``ccc:docker:portainer_ui``, the original's
``portainer_ui*``): ``salt/cluster/docker/portainer.sls`` rendered by a masterless salt-call for
sample node1, its spec then fed to the generic ``_states/ccc_service_container.py`` against node1's
private test dockerd. The real server image cannot be pulled here: the local stand-in
``ccc-test/tiny:1`` is tagged under the configured name, so what is checked is the container
(published address, labels, database folder, secret, no Docker API), not the Portainer program.

What an admin sees: the UI published on its own address (the original used the agent's), FRP
labels for the portainer subdomain, the database folder root-only at /data, AGENT_SECRET given,
and no Docker socket of any kind (the server manages nodes through their agents); a second run
changes nothing; switched off, it is removed; a bad setting fails only the UI's state."""

import json
import socket

import pytest

from support.salt_modules import load_state
from support.site import SaltNode

IMAGE = "ccc-test/portainer-ce:stand-in"
NAME = "ccc-test-portainer-ui"
SECRET = "agent-Secret-0101"
DEAD = "unix:///nonexistent/ccc-portainer.sock"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def args(state):
    return {k: v for item in state[next(k for k in state if not k.startswith("__"))] if isinstance(item, dict)
            for k, v in item.items() if k != "order"}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """What portainer.sls renders for sample node1: UI on (secret in the sample pillar), off, broken."""
    tmp = tmp_path_factory.mktemp("portainer-ui-render")
    storage = str(tmp / "portainer-data")
    ui = {"enabled": True, "name": NAME, "image": IMAGE, "storage_path": storage, "publish_ip": "127.0.0.2",
          "publish_port": 9000}
    salt = SaltNode(tmp, "node1", DEAD, tmp / "storage", extra_ccc={"docker": {"portainer_ui": ui}})
    on, _ = salt.salt_call("state.show_sls", "cluster.docker.portainer")
    salt.write_pillar(dict(salt.extra_ccc, docker={"portainer_ui": dict(ui, enabled=False)}))
    off, _ = salt.salt_call("state.show_sls", "cluster.docker.portainer")
    salt.write_pillar(dict(salt.extra_ccc, docker={"portainer_ui": dict(ui, storage_path="data")}))
    bad, _ = salt.salt_call("state.apply", "cluster.docker.portainer", "test=True", check=False)
    clean, _ = salt.salt_call("state.show_sls", "cluster.docker.clean")
    return {"on": on, "off": off, "bad": bad, "clean": clean, "storage": storage}


def test_the_sls_asks_for_the_server_without_any_docker_api(rendered):
    on = rendered["on"]
    spec = args(on["ccc-cluster-docker-portainer-ui"])["spec"]
    assert spec["image"] == IMAGE and spec["role"] == "docker" and "docker_api" not in spec
    assert spec["binds"] == [{"source": rendered["storage"], "target": "/data", "read_only": False}]
    assert spec["ports"] == {"9000/tcp": ["127.0.0.2", 9000]}  # its own address, not the agent's
    assert spec["labels"] == {"frp.enabled": "true", "frp.9000": "http", "frp.9000.http.subdomain": "portainer",
                              "frp.9000.health_check": "true"}
    assert spec["secret_env"] == {"AGENT_SECRET": ["portainer", "agent_secret"]} and "PGP" not in json.dumps(on)
    storage = args(on["ccc-cluster-docker-portainer-ui-storage"])
    assert (storage["name"], storage["user"], storage["mode"]) == (rendered["storage"], "root", "0700")
    assert args(rendered["off"]["ccc-cluster-docker-portainer-ui"]) == {"name": NAME, "role": "docker"}
    assert args(rendered["clean"]["ccc-cluster-docker-clean-portainer-ui"]) == {"name": NAME, "role": "docker"}


def test_a_bad_setting_fails_only_the_ui_and_says_which(rendered):
    states = {key.split("_|-")[1]: value for key, value in rendered["bad"].items()}
    assert states["ccc-cluster-docker-portainer-ui"]["result"] is False
    assert states["ccc-cluster-docker-portainer-ui"]["comment"] == (
        "ccc:docker:portainer_ui is not valid, nothing changed: ccc:docker:portainer_ui:storage_path must be an "
        "absolute folder other than /, got 'data'")
    assert "ccc-cluster-docker-portainer-ui-storage" not in states


@pytest.fixture
def daemon(node1_dockerd):
    client = node1_dockerd.client()
    client.images.get("ccc-test/tiny:1").tag(*IMAGE.split(":"))
    try:
        client.api.remove_container(NAME, force=True)
    except Exception:
        pass
    yield node1_dockerd
    try:
        client.api.remove_container(NAME, force=True)
    except Exception:
        pass


def ui(daemon, tmp_path, rendered, port, enabled=True):
    ccc = {"node": {"docker_url": daemon.url, "state_dir": str(tmp_path / "state")},
           "secrets": {"portainer": {"agent_secret": SECRET}}}
    module = load_state("_states/ccc_service_container.py", "ccc_service_container_portainer_ui",
                        ["_modules/ccc_service_container.py"], pillar={"ccc": ccc}, grains={"id": "node1"},
                        opts={"test": False})
    if not enabled:
        return module.absent(**args(rendered["off"]["ccc-cluster-docker-portainer-ui"]))
    spec = dict(args(rendered["on"]["ccc-cluster-docker-portainer-ui"])["spec"], ports={"9000/tcp": ["127.0.0.1", port]},
                binds=[{"source": str(tmp_path / "data"), "target": "/data", "read_only": False}])
    (tmp_path / "data").mkdir(exist_ok=True)
    return module.running(NAME, spec)


@pytest.mark.docker
def test_created_without_a_socket_then_unchanged_then_removed(daemon, tmp_path, rendered):
    port = free_port()
    created = ui(daemon, tmp_path, rendered, port)
    assert (created["result"], created["changes"]) == (True, {"created": NAME}), created
    attrs = daemon.client().api.inspect_container(NAME)
    assert attrs["State"]["Running"] and attrs["Config"]["Image"] == IMAGE
    assert attrs["HostConfig"]["Binds"] == [f"{tmp_path / 'data'}:/data:rw"]  # no socket of any kind
    assert not [m for m in attrs["Mounts"] if "docker" in m["Source"] or m["Destination"].endswith(".sock")]
    assert attrs["HostConfig"]["PortBindings"] == {"9000/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(port)}]}
    assert {"8000/tcp", "9000/tcp", "9443/tcp"} <= set(attrs["Config"]["ExposedPorts"])  # + the stand-in's 22
    assert attrs["Config"]["Labels"]["frp.9000.http.subdomain"] == "portainer"
    assert f"AGENT_SECRET={SECRET}" in attrs["Config"]["Env"]
    assert attrs["HostConfig"]["RestartPolicy"]["Name"] == "always"
    assert SECRET not in json.dumps(created)

    again = ui(daemon, tmp_path, rendered, port)
    assert (again["result"], again["changes"], again["comment"]) == (True, {}, f"{NAME} runs as configured")
    off = ui(daemon, tmp_path, rendered, port, enabled=False)
    assert (off["result"], off["changes"]) == (True, {"removed": NAME})
    assert (tmp_path / "data").is_dir()  # Portainer's database folder is kept
