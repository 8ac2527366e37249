"""The netplan role against Debian's real ``netplan`` (installed by scripts/setup.sh --test):
every sample node's file is accepted by ``netplan generate --root-dir`` and the networkd files it
generates say what the pillar said; the state (``_states/ccc_netplan.py`` with the real execution
module) refuses a broken pillar and a change netplan rejects before writing anything.

FAKE: ``netplan apply`` is never run on this machine: the state's ``ccc_netplan.apply`` is a
recorder here (tests/nodes/test_netplan.py applies for real on a test node). The node's own
netplan folders are a scratch tree (``ROOT``), the role's file goes to a scratch /etc/netplan.
"""

import os
import shutil
import subprocess

import pytest
import yaml

from salt.exceptions import CommandExecutionError

from support import site
from support.scripts import load_module

import ccc_netplan

DEFAULTS = yaml.safe_load((site.REPO / "salt" / "cluster" / "netplan" / "defaults.yaml").read_text())["netplan"]
NETPLAN = shutil.which("netplan") or "/usr/sbin/netplan"


@pytest.fixture(scope="module", autouse=True)
def netplan_installed():
    assert os.access(NETPLAN, os.X_OK), "netplan is missing: bash scripts/setup.sh --test installs netplan.io"


def _networkd(settings, tmp_path):
    """``netplan generate --root-dir`` of the role's file alone: {file name: [(section, key, value)]}."""
    document, problems = ccc_netplan.build(settings)
    assert problems == []
    target = tmp_path / "etc" / "netplan" / "90-ccc-salt.yaml"
    target.parent.mkdir(parents=True)
    target.write_text(ccc_netplan.render(document))
    target.chmod(0o600)
    proc = subprocess.run([NETPLAN, "generate", "--root-dir", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "too open" not in proc.stderr
    files = {}
    for path in (tmp_path / "run" / "systemd" / "network").iterdir():
        section, entries = None, []
        for line in path.read_text().splitlines():
            if line.startswith("["):
                section = line.strip("[]")
            elif "=" in line:
                key, value = line.split("=", 1)
                entries.append((section, key, value))
        files[path.name] = entries
    return files


def _sample(node):
    return site.deep_merge(DEFAULTS, site.sample_ccc(node)["netplan"])


def test_node1_addresses_gateways_routes_nameservers_mac_and_mtu(tmp_path):
    files = _networkd(_sample("node1"), tmp_path)
    eno1 = files["10-netplan-eno1.network"]
    assert {("Network", "Address", "192.168.10.11/24"), ("Network", "Address", "fd00:10::11/64"),
            ("Network", "DNS", "192.168.10.1"), ("Network", "Domains", "lab.example.org"),
            ("Route", "Gateway", "192.168.10.1"), ("Route", "Gateway", "fd00:10::1"),  # each gateway its own value
            ("Route", "Destination", "10.20.0.0/16"), ("Route", "Gateway", "192.168.10.254"),
            ("Route", "Metric", "100")} <= set(eno1)
    assert not any(key == "MTUBytes" for _, key, _ in eno1)  # no MTU unless pillar sets one
    assert {("Match", "PermanentMACAddress", "3c:ec:ef:10:11:02"), ("Link", "Name", "eno2"),
            ("Link", "MTUBytes", "9000")} <= set(files["10-netplan-eno2.link"])
    assert ("Network", "Address", "10.99.0.11/24") in files["10-netplan-eno2.network"]


def test_node2_bond_of_two_nics(tmp_path):
    files = _networkd(_sample("node2"), tmp_path)
    assert {("NetDev", "Kind", "bond"), ("NetDev", "Name", "bond0"), ("NetDev", "MTUBytes", "9000"),
            ("Bond", "Mode", "802.3ad"), ("Bond", "LACPTransmitRate", "fast"),
            ("Bond", "TransmitHashPolicy", "layer3+4")} <= set(files["10-netplan-bond0.netdev"])
    for nic in ("eno1", "eno2"):
        assert ("Network", "Bond", "bond0") in files[f"10-netplan-{nic}.network"]
    assert {("Network", "Address", "192.168.10.12/24"), ("Route", "Gateway", "192.168.10.1"),
            ("Network", "DNS", "192.168.10.1")} <= set(files["10-netplan-bond0.network"])


def test_node3_vlans_on_the_lab_nic(tmp_path):
    files = _networkd(_sample("node3"), tmp_path)
    assert {("Network", "VLAN", "vlan20"), ("Network", "VLAN", "vlan30"),
            ("Network", "Address", "192.168.10.13/24")} <= set(files["10-netplan-eno1.network"])
    assert {("NetDev", "Kind", "vlan"), ("VLAN", "Id", "20")} <= set(files["10-netplan-vlan20.netdev"])
    assert {("Network", "Address", "10.20.0.13/24"), ("Route", "Destination", "10.21.0.0/16"),
            ("Route", "Gateway", "10.20.0.1")} <= set(files["10-netplan-vlan20.network"])
    assert {("VLAN", "Id", "30"), ("NetDev", "MTUBytes", "1496")} <= set(files["10-netplan-vlan30.netdev"])
    assert ("Network", "DHCP", "ipv4") in files["10-netplan-vlan30.network"]


@pytest.fixture
def state(tmp_path, monkeypatch):
    """The state module over the real execution module, the node's netplan tree under
    ``tmp_path/root`` and the role's folder ``tmp_path/root/etc/netplan``; ``state.applied``
    records ``netplan apply`` calls (FAKE, see the module docstring)."""
    root = tmp_path / "root"
    (root / "etc" / "netplan").mkdir(parents=True)
    module = load_module("_modules/ccc_netplan.py", "ccc_netplan_exec_under_test",
                         salt={"cp.get_file_str": lambda url: (site.REPO / "salt" / url[len("salt://"):]).read_text()})
    monkeypatch.setattr(module, "ROOT", str(root))
    monkeypatch.setattr(ccc_netplan, "NETPLAN_DIR", str(root / "etc" / "netplan"))
    applied, failures = [], []

    def apply():
        applied.append(sorted(os.listdir(root / "etc" / "netplan")))
        if failures:
            raise CommandExecutionError(failures.pop(0))
        return True

    salt = {"ccc_netplan.document": module.document, "ccc_netplan.validate": module.validate, "ccc_netplan.apply": apply}
    states = load_module("_states/ccc_netplan.py", "ccc_netplan_state_under_test", salt=salt, opts={"test": False})
    states.applied, states.failures, states.root = applied, failures, root
    states.path = root / "etc" / "netplan" / "90-ccc-salt.yaml"
    return states


def _settings(**extra):
    return site.deep_merge(DEFAULTS, extra)


GOOD = {"ethernets": {"eno1": {"addresses": ["10.77.0.5/24"]}}}


def test_the_state_writes_0600_applies_once_and_then_changes_nothing(state):
    first = state.config_managed("ccc:netplan", _settings(**GOOD))
    assert first["result"] is True, first["comment"]
    assert "+      - 10.77.0.5/24" in first["changes"]["diff"]
    assert state.path.stat().st_mode & 0o777 == 0o600
    assert yaml.safe_load(state.path.read_text())["network"]["ethernets"]["eno1"] == {"addresses": ["10.77.0.5/24"]}
    assert state.applied == [["90-ccc-salt.yaml"]]
    second = state.config_managed("ccc:netplan", _settings(**GOOD))
    assert (second["result"], second["changes"], second["comment"]) == (True, {}, f"{state.path} is up to date")
    assert len(state.applied) == 1


def test_test_mode_shows_the_diff_and_writes_nothing(state):
    state.config_managed("ccc:netplan", _settings(**GOOD))
    before = state.path.read_text()
    state.__opts__ = {"test": True}
    changed = state.config_managed("ccc:netplan", _settings(ethernets={"eno1": {"addresses": ["10.77.0.6/24"]}}))
    assert changed["result"] is None
    assert "-      - 10.77.0.5/24\n+      - 10.77.0.6/24" in changed["changes"]["diff"]
    assert state.path.read_text() == before and len(state.applied) == 1


@pytest.mark.parametrize("broken, message", [
    ({"ethernets": {"eno1": {"addresses": ["10.77.0.5/33"]}}}, "ccc:netplan:ethernets:eno1:addresses: '10.77.0.5/33'"),
    ({"ethernets": {"eno1": {}}, "vlans": {"vlan7": {"id": 7, "link": "eno8"}}}, "ccc:netplan:vlans:vlan7:link: 'eno8'"),
    ({"ethernets": {"eno1": {}}, "vlans": {"vlan7": {"id": 5000, "link": "eno1"}}}, "ccc:netplan:vlans:vlan7:id must be"),
])
def test_a_broken_pillar_is_refused_before_any_write(state, broken, message):
    state.config_managed("ccc:netplan", _settings(**GOOD))
    before = state.path.read_text()
    refused = state.config_managed("ccc:netplan", _settings(**broken))
    assert refused["result"] is False and refused["changes"] == {}
    assert refused["comment"].startswith("ccc:netplan is not valid, nothing changed: ") and message in refused["comment"]
    assert state.path.read_text() == before and len(state.applied) == 1


def test_a_change_netplan_rejects_with_the_nodes_other_files_leaves_everything(state):
    """The schema cannot see the node's other netplan files; netplan generate does."""
    state.config_managed("ccc:netplan", _settings(**GOOD))
    before = state.path.read_text()
    foreign = state.root / "etc" / "netplan" / "50-cloud-init.yaml"
    foreign.write_text("network:\n  version: 2\n  ethernets: {eno2: {}}\n  bonds:\n    bond9: {interfaces: [eno2]}\n")
    foreign.chmod(0o600)
    rejected = state.config_managed("ccc:netplan", _settings(ethernets={"eno2": {}},
                                                            bonds={"bond0": {"interfaces": ["eno2"]}}))
    assert rejected["result"] is False and rejected["changes"] == {}
    assert rejected["comment"].startswith(f"{state.path} not written, netplan rejects it (the running network is untouched): ")
    assert "interface 'eno2' is already assigned to bond bond9" in rejected["comment"]
    assert f"{state.path}:" in rejected["comment"]  # netplan's message names the node's path, not the scratch copy
    assert state.path.read_text() == before and len(state.applied) == 1


def test_a_failed_apply_puts_the_previous_file_back_and_applies_it(state):
    state.config_managed("ccc:netplan", _settings(**GOOD))
    before = state.path.read_text()
    state.failures.append("netplan apply failed: networkd did not answer")
    failed = state.config_managed("ccc:netplan", _settings(ethernets={"eno1": {"addresses": ["10.77.0.6/24"]}}))
    assert failed["result"] is False
    assert "networkd did not answer; the previous file was put back and applied" in failed["comment"]
    assert state.path.read_text() == before and len(state.applied) == 3


def test_clean_removes_the_file_and_applies(state):
    state.config_managed("ccc:netplan", _settings(**GOOD))
    removed = state.config_absent("ccc:netplan", _settings())
    assert removed["result"] is True and removed["changes"] == {"removed": str(state.path)}
    assert not state.path.exists() and state.applied[-1] == []
    assert state.config_absent("ccc:netplan", _settings())["comment"] == f"{state.path} is absent"
