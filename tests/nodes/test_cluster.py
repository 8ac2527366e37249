"""`state.apply cluster` as an admin runs it, on a fresh systemd test node (tests/support/sysnode.py):
every role on (the NVIDIA driver and toolkit from the repo's stand-in packages: FAKES, see
tests/support/aptrepo.py), secrets from a GPG-encrypted pillar encrypted to a throwaway key. The
first run brings the node up, a run that switches the portainer agent on (its secret from the
encrypted pillar) changes only that, the next run changes nothing; no secret appears in any
output, log, file under /etc or /var/log, or container environment, except the one place
documented for it: the portainer agent's ``AGENT_SECRET``. The durations are printed (the
benchmark ``bench/cluster_apply.py`` reports the same per role).

The node shares the host's kernel: its inotify limits are set to the host's current values, so
the role writes its sysctl file and changes nothing outside the node."""

import json
import pathlib
import subprocess
import time

import pytest

from support import secrets
from support.sysnode import failed as _failed

pytestmark = pytest.mark.docker

AGENT_IMAGE = "portainer/agent:2.19.4"
SECRETS = {"portainer": {"agent_secret": "agent-secret-7d1f0c"},
           "frp": {"token": "frp-token-59e2aa"},
           "basic_auth": {"metrics": {"user": "prom", "password": "metrics-pass-0b3c"}},
           "registries": {"registry.example.org": {"username": "lab", "password": "registry-pass-a1f4"}}}
SECRET_VALUES = ["agent-secret-7d1f0c", "frp-token-59e2aa", "metrics-pass-0b3c", "registry-pass-a1f4"]
INOTIFY = ("max_user_watches", "max_user_instances", "max_queued_events")


def _pillar(portainer):
    inotify = {key: int(pathlib.Path(f"/proc/sys/fs/inotify/{key}").read_text()) for key in INOTIFY}
    return {"ccc": {
        "roles": {"nvidia": True},
        "cluster": {
            "mount_points": {"nfs": {"user_data": "/srv/ccc/shared/user_data"}, "local": {"sshd_data": "/srv/ccc/local/sshd"}},
            "networks": {"lab-unrestricted": {"subnet": "172.31.0.0/24", "gateway": "172.31.0.1", "bridge_name": "ccc-lab"},
                         "student-restricted": {"subnet": "172.31.1.0/24", "gateway": "172.31.1.1",
                                                "bridge_name": "ccc-student", "restricted_access": ["10.99.0.0/24"],
                                                "allowed_access": ["10.99.0.3"]},
                         "claims": {"subnet": "172.31.2.0/24", "gateway": "172.31.2.1", "bridge_name": "ccc-claims"}}},
        # registry logins need a reachable registry: tests/integration/test_docker_registry_login.py
        "docker": {"nvidia_toolkit": {"enabled": True}, "registries": [],
                   "daemon": {"log-driver": "json-file", "log-opts": {"max-size": "50m", "max-file": "3"}},
                   "portainer_agent": {"enabled": portainer, "image": AGENT_IMAGE}},
        "fail2ban": {"ignore_country": None},
        "inotify": inotify,
        "nvidia": {"driver_version": "550"},
        "sshd_hostkeys": {"backup_dir": "/var/backups/ccc-salt/host-keys"},
        "timezone": {"name": "Europe/Ljubljana"},
    }}


def _apply(node, timings, label):
    started = time.monotonic()
    call = node.salt_call("-l", "debug", "state.apply", "cluster", check=False)
    timings[label] = time.monotonic() - started
    states = call.states()
    node.outputs.append((f"{label} stdout", call.stdout))
    node.outputs.append((f"{label} log", call.stderr))
    return states


@pytest.fixture(scope="module")
def node(sysnodes, tmp_path_factory):
    made = sysnodes("cluster-full", host_sysctl=True)
    made.outputs = []
    made.add_apt_source()  # the site's Debian mirror, standing in for the one every node has
    made.exec("mkdir -p /srv/ccc/shared/user_data /srv/ccc/local/sshd")  # the NFS share and local disk
    keyring = tmp_path_factory.mktemp("cluster-gpg") / "gpgkeys"
    secrets.make_keyring(keyring)
    made.import_pillar_key(keyring, tmp_path_factory.mktemp("cluster-key"))
    made.write_pillar("site/secrets.sls", secrets.secrets_sls(keyring, SECRETS))
    made.write_pillar("site/nodes/cluster-full.sls", json.dumps(_pillar(portainer=False)))
    made.salt_call("saltutil.sync_all")
    secrets.stop_agent(keyring)
    return made


@pytest.fixture(scope="module")
def runs(node):
    """The three applies: fresh node, portainer agent switched on, no-op; and their durations."""
    timings = {}
    first = _apply(node, timings, "first")
    if _failed(first):
        pytest.fail("the first apply failed:\n" + "\n".join(f"{k}: {v}" for k, v in _failed(first).items()))
    # The agent's image cannot be pulled here: the test image stands in under its name.
    saved = subprocess.run(["docker", "save", "ccc-test/tiny:1"], capture_output=True, check=True).stdout
    subprocess.run(["docker", "exec", "-i", node.container, "docker", "load"], input=saved, capture_output=True, check=True)
    node.exec(["docker", "tag", "ccc-test/tiny:1", AGENT_IMAGE])
    node.write_pillar("site/nodes/cluster-full.sls", json.dumps(_pillar(portainer=True)))
    second = _apply(node, timings, "portainer on")
    third = _apply(node, timings, "no-op")
    print("state.apply cluster on a fresh node: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
    return first, second, third


def test_a_fresh_node_comes_up_and_the_next_run_changes_nothing(node, runs):
    first, second, third = runs
    assert _failed(first) == {}, "\n".join(f"{k}: {v}" for k, v in _failed(first).items())
    assert _failed(second) == {}
    assert {key: value["changes"] for key, value in second.items() if value["changes"]}.keys() \
        <= {key for key in second if "portainer" in key}, "switching the agent on changed more than the agent"
    assert any(value["changes"] for key, value in second.items() if "portainer" in key)
    assert _failed(third) == {}
    assert {key: value["changes"] for key, value in third.items() if value["changes"]} == {}


def test_every_role_ran_in_the_documented_order(runs):
    first = runs[0]
    order = []
    for value in sorted(first.values(), key=lambda state: state["__run_num__"]):
        role = value["__sls__"].split(".")[1] if value["__sls__"].startswith("cluster.") else None
        if role and role not in order:
            order.append(role)
    assert order == ["fail2ban", "nvidia", "docker", "monitoring_agent", "inotify", "sshd_hostkeys", "timezone"]


def test_the_node_runs_what_the_roles_set_up(node, runs):
    def out(command):
        return node.exec(command, check=False).stdout.strip()
    assert out("systemctl is-active docker fail2ban nvidia-persistenced").split() == ["active"] * 3
    held = set(out("apt-mark showhold").split())  # the driver branch is held; the unpinned engine and toolkit not
    assert "nvidia-headless-550" in held and not {"docker.io", "nvidia-container-toolkit"} & held, held
    assert json.loads(out("cat /etc/docker/daemon.json"))["default-runtime"] == "nvidia"
    assert out("iptables -S DOCKER-USER").splitlines()[1] == "-A DOCKER-USER -j CCC-EGRESS"
    assert "-A INPUT -j CCC-EGRESS-INPUT" in out("iptables -S INPUT").splitlines()  # below fail2ban's jumps, if any
    assert out("readlink /etc/localtime").endswith("Europe/Ljubljana")
    assert out("docker inspect -f '{{.State.Running}}' portainer-agent") == "true"


def test_no_secret_appears_anywhere_but_the_agents_own_variable(node, runs):
    texts = list(node.outputs)
    texts.append(("files under /etc, /var/log, /var/backups, /root, /srv",
                  node.exec("grep -rIa --exclude-dir=gpgkeys -l -e agent-secret-7d1f0c -e frp-token-59e2aa "
                            "-e metrics-pass-0b3c -e registry-pass-a1f4 /etc /var/log /var/backups /root /srv "
                            "/run/ccc-salt 2>/dev/null", check=False).stdout))
    texts.append(("journal", node.exec("journalctl --no-pager -q", check=False).stdout))
    for name in node.exec("docker ps -aq", check=False).stdout.split():
        inspect = json.loads(node.exec(["docker", "inspect", name]).stdout)[0]
        env = inspect["Config"]["Env"] or []
        if inspect["Name"] == "/portainer-agent":
            assert "AGENT_SECRET=agent-secret-7d1f0c" in env  # the documented exception
            env = [item for item in env if not item.startswith("AGENT_SECRET=")]
        texts.append((f"container {inspect['Name']} env and labels", json.dumps([env, inspect["Config"]["Labels"]])))
    secrets.assert_no_secret(dict(texts), SECRET_VALUES)
