"""The egress rules of restricted networks (``_utils/ccc_docker_firewall.py``): the chain an admin
sees in ``iptables -S CCC-EGRESS`` for the original's ``restricted_access``/``allowed_access`` keys,
in a fixed order whatever the pillar order, and clear errors for bad addresses and bridge names."""

import pytest

import ccc_docker_firewall as fw

STUDENT = {"subnet": "172.30.1.0/24", "gateway": "172.30.1.1", "bridge_name": "ccc-student",
           "restricted_access": ["192.168.0.0/16", "10.0.0.0/8"], "allowed_access": ["192.168.0.1"]}


def test_a_restricted_network_gets_established_same_bridge_accepts_then_drops():
    assert fw.chain_rules({"lab": {"subnet": "172.30.0.0/24"}, "student": STUDENT}) == [
        "-A CCC-EGRESS -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN",
        "-A CCC-EGRESS -i ccc-student -o ccc-student -j RETURN",
        "-A CCC-EGRESS -s 172.30.1.0/24 -d 192.168.0.1/32 -i ccc-student -j ACCEPT",
        "-A CCC-EGRESS -s 172.30.1.0/24 -d 192.168.0.0/16 -i ccc-student -j DROP",
        "-A CCC-EGRESS -s 172.30.1.0/24 -d 10.0.0.0/8 -i ccc-student -j DROP",
    ]


def test_every_accept_of_every_network_comes_before_any_drop():
    guests = {"subnet": "172.30.3.0/24", "bridge_name": "ccc-guests", "restricted_access": "anywhere",
              "allowed_access": ["172.30.2.0/24"]}
    rules = fw.chain_rules({"student": STUDENT, "guests": guests})
    targets = [rule.rsplit(" ", 1)[1] for rule in rules]
    assert targets == ["RETURN", "RETURN", "RETURN", "ACCEPT", "ACCEPT", "DROP", "DROP", "DROP"]
    assert "-A CCC-EGRESS -s 172.30.3.0/24 -i ccc-guests -j DROP" in rules  # anywhere: no -d
    assert rules == fw.chain_rules({"guests": guests, "student": STUDENT})  # pillar order does not matter


def test_no_restricted_network_no_rules_and_filter_enabled_false_switches_one_off():
    assert fw.chain_rules({"lab": {"subnet": "172.30.0.0/24"}}) == []
    assert fw.chain_rules(None) == []
    assert fw.chain_rules({"student": dict(STUDENT, filter_enabled=False)}) == []


def test_a_network_without_subnet_is_matched_by_its_bridge_alone():
    rules = fw.network_rules("x", {"bridge_name": "br-x", "restricted_access": ["anywhere"]})
    assert rules == ["-A CCC-EGRESS -i br-x -o br-x -j RETURN", "-A CCC-EGRESS -i br-x -j DROP"]


@pytest.mark.parametrize("definition, message", [
    (dict(STUDENT, bridge_name=None), "ccc:cluster:networks:student:bridge_name must be set"),
    (dict(STUDENT, bridge_name="a-much-too-long-bridge"), "bridge_name must be set to a Linux interface name"),
    (dict(STUDENT, bridge_name="br;rm -rf"), "bridge_name must be set to a Linux interface name"),
    (dict(STUDENT, restricted_access=["192.168.0.0/33"]), "restricted_access[0]: '192.168.0.0/33' is not a network"),
    (dict(STUDENT, allowed_access=["192.168.0.1/16"]), "allowed_access[0]: '192.168.0.1/16' is not a network"),
    (dict(STUDENT, allowed_access=["anywhere"]), "allowed_access[0]: 'anywhere' is not a network"),
    (dict(STUDENT, restricted_access=["fd00::/8"]), "restricted_access[0]: 'fd00::/8' is IPv6"),
    (dict(STUDENT, subnet="nonsense"), "student:subnet: 'nonsense' is not a network"),
    (dict(STUDENT, restricted_access={"a": 1}), "restricted_access must be a list of CIDRs"),
])
def test_bad_definitions_are_refused_naming_the_key(definition, message):
    with pytest.raises(ValueError) as error:
        fw.chain_rules({"student": definition})
    assert message in str(error.value)


def test_restore_text_replaces_only_our_chain():
    text = fw.restore_text(["-A CCC-EGRESS -i b -o b -j RETURN"])
    assert text.splitlines()[1:] == ["*filter", ":CCC-EGRESS - [0:0]", "-A CCC-EGRESS -i b -o b -j RETURN", "COMMIT"]
    assert "DOCKER-USER" not in text


def test_live_listings_are_read_as_iptables_prints_them():
    listing = "-N CCC-EGRESS\n-A CCC-EGRESS -i b -o b -j RETURN\n"
    assert fw.live_rules(listing) == ["-A CCC-EGRESS -i b -o b -j RETURN"]
    assert fw.jump_first("-N DOCKER-USER\n-A DOCKER-USER -j CCC-EGRESS\n-A DOCKER-USER -j RETURN\n")
    assert not fw.jump_first("-N DOCKER-USER\n-A DOCKER-USER -j RETURN\n-A DOCKER-USER -j CCC-EGRESS\n")
    assert not fw.jump_first("")


def test_the_node_itself_is_off_limits_to_a_restricted_network_but_its_node_services_and_allowed():
    rules = fw.input_rules({"lab": {"subnet": "172.30.0.0/24"}, "student": STUDENT},
                           [("student", "172.30.1.1", 9100), ("lab", "172.30.0.1", 9100)])
    assert rules == [
        "-A CCC-EGRESS-INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN",
        "-A CCC-EGRESS-INPUT -d 172.30.1.1/32 -i ccc-student -p tcp -m tcp --dport 9100 -j RETURN",
        "-A CCC-EGRESS-INPUT -d 192.168.0.1/32 -i ccc-student -j RETURN",
        "-A CCC-EGRESS-INPUT -i ccc-student -j DROP",  # whatever restricted_access names: no -d
    ]
    assert fw.input_rules({"lab": {"subnet": "172.30.0.0/24"}}) == []


def test_ipv6_from_a_restricted_bridge_stays_on_the_bridge():
    assert fw.ipv6_rules({"student": STUDENT, "lab": {"subnet": "172.30.0.0/24"}}) == {
        "CCC-EGRESS": ["-A CCC-EGRESS -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN",
                       "-A CCC-EGRESS -i ccc-student -o ccc-student -j RETURN",
                       "-A CCC-EGRESS -i ccc-student -j DROP"],
        "CCC-EGRESS-INPUT": ["-A CCC-EGRESS-INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN",
                             "-A CCC-EGRESS-INPUT -i ccc-student -j DROP"]}
    sets = fw.rule_sets({"student": STUDENT})
    assert sorted(sets) == ["ipv4", "ipv6"] and sorted(sets["ipv4"]) == ["CCC-EGRESS", "CCC-EGRESS-INPUT"]
    assert fw.rule_sets({"lab": {}}) == {}
    assert fw.v6_file("/etc/ccc-salt/docker-firewall.rules") == "/etc/ccc-salt/docker-firewall.rules.v6"


def test_restore_text_of_two_chains_declares_both_before_their_rules():
    text = fw.restore_text({"CCC-EGRESS": ["-A CCC-EGRESS -j DROP"], "CCC-EGRESS-INPUT": ["-A CCC-EGRESS-INPUT -j DROP"]})
    assert text.splitlines()[1:] == ["*filter", ":CCC-EGRESS - [0:0]", ":CCC-EGRESS-INPUT - [0:0]",
                                     "-A CCC-EGRESS -j DROP", "-A CCC-EGRESS-INPUT -j DROP", "COMMIT"]
    assert fw.jump_first("-P INPUT ACCEPT\n-A INPUT -j CCC-EGRESS-INPUT\n", "INPUT", "CCC-EGRESS-INPUT")
    assert not fw.jump_first("-P INPUT ACCEPT\n-A INPUT -j ACCEPT\n-A INPUT -j CCC-EGRESS-INPUT\n", "INPUT", "CCC-EGRESS-INPUT")


def test_fail2ban_jumps_above_ours_do_not_count_an_accept_does():
    listing = "-P INPUT ACCEPT\n-A INPUT -p tcp -m multiport --dports 22 -j f2b-sshd\n-A INPUT -j CCC-EGRESS-INPUT\n"
    assert fw.jump_first(listing, "INPUT", "CCC-EGRESS-INPUT")
    assert not fw.jump_first(listing.replace("-j f2b-sshd", "-j ACCEPT"), "INPUT", "CCC-EGRESS-INPUT")
