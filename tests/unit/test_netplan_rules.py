"""The netplan role's builder (``_utils/ccc_netplan.py``): the document netplan gets from
``ccc:netplan``, without the original template's bugs (§7 B17), and every broken pillar refused
with a message naming its key: by the role's schema.yaml (``ccc_role_schema``), then by the
builder's rules that compare values, as ``ccc_netplan.document`` runs them."""

import pytest
import yaml

from support import role_files, site  # noqa: F401  (site puts _utils on sys.path)

import ccc_netplan
import ccc_role_schema

DEFAULTS = role_files.defaults("netplan")
SCHEMA = role_files.schema("netplan")


def settings(**extra):
    return site.deep_merge(DEFAULTS, extra)


def checked(value):
    """``(document, problems)`` as ``ccc_netplan.document`` decides: the schema first, then ``build``."""
    problems = ccc_role_schema.problems("netplan", value, SCHEMA)
    return (None, problems) if problems else ccc_netplan.build(value)


def build_ok(**extra):
    document, problems = checked(settings(**extra))
    assert problems == []
    return document["network"]


def problems_of(**extra):
    document, problems = checked(settings(**extra))
    assert problems, document
    return problems


def test_gateways_become_default_routes_each_from_its_own_value():
    network = build_ok(ethernets={"eno1": {"addresses": ["10.0.0.5/24", "fd00::5/64"], "gateway4": "10.0.0.1",
                                           "gateway6": "fd00::1", "routes": [{"to": "10.1.0.0/16", "via": "10.0.0.254"}]}})
    eno1 = network["ethernets"]["eno1"]
    assert eno1["routes"] == [{"to": "10.1.0.0/16", "via": "10.0.0.254"}, {"to": "default", "via": "10.0.0.1"},
                              {"to": "default", "via": "fd00::1"}]
    assert "gateway4" not in eno1 and "gateway6" not in eno1
    assert network["version"] == 2 and network["renderer"] == "networkd"


def test_mtu_only_from_pillar_and_set_name_only_with_a_mac_match():
    network = build_ok(ethernets={"eno1": {"addresses": ["10.0.0.5/24"]},
                                  "lan0": {"mac": "3C:EC:EF:00:00:01", "mtu": 9000, "dhcp4": True, "accept_ra": False}})
    assert network["ethernets"]["eno1"] == {"addresses": ["10.0.0.5/24"]}
    assert network["ethernets"]["lan0"] == {"match": {"macaddress": "3c:ec:ef:00:00:01"}, "set-name": "lan0",
                                            "mtu": 9000, "dhcp4": True, "accept-ra": False}


def test_vlan_routes_and_bond_parameters_are_structured_data():
    network = build_ok(ethernets={"eno1": {}, "eno2": {}},
                       bonds={"bond0": {"interfaces": ["eno1", "eno2"], "addresses": ["10.0.0.5/24"],
                                        "parameters": {"mode": "802.3ad", "lacp_rate": "fast", "mii_monitor_interval": 100}}},
                       vlans={"vlan20": {"id": 20, "link": "bond0", "addresses": ["10.20.0.5/24"],
                                         "routes": [{"to": "10.21.0.0/16", "via": "10.20.0.1", "metric": 50}]}})
    assert network["bonds"]["bond0"]["parameters"] == {"mode": "802.3ad", "lacp-rate": "fast", "mii-monitor-interval": 100}
    assert network["vlans"]["vlan20"] == {"id": 20, "link": "bond0", "addresses": ["10.20.0.5/24"],
                                          "routes": [{"to": "10.21.0.0/16", "via": "10.20.0.1", "metric": 50}]}


def test_the_text_is_yaml_of_the_document_with_a_header():
    document, _ = ccc_netplan.build(settings(vlans={"v5": {"id": 5, "link": "eno1", "routes": [{"to": "default", "via": "10.5.0.1"}]}},
                                             ethernets={"eno1": {}}))
    text = ccc_netplan.render(document)
    assert text.startswith("# Written by ccc-salt")
    assert yaml.safe_load(text) == document
    assert ccc_netplan.render(document) == text  # stable: a no-op apply compares equal text


def test_nothing_defined_means_no_document():
    assert ccc_netplan.build(settings()) == (None, [])


@pytest.mark.parametrize("extra, message", [
    ({"ethernets": {"eno1": {"addresses": ["10.0.0.300/24"]}}},
     "ccc:netplan:ethernets:eno1:addresses: '10.0.0.300/24' is not an address with a prefix length"),
    ({"ethernets": {"eno1": {"addresses": ["10.0.0.5"]}}},
     "ccc:netplan:ethernets:eno1:addresses: '10.0.0.5' is not an address with a prefix length"),
    ({"ethernets": {"eno1": {}}, "vlans": {"vlan9": {"id": 5000, "link": "eno1"}}},
     "ccc:netplan:vlans:vlan9:id must be a whole number 1..4094, got 5000"),
    ({"ethernets": {"eno1": {}}, "vlans": {"vlan9": {"id": 9, "link": "eth7"}}},
     "ccc:netplan:vlans:vlan9:link: 'eth7' is not an interface or bond of ccc:netplan"),
    ({"ethernets": {"eno1": {}}, "bonds": {"bond0": {"interfaces": ["eno1", "eno9"]}}},
     "ccc:netplan:bonds:bond0:interfaces: 'eno9' is not an interface of ccc:netplan:ethernets"),
    ({"ethernets": {"eno1": {"gateway6": "10.0.0.1"}}},
     "ccc:netplan:ethernets:eno1:gateway6 must be an IPv6 address or null, got '10.0.0.1'"),
    ({"ethernets": {"eno1": {"gateway4": "10.0.0.1", "routes": [{"to": "default", "via": "10.0.0.2"}]}}},
     "ccc:netplan:ethernets:eno1: gateway4 and a default route in routes both set the IPv4 default route"),
    ({"ethernets": {"eno1": {"routes": [{"to": "fd00::/64", "via": "10.0.0.1"}]}}},
     "ccc:netplan:ethernets:eno1:routes[0]: to fd00::/64 and via 10.0.0.1 are not of the same IP version"),
    ({"ethernets": {"eno1": {"mtu": 1500000}}},
     "ccc:netplan:ethernets:eno1:mtu must be a whole number 68..65535 or null"),
    ({"ethernets": {"eno1": {"dhcp4": "yes please"}}}, "ccc:netplan:ethernets:eno1:dhcp4 must be true or false"),
    ({"ethernets": {"eno1": {"mac": "3c:ec:ef"}}},
     "ccc:netplan:ethernets:eno1:mac must be a MAC address (e.g. 3c:ec:ef:01:02:03), got '3c:ec:ef'"),
    ({"ethernets": {"eno1": {"gateway": "10.0.0.1"}}}, "ccc:netplan:ethernets:eno1 has unknown keys: gateway"),
    ({"ethernets": {"a-very-long-interface": {}}}, "'a-very-long-interface' is not an interface name"),
    ({"ethernets": {"eno1": {}}, "vlans": {"eno1": {"id": 3, "link": "eno1"}}},
     "ccc:netplan: 'eno1' is defined in both ethernets and vlans"),
    ({"ethernets": {"eno1": {"nameservers": ["dns.example.org"]}}},
     "ccc:netplan:ethernets:eno1:nameservers: 'dns.example.org' is not an IP address"),
    ({"ethernets": {"eno1": {"nameservers": {"addresses": ["10.0.0.1"], "search": ["bad domain"]}}}},
     "ccc:netplan:ethernets:eno1:nameservers:search: 'bad domain' is not a domain name"),
    ({"ethernets": {"eno1": {"routes": [{"to": "10.1.0.0/16"}]}}},
     "ccc:netplan:ethernets:eno1:routes[0]:via is required: an IP address"),
    ({"ethernets": {"eno1": {"routes": [{"to": "somewhere", "via": "10.0.0.1", "dev": "eno1"}]}}},
     "ccc:netplan:ethernets:eno1:routes[0]:to must be default or a network (e.g. 10.1.0.0/16), got 'somewhere'"),
    ({"ethernets": {"eno1": {"routes": [{"to": "default", "via": "10.0.0.1", "dev": "eno1"}]}}},
     "ccc:netplan:ethernets:eno1:routes[0] has unknown keys: dev (known: to, via, metric)"),
    ({"renderer": "systemd"}, "ccc:netplan:renderer must be one of networkd, NetworkManager, got 'systemd'"),
    ({"interfaces": {}}, "ccc:netplan has unknown keys: interfaces"),
    ({"ethernets": {"eno1": {}}, "bonds": {"bond0": {"interfaces": []}}},
     "ccc:netplan:bonds:bond0:interfaces must be a non-empty list of interface names, got []"),
    ({"ethernets": {"eno1": {}}, "bonds": {"bond0": {"interfaces": ["eno1"], "parameters": {"lacp_rate": "slowly"}}}},
     "ccc:netplan:bonds:bond0:parameters:lacp_rate must be one of slow, fast, got 'slowly'"),
    ({"ethernets": {"eno1": {}, "eno2": {}}, "bonds": {"bond0": {"interfaces": ["eno1"], "parameters": {"primary": "eno2"}}}},
     "ccc:netplan:bonds:bond0:parameters:primary: 'eno2' is not one of the bond's interfaces"),
    ({"ethernets": {"eno1": {}}, "bonds": {"b0": {"interfaces": ["eno1"]}, "b1": {"interfaces": ["eno1"]}}},
     "ccc:netplan:bonds:b1:interfaces: 'eno1' is already in bond b0"),
    ({"vlans": {"vlan9": {"link": "eno1"}}}, "ccc:netplan:vlans:vlan9:id is required: a whole number 1..4094"),
    ({"name": "../../etc/passwd", "ethernets": {"eno1": {}}}, "ccc:netplan:name must be a file name without .yaml"),
    ({"ethernets": {"eno1": {}, "eno2": {}}, "bonds": {"bond0": {"interfaces": ["eno1"], "parameters": {"mode": "fast"}}}},
     "ccc:netplan:bonds:bond0:parameters:mode must be one of balance-rr"),
])
def test_a_broken_pillar_is_refused_naming_the_key(extra, message):
    problems = problems_of(**extra)
    assert any(message in problem for problem in problems), problems


def test_null_devices_and_kinds_and_a_nameservers_mapping_are_accepted():
    network = build_ok(ethernets={"eno1": None, "eno2": {"nameservers": {"addresses": ["fd00::53"], "search": ["lab."]}}},
                       bonds=None, vlans={"v7": {"id": 7, "link": "eno1", "mtu": None, "dhcp4": None}})
    assert network["ethernets"] == {"eno1": {}, "eno2": {"nameservers": {"addresses": ["fd00::53"], "search": ["lab."]}}}
    assert network["vlans"] == {"v7": {"id": 7, "link": "eno1"}}


def test_every_problem_is_reported_at_once():
    problems = problems_of(ethernets={"eno1": {"addresses": ["nonsense"], "mtu": "big"}},
                           vlans={"v1": {"id": 0, "link": "eno1"}})
    assert len(problems) == 3


def test_the_diff_shows_the_change_and_file_path_the_name():
    assert ccc_netplan.file_path(settings()) == "/etc/netplan/90-ccc-salt.yaml"
    text = ccc_netplan.diff("a: 1\n", "a: 2\n", "/etc/netplan/x.yaml")
    assert "-a: 1\n+a: 2\n" in text and "+++ /etc/netplan/x.yaml" in text
    assert "--- /dev/null" in ccc_netplan.diff(None, "a: 2\n", "/etc/netplan/x.yaml")
    assert ccc_netplan.services(settings(), "node1") == []
