"""Registry logins of the docker role (``_states/ccc_docker_registry.py``) against a real registry:
Debian's ``docker-registry`` (distribution 2.8, htpasswd auth) run as a plain process on
127.0.0.1 with its own config, so no host service is touched. The binary is taken from the
Debian package with ``apt-get download`` + ``dpkg -x`` into the test cache (nothing installed).
Logins go through node1's private test dockerd, as the state does through ``ccc:node:docker_url``
(the real ``ccc_docker_host.registry_login`` behind ``__salt__``).

What an admin sees: a wrong password or an unreachable registry fails with the reason and no
secret, writes nothing; good credentials land in the config file as ``docker login`` writes
them (0600); a second run changes nothing; ``logins_absent`` logs out."""

import base64
import crypt
import json
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time

import pytest
from support.salt_modules import functions
from support.scripts import load_module

CACHE = pathlib.Path(os.environ.get("CCC_CACHE_DIR", pathlib.Path.home() / ".cache" / "ccc-salt"))
USER, PASSWORD = "ccc-robot", "s3cret-Registry-pw"


def registry_binary():
    """``docker-registry`` from Debian's package, unpacked once into the cache."""
    target = CACHE / "docker-registry" / "usr" / "bin" / "docker-registry"
    if target.exists():
        return target
    if not shutil.which("apt-get"):
        pytest.skip("needs apt-get to fetch Debian's docker-registry")
    with tempfile.TemporaryDirectory() as work:
        proc = subprocess.run(["apt-get", "download", "docker-registry"], cwd=work, capture_output=True, text=True)
        debs = list(pathlib.Path(work).glob("docker-registry_*.deb"))
        if proc.returncode != 0 or not debs:
            pytest.skip(f"docker-registry package not downloadable: {proc.stderr[-300:]}")
        subprocess.run(["dpkg", "-x", str(debs[0]), str(CACHE / "docker-registry")], check=True)
    return target


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """A registry with one htpasswd user on 127.0.0.1:<port>; yields its host:port."""
    binary = registry_binary()
    work = tmp_path_factory.mktemp("registry")
    (work / "htpasswd").write_text(f"{USER}:{crypt.crypt(PASSWORD, crypt.mksalt(crypt.METHOD_BLOWFISH))}\n")
    port = free_port()
    (work / "config.yml").write_text(json.dumps({
        "version": 0.1, "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(work / "data")}},
        "http": {"addr": f"127.0.0.1:{port}"},
        "auth": {"htpasswd": {"realm": "ccc-test", "path": str(work / "htpasswd")}},
    }))
    proc = subprocess.Popen([str(binary), "serve", str(work / "config.yml")], stdout=subprocess.DEVNULL,
                            stderr=open(work / "registry.log", "w"))
    for _ in range(100):
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail(f"registry did not listen: {(work / 'registry.log').read_text()[-500:]}")
    yield f"127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)


def state(dockerd, tmp_path, host, password, test=False):
    pillar = {"ccc": {"node": {"docker_url": dockerd.url, "state_dir": str(tmp_path / "state")},
                      "secrets": {"registries": {host: {"username": USER, "password": password}}}}}
    grains = {"id": "node1"}
    return load_module("_states/ccc_docker_registry.py", "ccc_docker_registry_state", pillar=pillar, grains=grains,
                       opts={"test": test}, salt=functions("_modules/ccc_docker_host.py", pillar=pillar, grains=grains))


def assert_no_secret(result):
    text = json.dumps(result)
    assert PASSWORD not in text and "wrong-password" not in text
    assert base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode() not in text


@pytest.mark.docker
def test_wrong_password_fails_then_login_then_nothing_to_do_then_logout(node1_dockerd, registry, tmp_path):
    config = tmp_path / "root" / ".docker" / "config.json"
    wrong = state(node1_dockerd, tmp_path, registry, "wrong-password").logged_in(registry, config=str(config))
    assert wrong["result"] is False and wrong["changes"] == {}
    assert wrong["comment"].startswith(f"login to {registry} refused, nothing written: ")
    assert "unauthorized" in wrong["comment"].lower()
    assert_no_secret(wrong)
    assert not config.exists()

    preview = state(node1_dockerd, tmp_path, registry, PASSWORD, test=True).logged_in(registry, config=str(config))
    assert preview["result"] is None and preview["comment"] == f"would log in to {registry}" and not config.exists()

    good = state(node1_dockerd, tmp_path, registry, PASSWORD).logged_in(registry, config=str(config))
    assert good == {"name": registry, "result": True, "changes": {"login": f"{registry} ({config})"},
                    "comment": f"logged in to {registry}"}
    assert oct(config.stat().st_mode & 0o777) == "0o600"
    written = json.loads(config.read_text())
    assert written == {"auths": {registry: {"auth": base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()}}}

    again = state(node1_dockerd, tmp_path, registry, PASSWORD).logged_in(registry, config=str(config))
    assert (again["result"], again["changes"], again["comment"]) == (True, {}, f"logged in to {registry}")

    module = state(node1_dockerd, tmp_path, registry, PASSWORD)
    out = module.logins_absent("clean", hosts=[registry, "other.example.org"], config=str(config))
    assert (out["result"], out["changes"]) == (True, {"logged out": [registry]})
    assert json.loads(config.read_text()) == {"auths": {}}


@pytest.mark.docker
def test_an_unreachable_registry_fails_with_the_reason_and_no_secret(node1_dockerd, tmp_path):
    host = f"127.0.0.1:{free_port()}"
    config = tmp_path / "config.json"
    result = state(node1_dockerd, tmp_path, host, PASSWORD).logged_in(host, config=str(config))
    assert result["result"] is False and result["comment"].startswith(f"login to {host} refused, nothing written: ")
    assert "connection refused" in result["comment"].lower()
    assert_no_secret(result)
    assert not config.exists()


def test_missing_credentials_name_the_pillar_key(tmp_path):
    module = state(type("D", (), {"url": "unix:///nonexistent.sock"})(), tmp_path, "other.example.org", PASSWORD)
    result = module.logged_in("registry.example.org", config=str(tmp_path / "c.json"))
    assert result["result"] is False
    assert result["comment"].startswith("secret ccc:secrets:registries:registry.example.org:username is not in this node's pillar")
