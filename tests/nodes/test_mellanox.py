"""The mellanox role's driver install applied for real on a systemd test node
(tests/support/sysnode.py), through ``state.apply cluster`` with ``ccc:only_roles`` naming it:
the conflicting distribution package removed, OFED installed, openibd restarted once; a second
apply changes nothing and restarts nothing; without ``only_roles`` naming it the role is skipped
even when ``ccc:roles:mellanox`` is true.

FAKES (tests/support/aptrepo.py's table): ``mlnx-ofed-all``, ``mlnx-fw-updater`` and the
conflicting ``libibverbs1`` are stand-in packages of the test apt repository (no Mellanox archive,
no adapter here). Their programs (openibd's start/stop, the firmware updater's postinst) append a
line to ``/var/log/ccc-fake-mlnx.log`` on the node, which is what the tests read. The repository
reaches the node through the role's own ``ccc:mellanox:repositories`` (source line + armored key
from pillar), so the role's repository states are exercised too."""

import json

import pytest

from support import aptrepo
from support.sysnode import changed, failed

pytestmark = pytest.mark.docker

LOG = "/var/log/ccc-fake-mlnx.log"
PILLAR_FILE = "site/nodes/mlnx.sls"


def sh(node, command):
    """Run a shell command in the node: (returncode, stdout + stderr)."""
    result = node.exec(command, check=False)
    return result.returncode, (result.stdout or "") + (result.stderr or "")


def installed(node, package):
    """True when dpkg has ``package`` fully installed on the node."""
    return sh(node, f"dpkg-query -W -f '${{db:Status-Abbrev}}' {package}")[1].strip() == "ii"


def apply(node):
    return node.salt_call("state.apply", "cluster", check=False).states()


@pytest.fixture(scope="module")
def node(sysnodes, node_repo):
    """A node with the conflicting package installed by hand (dpkg, from the mounted repo) and a
    pillar that points the role at the test repository and runs only it."""
    made = sysnodes("mlnx")
    code, out = sh(made, f"dpkg -i {aptrepo.NODE_PATH}/libibverbs1_*.deb")
    assert code == 0, out
    made.mellanox = {"repositories": {"ccc-test": {
        "source": f"deb [signed-by=/etc/apt/keyrings/ccc-test.asc] file:{aptrepo.NODE_PATH} ./",
        "key": node_repo.armored_key_path.read_text()}},
        "conflicting_packages": ["libibverbs1"]}
    pillar = {"ccc": {"roles": {"mellanox": True}, "only_roles": "mellanox", "mellanox": made.mellanox}}
    made.write_pillar(PILLAR_FILE, json.dumps(pillar))
    made.salt_call("saltutil.sync_all")
    return made


@pytest.fixture(scope="module")
def applies(node):
    """(first apply, fake log after it, second apply, fake log after it)."""
    first = apply(node)
    log_first = sh(node, f"cat {LOG}")[1]
    second = apply(node)
    return first, log_first, second, sh(node, f"cat {LOG}")[1]


def test_conflicting_package_goes_ofed_comes_and_openibd_starts_once(node, applies):
    first, log, _, _ = applies
    assert failed(first) == {}
    assert "libibverbs1" in first["ccc-cluster-mellanox-conflicting-packages"]["changes"]
    assert not installed(node, "libibverbs1")
    assert installed(node, "mlnx-ofed-all") and installed(node, "mlnx-fw-updater")
    assert sh(node, "cat /etc/apt/sources.list.d/ccc-mellanox-ccc-test.list")[1].strip() \
        == node.mellanox["repositories"]["ccc-test"]["source"]
    assert first["ccc-cluster-mellanox-service-restart"]["changes"]
    assert sh(node, "systemctl is-active openibd")[1].strip() == "active"
    lines = [line.split(" ", 1)[1].strip() for line in log.splitlines()]
    assert lines.count("openibd start") == 1 and "openibd stop" not in lines, log
    assert lines.count("mlnx-fw-updater postinst configure") == 1, log


def test_second_apply_changes_nothing_and_does_not_restart_openibd(node, applies):
    _, log_first, second, log_second = applies
    assert failed(second) == {}
    assert changed(second) == {}
    assert "ccc-cluster-mellanox-conflicting-packages" not in second  # OFED is installed now
    assert log_second == log_first


def test_role_is_skipped_unless_only_roles_names_it(node, applies):
    """Every other role is switched off here so the run stays small; mellanox is switched on."""
    code, _ = sh(node, f"dpkg -i {aptrepo.NODE_PATH}/libibverbs1_*.deb")
    assert code == 0
    log_before = sh(node, f"cat {LOG}")[1]
    roles = {role: False for role in node.salt_call("ccc_cluster.roles").data["skipped"]}
    roles["mellanox"] = True
    node.write_pillar(PILLAR_FILE, json.dumps({"ccc": {"roles": roles, "mellanox": node.mellanox}}))
    plan = node.salt_call("ccc_cluster.roles").data
    assert plan["apply"] == [] and plan["skipped"]["mellanox"] == "runs only when ccc:only_roles names it"
    run = apply(node)
    assert failed(run) == {}
    assert not [key for key in run if key.startswith("ccc-cluster-mellanox")]
    assert run["ccc-cluster-roles-summary"]["name"].startswith("cluster roles applied: none;")
    assert installed(node, "libibverbs1")
    assert sh(node, f"cat {LOG}")[1] == log_before
