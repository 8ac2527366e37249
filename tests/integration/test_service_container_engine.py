"""The generic role-container state (``_states/ccc_service_container.py``) against node1's private
test dockerd, without Salt's loader (the dunders are set as Salt sets them). The stand-in image is
``ccc-test/tiny:1`` (a static busybox, tests/images/build.sh) tagged under a role image name, with
CMD ``sleep``, so what is checked is the container the state makes and the secret env a process
in it really sees, not a real service program.

What an admin sees: created with the env, labels, binds, networks and aliases asked for; the
secret only inside the process (``/proc/1/environ``), never in ``docker inspect`` or a message; a
second run changes nothing; a changed secret recreates; stopped -> started; absent removes the
container and its env file; a foreign container of that name is left alone; a Docker engine
that does not answer is a clean failure."""

import io
import json
import os
import stat
import tarfile

import pytest

from support.salt_modules import load_state

import ccc_frp
import ccc_service_containers as svc

IMAGE = "ccc-test/role-service:stand-in"
NAME = "ccc-test-role-service"
TOKEN, NEW_TOKEN = "tok-Secret-0001'$x", "tok-Secret-0002"
NETWORKS = ("ccc-test-svc-a", "ccc-test-svc-b")


def _build_stand_in(client):
    """FROM ccc-test/tiny:1 with CMD sleep, as a role image whose entrypoint is wrapped."""
    dockerfile = b'FROM ccc-test/tiny:1\nENTRYPOINT []\nCMD ["sleep", "1000000"]\nLABEL from=stand-in\n'
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
    buffer.seek(0)
    client.images.build(fileobj=buffer, custom_context=True, tag=IMAGE, rm=True)


def _remove(client):
    try:
        client.api.remove_container(NAME, force=True)
    except Exception:
        pass

MODULES = ["_modules/ccc_service_container.py"]


@pytest.fixture
def engine(node1_dockerd, tmp_path, monkeypatch):
    client = node1_dockerd.client()
    _build_stand_in(client)
    _remove(client)
    for network in NETWORKS:
        if not client.networks.list(names=[network]):
            client.networks.create(network, driver="bridge")
    monkeypatch.setattr(svc, "SECRET_DIR", str(tmp_path / "secrets" / "containers"))
    yield node1_dockerd
    _remove(client)


def state(daemon, tmp_path, token=TOKEN, test=False, url=None):
    ccc = {"node": {"docker_url": url or daemon.url, "state_dir": str(tmp_path / "state")},
           "secrets": {"frp": {"token": token}, "basic_auth": {"metrics": {"user": "m-user", "password": "m-pw-77"}}}}
    return load_state("_states/ccc_service_container.py", "ccc_service_container_state", MODULES,
                      pillar={"ccc": ccc}, grains={"id": "node1"}, opts={"test": test})


SPEC = {
    "image": IMAGE, "role": "ccc-test-role", "hostname": "svc-host",
    "env": {"FRPC_NETWORK": NETWORKS[0]}, "labels": {"frp.enabled": "false"},
    "secret_env": {"FRPC_AUTH_TOKEN": ["frp", "token"], "FRP_CCC_METRICS_PASSWORD": ["basic_auth", "metrics", "password"]},
    "networks": [{"name": NETWORKS[0], "aliases": ["claims", "reservation"]}, {"name": NETWORKS[1]}],
    "binds": [{"source": "/etc/os-release", "target": "/etc/host-os-release", "read_only": True}],
    "restart": "always", "log_config": {"type": "json-file", "config": {"max-size": "1m"}},
}


def _environ(client):
    run = client.api.exec_create(NAME, ["cat", "/proc/1/environ"])
    return dict(item.split("=", 1) for item in client.api.exec_start(run["Id"]).decode().split("\0") if "=" in item)


@pytest.mark.docker
def test_created_with_secret_env_inside_only_then_unchanged_recreated_stopped_and_removed(engine, tmp_path):
    client = engine.client()
    preview = state(engine, tmp_path, test=True).running(NAME, SPEC)
    assert preview["result"] is None and preview["changes"] == {"created": NAME}
    assert not client.containers.list(all=True, filters={"name": f"^/{NAME}$"})

    made = state(engine, tmp_path).running(NAME, SPEC)
    assert made == {"name": NAME, "result": True, "changes": {"created": NAME}, "comment": f"{NAME} created"}
    attrs = client.api.inspect_container(NAME)
    shown = json.dumps(attrs)
    assert TOKEN not in shown and "m-pw-77" not in shown
    assert f"FRPC_NETWORK={NETWORKS[0]}" in attrs["Config"]["Env"]
    assert attrs["Config"]["Labels"]["ccc.cluster-role"] == "ccc-test-role" and attrs["Config"]["Hostname"] == "svc-host"
    assert sorted(attrs["HostConfig"]["Binds"]) == sorted([f"{svc.SECRET_DIR}/{NAME}.env:/run/ccc-secrets/env:ro",
                                                           "/etc/os-release:/etc/host-os-release:ro"])
    assert sorted(attrs["NetworkSettings"]["Networks"]) == sorted(NETWORKS)
    assert {"claims", "reservation"} <= set(attrs["NetworkSettings"]["Networks"][NETWORKS[0]]["Aliases"])
    inside = _environ(client)
    assert inside["FRPC_AUTH_TOKEN"] == TOKEN and inside["FRP_CCC_METRICS_PASSWORD"] == "m-pw-77"
    env_file = os.stat(f"{svc.SECRET_DIR}/{NAME}.env")
    assert stat.S_IMODE(env_file.st_mode) == 0o600 and stat.S_IMODE(os.stat(svc.SECRET_DIR).st_mode) == 0o700

    assert state(engine, tmp_path).running(NAME, SPEC) == {
        "name": NAME, "result": True, "changes": {}, "comment": f"{NAME} runs as configured"}

    changed = state(engine, tmp_path, token=NEW_TOKEN).running(NAME, SPEC)
    assert changed["changes"] == {"recreated": NAME, "differences": ["secret FRPC_AUTH_TOKEN changed"]}
    assert TOKEN not in json.dumps(changed) and NEW_TOKEN not in json.dumps(changed)
    assert _environ(client)["FRPC_AUTH_TOKEN"] == NEW_TOKEN

    client.api.stop(NAME, timeout=1)
    started = state(engine, tmp_path, token=NEW_TOKEN).running(NAME, SPEC)
    assert started["changes"] == {"started": NAME} and client.api.inspect_container(NAME)["State"]["Running"]

    fewer = dict(SPEC, networks=[SPEC["networks"][0]])
    moved = state(engine, tmp_path, token=NEW_TOKEN).running(NAME, fewer)
    assert moved["changes"]["differences"] == [f"networks {', '.join(sorted(NETWORKS))} -> {NETWORKS[0]}"]
    assert list(client.api.inspect_container(NAME)["NetworkSettings"]["Networks"]) == [NETWORKS[0]]

    gone = state(engine, tmp_path).absent(NAME, "ccc-test-role")
    assert gone["result"] is True and gone["changes"] == {"removed": NAME, "secret env file removed": f"{svc.SECRET_DIR}/{NAME}.env"}
    assert not client.containers.list(all=True, filters={"name": f"^/{NAME}$"})
    assert not os.path.exists(f"{svc.SECRET_DIR}/{NAME}.env")
    assert state(engine, tmp_path).absent(NAME, "ccc-test-role")["comment"] == f"{NAME} is not there"


@pytest.mark.docker
def test_a_foreign_container_is_left_alone_and_a_missing_secret_or_engine_fails_cleanly(engine, tmp_path):
    client = engine.client()
    client.api.create_container("ccc-test/tiny:1", name=NAME, labels={"ccc.cluster-role": "someone-else"})
    for result in (state(engine, tmp_path).running(NAME, SPEC), state(engine, tmp_path).absent(NAME, "ccc-test-role")):
        assert result["result"] is False and result["changes"] == {}
        assert result["comment"].startswith(f"a container named {NAME} exists that ccc-salt did not create")
    assert client.api.inspect_container(NAME)["Config"]["Image"] == "ccc-test/tiny:1"
    _remove(client)

    module = state(engine, tmp_path)
    del module.__pillar__["ccc"]["secrets"]["frp"]
    missing = module.running(NAME, SPEC)
    assert missing["result"] is False and "secret ccc:secrets:frp:token is not in this node's pillar" in missing["comment"]

    published = dict(SPEC, labels=ccc_frp.service_labels(9100, "node1-metrics", "/", auth="monitor"))
    unprotected = state(engine, tmp_path).running(NAME, published)
    assert unprotected["result"] is False and unprotected["changes"] == {}
    assert unprotected["comment"] == (f"{NAME} is not created: its FRP basic auth needs ccc:secrets:basic_auth:monitor:"
                                      "{user,password} in the GPG pillar (without them it would be published unprotected)")
    assert not client.containers.list(all=True, filters={"name": f"^/{NAME}$"})

    bad = state(engine, tmp_path).running(NAME, dict(SPEC, restart="no"))
    assert (bad["result"], bad["comment"]) == (False, f"{NAME}: restart must be one of always, unless-stopped")
    raw = dict(SPEC, binds=[{"source": "/var/run/docker.sock", "target": "/var/run/docker.sock", "read_only": True}])
    refused = state(engine, tmp_path).running(NAME, raw)
    assert refused["result"] is False and refused["comment"].startswith(
        f"{NAME}: bind /var/run/docker.sock is the Docker engine's socket or a proxy's: ask for docker_api")
    assert not client.containers.list(all=True, filters={"name": f"^/{NAME}$"})

    down = state(engine, tmp_path, url="unix:///nonexistent/docker.sock").running(NAME, SPEC)
    assert down["result"] is False
    assert down["comment"] == "the Docker engine of this node does not answer (unix:///nonexistent/docker.sock)"
