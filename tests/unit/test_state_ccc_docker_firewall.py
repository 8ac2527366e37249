"""The ``ccc_docker_firewall`` states' own part: compare the wanted egress rules with the rules
files and the live chains, test mode, result, comment and changes. Boundary: ``__salt__`` is a
dict of fakes that record their calls (``Fakes``), the narrowest boundary of a state; the live
chains are given as the facts ``ccc_docker_firewall.live`` returns. The real iptables behind it
is in tests/integration/test_docker_firewall_netns.py."""

import pathlib

import pytest
from salt.exceptions import CommandExecutionError
from support.salt_modules import Fakes, raises
from support.scripts import load_module

import ccc_docker_firewall as fw

NETWORKS = {"student": {"subnet": "172.30.1.0/24", "bridge_name": "ccc-student", "restricted_access": ["anywhere"]}}
SETS = fw.rule_sets(NETWORKS)
ACTING = ("ccc_docker_firewall.apply", "ccc_docker_firewall.remove")
SUMMARY = "10 rule(s) in CCC-EGRESS and CCC-EGRESS-INPUT for restricted networks"


def facts(sets=None):
    """What ``live`` returns for each family: the chains of ``sets`` in place, jumps first
    (``None``: no chain, no jump)."""
    def live(family):
        chains = (sets or {}).get(family) or {}
        return {"chains": {chain: chains.get(chain) for _, chain in fw.JUMPS[family]},
                "jumps": {parent: {"first": bool(chains), "count": int(bool(chains))}
                          for parent, _ in fw.JUMPS[family]}}
    return live


def state(test=False, live=None, apply=None, remove=None, ipv6=True, networks=NETWORKS):
    salt = Fakes({"ccc_docker_firewall.live": live or facts(),
                  "ccc_docker_firewall.ipv6_works": lambda: ipv6,
                  "ccc_docker_firewall.apply": apply or (lambda rules_file, script, sets: True),
                  "ccc_docker_firewall.remove": remove or (lambda rules_file: {}),
                  "ccc_monitoring.plan": lambda: {"problem": None, "forwarder": False}})
    module = load_module("_states/ccc_docker_firewall.py", "ccc_docker_firewall_state", salt=salt,
                         opts={"test": test}, pillar={"ccc": {"cluster": {"networks": networks}}})
    return module, salt


def write_files(rules_file, sets=SETS):
    rules_file.write_text(fw.restore_text(sets["ipv4"]))
    pathlib.Path(fw.v6_file(str(rules_file))).write_text(fw.restore_text(sets["ipv6"]))


def test_test_mode_reports_every_would_be_change_and_applies_nothing(tmp_path):
    rules_file = tmp_path / "docker-firewall.rules"
    module, salt = state(test=True)
    result = module.managed("chain", rules_file=str(rules_file))
    assert (result["result"], result["comment"]) == (None, f"{SUMMARY} would be applied")
    assert result["changes"]["ipv4 CCC-EGRESS"] == {"added": SETS["ipv4"]["CCC-EGRESS"]}
    assert result["changes"]["ipv4 jump"] == ["-I DOCKER-USER 1 -j CCC-EGRESS", "-I INPUT 1 -j CCC-EGRESS-INPUT"]
    assert result["changes"]["ipv4 rules file"] == str(rules_file)
    assert salt.called(*ACTING) == [] and not rules_file.exists()


def test_applied_then_checked_again_and_a_second_run_with_matching_facts_changes_nothing(tmp_path):
    rules_file = tmp_path / "docker-firewall.rules"
    applied = []

    def apply(rules_file, script, sets):  # as the real one: the files written, the chains loaded
        write_files(pathlib.Path(rules_file), sets)
        return applied.append(sets) or True
    module, salt = state(live=lambda family: facts(SETS if applied else None)(family), apply=apply)
    result = module.managed("chain", rules_file=str(rules_file), script="/bin/restore")
    assert (result["result"], result["comment"]) == (True, f"{SUMMARY} applied") and result["changes"]
    assert salt.called(*ACTING) == [("ccc_docker_firewall.apply", (str(rules_file), "/bin/restore", SETS))]

    write_files(rules_file)
    module, salt = state(live=facts(SETS))
    assert module.managed("chain", rules_file=str(rules_file)) == {
        "name": "chain", "result": True, "changes": {}, "comment": f"{SUMMARY} in place"}
    assert salt.called(*ACTING) == []


def test_without_ipv6_only_the_ipv4_part_is_compared_and_said(tmp_path):
    rules_file = tmp_path / "docker-firewall.rules"
    write_files(rules_file)
    module, salt = state(live=facts(SETS), ipv6=False)
    result = module.managed("chain", rules_file=str(rules_file))
    assert (result["result"], result["changes"]) == (True, {})
    assert result["comment"] == ("5 rule(s) in CCC-EGRESS and CCC-EGRESS-INPUT for restricted networks "
                                 "(IPv4 only: ip6tables does not work on this node) in place")
    assert [args for key, args in salt.called("ccc_docker_firewall.live")] == [("ipv4",)]


@pytest.mark.parametrize("apply, comment", [
    (raises(CommandExecutionError("iptables-restore: line 3 failed")), "iptables-restore: line 3 failed"),
    (lambda rules_file, script, sets: True,
     "the live chains still differ: ['ipv4 CCC-EGRESS', 'ipv4 CCC-EGRESS-INPUT', 'ipv4 jump', 'ipv4 rules file', "
     "'ipv6 CCC-EGRESS', 'ipv6 CCC-EGRESS-INPUT', 'ipv6 jump', 'ipv6 rules file']"),
])
def test_a_failed_apply_fails_the_state_with_the_reason(tmp_path, apply, comment):
    result = state(apply=apply)[0].managed("chain", rules_file=str(tmp_path / "r.rules"))
    assert result["result"] is False and result["changes"]
    assert result["comment"] == f"{SUMMARY} could not be applied: {comment}"


def test_a_bad_network_fails_before_anything_is_asked():
    module, salt = state(networks={"student": {"restricted_access": ["anywhere"]}})
    result = module.managed("chain")
    assert result["result"] is False and result["comment"].startswith(
        "egress rules not applied: ccc:cluster:networks:student:bridge_name must be set")
    assert salt.called("ccc_docker_firewall.live", *ACTING) == []


def test_absent_in_test_mode_then_removed_then_nothing_left(tmp_path):
    rules_file = tmp_path / "docker-firewall.rules"
    write_files(rules_file)
    module, salt = state(test=True, live=facts(SETS), networks={})
    preview = module.managed("chain", rules_file=str(rules_file))
    assert preview == {"name": "chain", "result": None, "comment": "egress chain CCC-EGRESS would be removed",
                       "changes": {"ipv4 jump": "removed", "ipv4 chain": "removed", "ipv6 jump": "removed",
                                   "ipv6 chain": "removed", "rules file": "removed"}}
    assert salt.called(*ACTING) == []

    module, salt = state(live=facts(SETS))
    assert module.absent("chain", rules_file=str(rules_file))["comment"] == "egress chain CCC-EGRESS removed"
    assert salt.called(*ACTING) == [("ccc_docker_firewall.remove", (str(rules_file),))]

    rules_file.unlink()
    (tmp_path / "docker-firewall.rules.v6").unlink()
    module, salt = state()
    assert module.absent("chain", rules_file=str(rules_file)) == {
        "name": "chain", "result": True, "changes": {}, "comment": "no egress chain CCC-EGRESS"}
    assert salt.called(*ACTING) == []


def test_a_chain_that_cannot_be_removed_fails_absent(tmp_path):
    failing = raises(CommandExecutionError("could not remove ipv4 CCC-EGRESS: Device or resource busy"))
    result = state(live=facts(SETS), remove=failing)[0].absent("chain", rules_file=str(tmp_path / "r.rules"))
    assert (result["result"], result["comment"]) == (False, "could not remove ipv4 CCC-EGRESS: Device or resource busy")
