"""The mellanox role: its pillar rules, and ``state.apply cluster test=True`` through salt-call
(masterless; never a real apply on this machine) for sample node1 when ``ccc:only_roles`` names
it: the repository with its key, the conflicting packages removed only while OFED is not
installed, the OFED packages, openibd restarted only on their change. Render and test mode here;
the install itself runs for real on a test node with stand-in OFED packages: tests/nodes/test_mellanox.py."""

import pytest

from support import role_files, site

import ccc_mellanox

KEY = "-----BEGIN PGP PUBLIC KEY BLOCK-----\nmQINBFake\n-----END PGP PUBLIC KEY BLOCK-----\n"
SOURCE = "deb [signed-by=/etc/apt/keyrings/mlnx.asc] https://linux.mellanox.com/public/repo/mlnx_ofed/latest/debian12.1/amd64 ./"
SETTINGS = {"repositories": {"mlnx": {"source": SOURCE, "key": KEY}}, "packages": ["mlnx-ofed-all", "mlnx-fw-updater"],
            "conflicting_packages": ["libibverbs1", "librdmacm1", "openmpi-bin"], "service": "openibd"}
SCHEMA = role_files.schema("mellanox")


def test_conflicting_packages_go_only_while_ofed_is_not_installed():
    before = ccc_mellanox.plan(SETTINGS, ofed_installed=False, schema=SCHEMA)
    assert before["problems"] == [] and before["remove"] == ["libibverbs1", "librdmacm1", "openmpi-bin"]
    assert before["repositories"]["mlnx"]["file"] == "/etc/apt/sources.list.d/ccc-mellanox-mlnx.list"
    assert ccc_mellanox.plan(SETTINGS, ofed_installed=True, schema=SCHEMA)["remove"] == []
    none = dict(SETTINGS, conflicting_packages=[])
    assert ccc_mellanox.plan(none, ofed_installed=False, schema=SCHEMA)["remove"] == []


@pytest.mark.parametrize("change, problem", [
    ({"packages": []}, "ccc:mellanox:packages must be a non-empty list of Debian package names"),
    ({"packages": ["mlnx-ofed-all; reboot"]}, "ccc:mellanox:packages: 'mlnx-ofed-all; reboot' is not a Debian"),
    ({"conflicting_packages": ["mlnx-ofed-all"]}, "mlnx-ofed-all both installed and removed"),
    ({"repositories": {"mlnx": {"source": SOURCE.replace("mlnx.asc", "other.asc"), "key": KEY}}}, "source must be one line"),
    ({"repositories": {"mlnx": {"source": SOURCE, "key": "not a key"}}}, "key must be the ASCII-armored public key"),
    ({"service": "openibd; reboot"}, "ccc:mellanox:service must be a unit name"),
])
def test_bad_pillars_are_named(change, problem):
    assert any(problem in text for text in ccc_mellanox.plan(dict(SETTINGS, **change), False, SCHEMA)["problems"])


@pytest.fixture(scope="module")
def node1(tmp_path_factory):
    root = tmp_path_factory.mktemp("mellanox-render")
    return site.SaltNode(root / "work", "node1", "unix:///nonexistent/ccc-mellanox.sock", root / "storage",
                         extra_ccc={"only_roles": "mellanox-driver", "mellanox": SETTINGS})


def _states(node):
    output, _ = node.salt_call("state.apply", "cluster", "test=True", check=False)
    assert isinstance(output, dict), output
    return {state["__id__"]: state for state in output.values()}


def test_named_in_only_roles_it_plans_repository_removal_install_and_restart(node1):
    states = _states(node1)
    assert [s["comment"] for s in states.values() if s["result"] is False] == []
    assert [k for k in sorted(states, key=lambda k: states[k]["__run_num__"]) if k.startswith("ccc-cluster-mellanox")] == [
        "ccc-cluster-mellanox-repo-key-mlnx", "ccc-cluster-mellanox-repo-mlnx", "ccc-cluster-mellanox-conflicting-packages",
        "ccc-cluster-mellanox-packages", "ccc-cluster-mellanox-service-restart"]
    assert states["ccc-cluster-mellanox-repo-key-mlnx"]["name"] == "/etc/apt/keyrings/mlnx.asc"
    assert states["ccc-cluster-mellanox-repo-mlnx"]["name"] == SOURCE
    # openibd restarts only on a change of the packages (onchanges): in test mode it waits on them
    assert states["ccc-cluster-mellanox-service-restart"]["result"] is not False
    assert "mellanox" in states["ccc-cluster-roles-summary"]["name"]


def test_not_named_it_is_skipped_and_a_bad_pillar_fails_clearly(node1):
    node1.write_pillar({"only_roles": "timezone", "roles": {"mellanox": True}, "mellanox": SETTINGS})
    states = _states(node1)
    assert not any(k.startswith("ccc-cluster-mellanox") for k in states)
    assert states["ccc-cluster-roles-summary"]["name"].startswith("cluster roles applied: timezone;")
    node1.write_pillar({"only_roles": "mellanox", "mellanox": dict(SETTINGS, packages=[])})
    states = _states(node1)
    assert states["ccc-cluster-mellanox-settings"]["result"] is False
    assert states["ccc-cluster-mellanox-settings"]["comment"] == (
        "ccc:mellanox is not valid, nothing changed: ccc:mellanox:packages must be a non-empty list of Debian "
        "package names (nothing to install otherwise), got []")
