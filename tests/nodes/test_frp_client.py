"""The frp_client role applied for real on a systemd test node (tests/support/sysnode.py) with its
nested dockerd (the docker role installs it first), secrets from a GPG-encrypted pillar encrypted
to a throwaway key.

The real frpc image cannot be pulled here. A stand-in (FROM ccc-test/tiny:1, built in the node's
dockerd and tagged ``lukacu/frpc:latest``) runs a busybox shell as its entrypoint: it appends one
line naming its network to ``$FRPC_LOGFILE`` and sleeps. So what is checked is the container the
role makes and the environment its process really gets (``/proc/1/environ``), not frpc itself.

What an admin sees: one frpc per watched network with the image's env, the log folder, only its
network, and instead of docker.sock its own Docker API proxy (``ccc_docker_api``: haproxy under a
systemd socket unit) that answers the calls docker-gen makes (events included) and refuses every
write or leaking read from inside the container with 403, changing nothing; the token and the FRP credentials inside the process and nowhere
else (no ``docker inspect``, no salt output or log, no file outside the root-only env files); a
second apply changes nothing; a new token recreates both; a removed network entry removes its
container; a reboot brings them back (restart policy); ``absent`` removes them and keeps the logs."""

import json
import subprocess

import pytest

from support import secrets
from support.sysnode import failed as _failed

from . import docker_api_support as api

pytestmark = pytest.mark.docker

NODE = "frp-client"
LAB, STUDENT = "frp-lab-client-service", "frp-student-client-service"
TOKEN, NEW_TOKEN = "frp-token-3e91c0", "frp-token-7ab2d4"
SECRETS = {"frp": {"token": TOKEN},
           "basic_auth": {"metrics": {"user": "prom-c1", "password": "metrics-pass-5d0e"},
                          "monitor": {"user": "mon-c1", "password": "monitor-pass-88f1"}}}
SECRET_VALUES = [TOKEN, NEW_TOKEN, "metrics-pass-5d0e", "monitor-pass-88f1"]
STAND_IN = """FROM ccc-test/tiny:1
ENTRYPOINT ["/bin/sh", "-c", "echo \\"frpc stand-in on $FRPC_NETWORK\\" >> \\"$FRPC_LOGFILE\\"; trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"]
"""
NETWORKS = {"lab-unrestricted": {"subnet": "172.31.0.0/24", "gateway": "172.31.0.1", "bridge_name": "ccc-lab"},
            "student-restricted": {"subnet": "172.31.1.0/24", "gateway": "172.31.1.1", "bridge_name": "ccc-student"}}
WATCHED = [{"network": "lab-unrestricted", "container_name": LAB, "log_name": "lab.log"},
           {"network": "student-restricted", "container_name": STUDENT, "log_name": "student.log"}]


def _pillar(frp_client=True, watched=WATCHED):
    return {"ccc": {
        "roles": {"docker": True, "frp_client": frp_client},
        "only_roles": "docker,frp_client",
        "cluster": {"networks": NETWORKS},
        "docker": {"nvidia_toolkit": {"enabled": False}, "registries": []},
        "frp_client": {"server_address": "10.234.0.1", "server_port": 7000, "networks": watched},
    }}


def _apply(node, sls="cluster"):
    call = node.salt_call("-l", "debug", "state.apply", sls, check=False)
    states = call.states()
    node.outputs += [(f"apply {len(node.outputs)} stdout", call.stdout), (f"apply {len(node.outputs)} log", call.stderr)]
    return states


def _inspect(node, name):
    return json.loads(node.exec(["docker", "inspect", name]).stdout)[0]


def _environ(node, name):
    text = node.exec(["docker", "exec", name, "cat", "/proc/1/environ"]).stdout
    return dict(item.split("=", 1) for item in text.split("\0") if "=" in item)


@pytest.fixture(scope="module")
def node(sysnodes, tmp_path_factory):
    made = sysnodes(NODE)
    made.outputs = []
    made.add_apt_source()  # the site's Debian mirror: docker.io for the docker role
    keyring = tmp_path_factory.mktemp("frp-gpg") / "gpgkeys"
    secrets.make_keyring(keyring)
    made.import_pillar_key(keyring, tmp_path_factory.mktemp("frp-key"))
    made.write_pillar("site/secrets.sls", secrets.secrets_sls(keyring, SECRETS))
    made.write_pillar(f"site/nodes/{NODE}.sls", json.dumps(_pillar(frp_client=False)))
    made.salt_call("saltutil.sync_all")
    made.keyring = keyring
    assert _failed(_apply(made)) == {}  # the docker role: the engine the frpc containers run on
    saved = subprocess.run(["docker", "save", "ccc-test/tiny:1"], capture_output=True, check=True).stdout
    subprocess.run(["docker", "exec", "-i", made.container, "docker", "load"], input=saved, capture_output=True, check=True)
    made.exec(["docker", "build", "-q", "-t", "lukacu/frpc:latest", "-"], input=STAND_IN)
    yield made
    secrets.stop_agent(keyring)


@pytest.fixture(scope="module")
def applied(node):
    node.write_pillar(f"site/nodes/{NODE}.sls", json.dumps(_pillar()))
    return _apply(node)


def test_one_frpc_per_network_with_the_env_binds_and_network_it_needs(node, applied):
    assert _failed(applied) == {}, applied
    for name, network, log in ((LAB, "lab-unrestricted", "lab.log"), (STUDENT, "student-restricted", "student.log")):
        attrs = _inspect(node, name)
        env = dict(item.split("=", 1) for item in attrs["Config"]["Env"])
        assert {key: env[key] for key in env if key.startswith("FRPC_")} == {
            "FRPC_SERVER_ADDRESS": "10.234.0.1", "FRPC_SERVER_PORT": "7000", "FRPC_PREFIX": NODE,
            "FRPC_LOGFILE": f"/var/log/frpc/{log}", "FRPC_LOG_LEVEL": "info", "FRPC_NETWORK": network}
        assert sorted(attrs["HostConfig"]["Binds"]) == [
            f"/etc/ccc-salt/secrets/containers/{name}.env:/run/ccc-secrets/env:ro",
            "/run/ccc-docker-api/" + name + ".sock:/var/run/docker.sock:ro", "/var/log/frpc:/var/log/frpc:rw"]
        assert list(attrs["NetworkSettings"]["Networks"]) == [network]
        assert attrs["Config"]["Labels"]["ccc.cluster-role"] == "frp_client"
        assert attrs["HostConfig"]["RestartPolicy"]["Name"] == "always" and attrs["State"]["Running"]
        assert f"frpc stand-in on {network}" in node.exec(["cat", f"/var/log/frpc/{log}"]).stdout


def test_the_token_and_credentials_reach_the_process_and_nothing_else(node, applied):
    inside = _environ(node, LAB)
    assert inside["FRPC_AUTH_TOKEN"] == TOKEN
    assert (inside["FRP_CCC_METRICS_USER"], inside["FRP_CCC_METRICS_PASSWORD"]) == ("prom-c1", "metrics-pass-5d0e")
    assert (inside["FRP_CCC_MONITOR_USER"], inside["FRP_CCC_MONITOR_PASSWORD"]) == ("mon-c1", "monitor-pass-88f1")
    assert "FRP_CCC_PATROLLER_WEBUI_USER" not in inside  # not in the secrets: not offered
    assert node.exec("stat -c %a /etc/ccc-salt/secrets/containers /etc/ccc-salt/secrets/containers/*.env").stdout.split() \
        == ["700", "600", "600"]
    texts = list(node.outputs)
    texts += [(f"inspect {name}", node.exec(["docker", "inspect", name]).stdout) for name in (LAB, STUDENT)]
    texts.append(("files under /etc (but the env files), /var/log, /root",
                  node.exec("grep -rIa -l --exclude-dir=gpgkeys --exclude-dir=containers -e frp-token -e -pass- "
                            "/etc /var/log /root 2>/dev/null", check=False).stdout))
    texts.append(("journal", node.exec("journalctl --no-pager -q", check=False).stdout))
    secrets.assert_no_secret(dict(texts), SECRET_VALUES)


def test_a_second_apply_changes_nothing(node, applied):
    again = _apply(node)
    assert _failed(again) == {}
    assert {key: value["changes"] for key, value in again.items() if value["changes"]} == {}


DOCKER_GEN_CALLS = [("HEAD", "/_ping"), ("GET", "/_ping"), ("GET", "/version"), ("GET", "/v1.41/info"),
                    ("GET", "/v1.41/containers/json?all=1"), ("GET", "/v1.41/networks")]


def test_each_frpc_has_its_own_proxy_socket_and_never_the_engines(node, applied):
    for name in (LAB, STUDENT):
        api.assert_no_engine_socket(node, name)
        assert node.exec(["systemctl", "is-enabled", f"ccc-docker-api@{name}.socket"]).stdout.strip() == "enabled"


def test_what_docker_gen_needs_passes_through_the_proxy(node, applied):
    student = _inspect(node, STUDENT)["Id"]
    answers = api.assert_needs_pass(node, LAB, DOCKER_GEN_CALLS + [("GET", f"/v1.41/containers/{student}/json")])
    assert answers[-1]["body"].startswith('{"Id":"' + student)  # the real engine's answer


def test_attacks_from_inside_frpc_are_refused_and_change_nothing(node, applied):
    api.assert_attacks_refused(node, LAB, _inspect(node, STUDENT)["Id"])
    assert "NOSRV" in node.exec(["journalctl", "--no-pager", "-q", "-u", f"ccc-docker-api@{LAB}.service"]).stdout


def test_docker_events_reach_frpc_through_the_proxy(node, applied):
    event = api.event_through_proxy(node, LAB)
    assert (event["Type"], event["Action"]) == ("container", "create")


def test_a_proxy_socket_replaced_by_hand_makes_the_next_apply_recreate_frpc(node, applied):
    """A restarted socket unit makes a new socket file; the running frpc still holds the old one."""
    node.exec(["systemctl", "restart", f"ccc-docker-api@{LAB}.socket"])
    dead = node.exec([str(api.PYTHON), str(api.PROBE), api.container_socket(node, LAB), '[["GET", "/_ping", null]]'],
                     check=False)
    assert dead.returncode != 0 and "ConnectionRefusedError" in dead.stderr
    fixed = _apply(node)
    assert fixed[f"ccc-cluster-frp_client-container-{LAB}"]["changes"] == {
        "recreated": LAB, "differences": ["docker api socket replaced since the container started"]}
    api.assert_needs_pass(node, LAB, DOCKER_GEN_CALLS)


def test_a_new_token_recreates_both_without_showing_it(node, applied):
    node.write_pillar("site/secrets.sls", secrets.secrets_sls(node.keyring, dict(SECRETS, frp={"token": NEW_TOKEN})))
    changed = _apply(node)
    assert _failed(changed) == {}
    for name in (LAB, STUDENT):
        assert changed[f"ccc-cluster-frp_client-container-{name}"]["changes"] == {
            "recreated": name, "differences": ["secret FRPC_AUTH_TOKEN changed"]}
        assert _environ(node, name)["FRPC_AUTH_TOKEN"] == NEW_TOKEN
    secrets.assert_no_secret(dict(node.outputs[-2:]), SECRET_VALUES)


def test_a_removed_network_entry_removes_its_container(node, applied):
    node.write_pillar(f"site/nodes/{NODE}.sls", json.dumps(_pillar(watched=WATCHED[:1])))
    fewer = _apply(node)
    assert fewer["ccc-cluster-frp_client-prune"]["changes"] == {"removed": [STUDENT]}
    assert node.exec(["docker", "ps", "-a", "--format", "{{.Names}}"]).stdout.split() == [LAB]
    assert node.exec("ls /etc/ccc-salt/secrets/containers").stdout.split() == [f"{LAB}.env"]
    assert node.exec("ls /etc/ccc-docker-api").stdout.split() == [f"{LAB}.cfg"]  # its proxy went with it
    assert node.exec("ls /run/ccc-docker-api").stdout.split() == [f"{LAB}.sock"]


def test_frpc_comes_back_after_a_reboot(node, applied):
    node.restart()
    node.exec("for i in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done")
    assert node.exec(["docker", "inspect", "-f", "{{.State.Running}}", LAB]).stdout.strip() == "true"
    assert _environ(node, LAB)["FRPC_AUTH_TOKEN"] == NEW_TOKEN
    # the socket unit started before dockerd: the container got the proxy's socket again, not a folder
    api.assert_no_engine_socket(node, LAB)
    api.assert_needs_pass(node, LAB, DOCKER_GEN_CALLS)
    api.assert_attacks_refused(node, LAB, _inspect(node, LAB)["Id"])


def test_absent_removes_the_containers_and_keeps_the_logs(node, applied):
    node.write_pillar(f"site/nodes/{NODE}.sls", json.dumps(_pillar(frp_client="absent")))
    gone = _apply(node)
    assert _failed(gone) == {}
    assert gone["ccc-cluster-frp_client-clean-containers"]["changes"] == {"removed": [LAB]}
    assert node.exec(["docker", "ps", "-aq"]).stdout.split() == []
    assert node.exec("ls -A /etc/ccc-docker-api; ls -A /run/ccc-docker-api", check=False).stdout.split() == []
    assert node.exec(["systemctl", "is-enabled", f"ccc-docker-api@{LAB}.socket"], check=False).stdout.strip() == "disabled"
    assert node.exec("ls -A /etc/ccc-salt/secrets/containers").stdout.split() == []
    assert "frpc stand-in on lab-unrestricted" in node.exec(["cat", "/var/log/frpc/lab.log"]).stdout
