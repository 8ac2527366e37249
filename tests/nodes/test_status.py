"""`salt-run ccc.status` as an admin runs it on a master: a systemd test node (tests/support/sysnode.py)
with a real salt-minion, the docker role applied for real (engine, a restricted network's egress
firewall unit, the Portainer agent container), asked through the master.

All ok: the node's three services show ``ok`` and the command exits 0. Then the firewall unit is
stopped and the agent container killed: both are named with their reason and the exit code is
non-zero. A node whose minion is stopped is listed as not answering within the timeout.

The agent's image cannot be pulled here: ``ccc-test/tiny:1`` (a static busybox that sleeps,
tests/images/build.sh) stands in under the configured name, loaded into the node's dockerd."""

import json
import subprocess
import time

import pytest

from support import aptrepo
from support.sysnode import HOST_IP, REPO, VENV, accept_minion

pytestmark = pytest.mark.docker

NODE = "status-node"
AGENT_IMAGE = "ccc-test/portainer-agent:status"
NETWORKS = {"lab-unrestricted": {"subnet": "172.31.0.0/24", "gateway": "172.31.0.1", "bridge_name": "ccc-lab"},
            "student-restricted": {"subnet": "172.31.1.0/24", "gateway": "172.31.1.1", "bridge_name": "ccc-student",
                                   "restricted_access": ["10.99.0.0/24"], "allowed_access": ["10.99.0.3"]}}


@pytest.fixture(scope="module")
def master(salt_factories, tmp_path_factory, node_repo):
    """A salt-master on the test network serving this checkout: states, the ``ccc`` runner and
    ``_utils`` (as scripts/master_config.py sets them), and a pillar root of this test."""
    pillar = tmp_path_factory.mktemp("status-pillar")
    overrides = {"interface": HOST_IP, "file_roots": {"base": [str(REPO / "salt")]},
                 "pillar_roots": {"base": [str(pillar)]},
                 "runner_dirs": [str(REPO / "_runners")], "utils_dirs": [str(REPO / "_utils")]}
    factory = salt_factories.salt_master_daemon("ccc-status-master", overrides=overrides)
    factory.pillar_dir = pillar
    with factory.started():
        yield factory


def write_pillar(master, node_repo, agent):
    ccc = {"roles": {"docker": True}, "only_roles": "docker",
           "cluster": {"networks": NETWORKS},
           "docker": {"repositories": {"ccc-test": {
               "source": f"deb [signed-by=/etc/apt/keyrings/ccc-test.asc] file:{aptrepo.NODE_PATH} ./",
               "key": node_repo.armored_key_path.read_text()}},
               "portainer_agent": {"enabled": agent, "image": AGENT_IMAGE}}}
    (master.pillar_dir / "top.sls").write_text("base:\n  '*':\n    - status\n")
    (master.pillar_dir / "status.sls").write_text(json.dumps({"ccc": ccc}))


def salt_call(node, *args):
    """``salt-call`` in the node through its minion config (pillar and files from the master)."""
    call = node.exec([str(VENV / "bin" / "salt-call"), "--config-dir", "/etc/salt", "--out", "json", *args],
                     check=False, timeout=900)
    return json.loads(call.stdout)["local"] if call.stdout.strip() else call.stderr


def assert_applied(states):
    assert isinstance(states, dict), states
    failed = {key: value["comment"] for key, value in states.items() if value["result"] is not True}
    assert failed == {}


@pytest.fixture(scope="module")
def node(sysnodes, master, node_repo):
    made = sysnodes(NODE)
    write_pillar(master, node_repo, agent=False)
    made.start_minion(HOST_IP, master.config["ret_port"], master.config["publish_port"])
    accept_minion(master, NODE)
    assert master.salt_cli(timeout=120).run("saltutil.sync_all", minion_tgt=NODE).returncode == 0
    started = time.monotonic()
    assert_applied(salt_call(made, "state.apply", "cluster.docker"))
    # The engine runs now: the agent's stand-in image goes into it, then the agent is switched on.
    saved = subprocess.run(["docker", "save", "ccc-test/tiny:1"], capture_output=True, check=True).stdout
    subprocess.run(["docker", "exec", "-i", made.container, "docker", "load"], input=saved,
                   capture_output=True, check=True)
    made.exec(["docker", "tag", "ccc-test/tiny:1", AGENT_IMAGE])
    write_pillar(master, node_repo, agent=True)
    assert_applied(salt_call(made, "state.apply", "cluster.docker"))
    assert master.salt_cli(timeout=60).run("saltutil.refresh_pillar", minion_tgt=NODE).returncode == 0
    print(f"docker role applied twice through the master in {time.monotonic() - started:.1f} s")
    return made


def status(master, *args):
    started = time.monotonic()
    ran = master.salt_run_cli(timeout=120).run("ccc.status", *args)
    print(f"salt-run ccc.status {' '.join(args)}: {time.monotonic() - started:.1f} s, exit {ran.returncode}")
    assert isinstance(ran.data, dict), ran.stdout + ran.stderr
    return ran.returncode, ran.data


def test_status_shows_the_roles_services_ok_then_what_broke(master, node):
    code, data = status(master, f"tgt={NODE}")
    assert data["nodes"] == {NODE: {"docker": {"docker.service": "ok", "ccc-docker-firewall.service": "ok",
                                               "container portainer-agent": "ok"}}}
    assert data["health"] == [f"{NODE}: ok (3 services)"] and data["not_answering"] == []
    assert code == 0

    node.exec(["systemctl", "stop", "ccc-docker-firewall.service"])
    node.exec(["docker", "kill", "portainer-agent"])
    code, data = status(master, f"tgt={NODE}")
    assert data["health"] == [
        f"{NODE}: docker/ccc-docker-firewall.service: not running",
        f"{NODE}: docker/container portainer-agent: not running (exited, exit code 137)",
    ]
    assert data["nodes"][NODE]["docker"]["docker.service"] == "ok"
    assert code != 0


def test_a_node_whose_minion_is_down_is_named_within_the_timeout(master, node):
    node.exec(["systemctl", "stop", "ccc-test-salt-minion.service"])
    try:
        started = time.monotonic()
        code, data = status(master, "timeout=5")
        assert time.monotonic() - started < 60
        assert data["not_answering"] == [NODE] and data["health"] == [f"{NODE}: did not answer"]
        assert code != 0
    finally:
        node.exec(["systemctl", "start", "ccc-test-salt-minion.service"])
