"""The netplan role applied for real on a systemd test node (tests/support/sysnode.py): Debian's
netplan.io from the test apt repository, the role's file written 0600 and `netplan apply` putting
the address on an interface the test made; a second apply is a no-op; a broken pillar and a change
netplan rejects (a clash with another file in /etc/netplan) leave the file and the address as they
were; `absent` removes the file.

The interface is a dummy where the kernel has the dummy driver, else one end of a veth pair whose
other end is up (a kernel without loadable modules, like this machine's, lacks the dummy driver;
networkd configures a link only once it has carrier)."""

import json
import time

import pytest

pytestmark = pytest.mark.docker

IFACE = "cccnp0"
FILE = "/etc/netplan/90-ccc-salt.yaml"
GOOD = {"ethernets": {IFACE: {"addresses": ["10.77.0.5/24"]}}}


def _pillar(netplan, switch=True):
    return json.dumps({"ccc": {"roles": {"netplan": switch}, "only_roles": "netplan", "netplan": netplan}})


def _apply(node, netplan, switch=True):
    node.write_pillar("site/nodes/netplan.sls", _pillar(netplan, switch))
    return node.salt_call("state.apply", "cluster", check=False).states()


def _out(node, command):
    result = node.exec(command, check=False)
    return result.stdout + result.stderr


def _addresses(node, wanted=None, timeout=30):
    """The IPv4 addresses on IFACE; waits up to ``timeout`` s for ``wanted`` to show up (networkd
    configures the link asynchronously after `netplan apply`)."""
    deadline = time.monotonic() + timeout
    while True:
        found = [line.split()[3] for line in _out(node, f"ip -4 -o addr show dev {IFACE}").splitlines() if " inet " in line]
        if wanted is None or wanted in found or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


@pytest.fixture(scope="module")
def node(sysnodes):
    made = sysnodes("netplan")
    made.add_apt_source()
    made.exec(f"ip link add {IFACE} type dummy 2>/dev/null || "
              f"{{ ip link add {IFACE} type veth peer name {IFACE}p && ip link set {IFACE}p up; }}")
    made.salt_call("saltutil.sync_all")
    return made


@pytest.fixture(scope="module")
def first(node):
    return _apply(node, GOOD)


def test_the_file_is_written_0600_and_the_address_is_on_the_interface(node, first):
    assert [f"{k}: {v['comment']}" for k, v in first.items() if v["result"] is False] == []
    config = first["ccc-cluster-netplan-config"]
    assert config["comment"] == f"{FILE} written (mode 0600) and netplan applied"
    assert "+      - 10.77.0.5/24" in config["changes"]["diff"]
    assert _out(node, f"stat -c %a {FILE}").strip() == "600"
    assert "10.77.0.5/24" in _addresses(node, "10.77.0.5/24")


def test_the_second_apply_changes_nothing(node, first):
    again = _apply(node, GOOD)
    assert {k: v["changes"] for k, v in again.items() if v["changes"] or v["result"] is not True} == {}
    assert again["ccc-cluster-netplan-config"]["comment"] == f"{FILE} is up to date"


def test_a_bad_change_leaves_file_and_address_untouched(node, first):
    before = _out(node, f"cat {FILE}")
    refused = _apply(node, {"ethernets": {IFACE: {"addresses": ["10.77.0.6/24"]}},
                            "vlans": {"vlan9": {"id": 5000, "link": IFACE}}})
    # the role's schema refuses it before any of the role's states exist: one failing state says why
    assert "ccc-cluster-netplan-config" not in refused
    broken = refused["ccc-cluster-netplan-settings"]
    assert (broken["result"], broken["changes"]) == (False, {})
    assert broken["comment"] == ("ccc:netplan is not valid, nothing changed: "
                                 "ccc:netplan:vlans:vlan9:id must be a whole number 1..4094, got 5000")
    # a clash only netplan sees: another file of the node already bonds cccnp1
    node.write_file("/etc/netplan/50-foreign.yaml",
                    "network:\n  version: 2\n  ethernets: {cccnp1: {}}\n  bonds: {bond9: {interfaces: [cccnp1]}}\n", "0600")
    try:
        rejected = _apply(node, {"ethernets": {IFACE: {"addresses": ["10.77.0.6/24"]}, "cccnp1": {}},
                                 "bonds": {"bond0": {"interfaces": ["cccnp1"]}}})["ccc-cluster-netplan-config"]
    finally:
        node.exec("rm -f /etc/netplan/50-foreign.yaml")
    assert rejected["result"] is False, rejected
    assert rejected["comment"].startswith(f"{FILE} not written, netplan rejects it (the running network is untouched): ")
    assert "interface 'cccnp1' is already assigned to bond bond9" in rejected["comment"]
    assert _out(node, f"cat {FILE}") == before
    assert _addresses(node, timeout=0) == ["10.77.0.5/24"]
    assert "bond0" not in _out(node, "ip -o link show")


def test_absent_removes_the_file(node, first):
    cleaned = _apply(node, GOOD, switch="absent")["ccc-cluster-netplan-clean"]
    assert (cleaned["result"], cleaned["changes"]) == (True, {"removed": FILE}), cleaned["comment"]
    assert "No such file" in _out(node, f"stat {FILE}")
