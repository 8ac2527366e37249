"""
State ``ccc_docker_firewall``: the egress chains of restricted Docker networks (IPv4: forwarded
traffic and traffic to the node itself; IPv6: both, dropped), compared with the live ones on
every run (so hand edits and flushed chains are repaired) and persisted in two rules files that
``ccc-docker-firewall.service`` replays after every dockerd start.

.. code-block:: yaml

    ccc-cluster-docker-firewall-chain:
      ccc_docker_firewall.managed:
        - rules_file: /etc/ccc-salt/docker-firewall.rules
        - script: /usr/local/sbin/ccc-docker-firewall

The rules come from ``ccc:cluster:networks`` (``_utils/ccc_docker_firewall.py``) plus the node
services a restricted network must reach (the metrics forwarder's exporters, from the
monitoring_agent role's plan); the execution module ``ccc_docker_firewall`` reads the live chains
and applies the files by running the same script the unit runs, so boot and Salt share one code
path; this state compares and reports. The IPv6 file sits next to the IPv4 one
(``ccc_docker_firewall.v6_file``); a node whose kernel has no IPv6 gets only the IPv4 part.
"""

import os

from salt.exceptions import CommandExecutionError

import ccc_docker_firewall as fw
import ccc_pillar
import ccc_safefs
import _ccc_state_ret as ccc_state_ret

__virtualname__ = "ccc_docker_firewall"


def __virtual__():
    return __virtualname__


def _diff(live, wanted):
    live = live or []
    return {key: value for key, value in (("added", [r for r in wanted if r not in live]),
                                          ("removed", [r for r in live if r not in wanted])) if value}


def _node_services(networks):
    """``[(network, address, port)]``: the exporters the metrics forwarder reaches on the node
    from its network (the monitoring_agent role's plan), when that network is restricted."""
    try:
        plan = __salt__["ccc_monitoring.plan"]() if "ccc_monitoring.plan" in __salt__ else {}
    except CommandExecutionError:  # ccc:monitoring unusable: that role's state says why; no exception here
        plan = {}
    network = plan.get("network")
    if plan.get("problem") or not plan.get("forwarder") or not fw.is_restricted((networks or {}).get(network)):
        return []
    ports = ([plan["node_port"]] if plan.get("node_exporter") else []) + ([plan["gpu_port"]] if plan.get("gpu") else [])
    return [(network, plan["address"], port) for port in ports]


def _compare(sets, rules_file):
    """What differs between the wanted rule sets and the files and live chains: ``changes``."""
    changes = {}
    for family, chains in sets.items():
        path = rules_file if family == "ipv4" else fw.v6_file(rules_file)
        if not chains:
            continue
        if ccc_safefs.read_text(path) != fw.restore_text(chains):
            changes[f"{family} rules file"] = path
        live = __salt__["ccc_docker_firewall.live"](family)
        for chain, wanted in chains.items():
            if live["chains"][chain] != wanted:
                changes[f"{family} {chain}"] = _diff(live["chains"][chain], wanted) or {"reordered": wanted}
        for parent, chain in fw.JUMPS[family]:
            if not live["jumps"][parent]["first"]:
                changes[f"{family} jump"] = changes.get(f"{family} jump", []) + [f"-I {parent} 1 -j {chain}"]
    return changes


def managed(name, rules_file="/etc/ccc-salt/docker-firewall.rules", script="/usr/local/sbin/ccc-docker-firewall"):
    """
    Make chains ``CCC-EGRESS`` (from the top of ``DOCKER-USER``) and ``CCC-EGRESS-INPUT`` (from
    the top of ``INPUT``), and their IPv6 counterparts (from ``FORWARD`` and ``INPUT``), hold
    exactly the rules ``ccc:cluster:networks`` asks for, and keep them in ``rules_file`` and its
    ``.v6`` sibling for the boot-time unit. With no restricted network all of it is removed.
    """
    try:
        networks = ccc_pillar.cluster_settings(ccc_pillar.pillar_ccc(__pillar__)).get("networks")
        sets = fw.rule_sets(networks, _node_services(networks))
    except ValueError as exc:
        return ccc_state_ret.result(name, False, {}, f"egress rules not applied: {exc}")
    if not sets:
        return absent(name, rules_file=rules_file)
    try:
        ipv6 = __salt__["ccc_docker_firewall.ipv6_works"]()
        if not ipv6:
            sets["ipv6"] = {}
        changes = _compare(sets, rules_file)
    except CommandExecutionError as exc:
        return ccc_state_ret.result(name, False, {}, f"egress rules not compared: {exc}")
    count = sum(len(rules) for chains in sets.values() for rules in chains.values())
    summary = (f"{count} rule(s) in {fw.CHAIN} and {fw.INPUT_CHAIN} for restricted networks"
               + ("" if ipv6 else " (IPv4 only: ip6tables does not work on this node)"))
    if not changes:
        return ccc_state_ret.result(name, True, {}, f"{summary} in place")
    if __opts__["test"]:
        return ccc_state_ret.result(name, None, changes, f"{summary} would be applied")
    try:
        __salt__["ccc_docker_firewall.apply"](rules_file, script, sets)
        left = _compare(sets, rules_file)
    except CommandExecutionError as exc:
        return ccc_state_ret.result(name, False, changes, f"{summary} could not be applied: {exc}")
    if left:
        return ccc_state_ret.result(name, False, changes,
                                    f"{summary} could not be applied: the live chains still differ: {sorted(left)}")
    return ccc_state_ret.result(name, True, changes, f"{summary} applied")


def absent(name, rules_file="/etc/ccc-salt/docker-firewall.rules"):
    """Remove the jumps, our chains (both families) and ``rules_file`` with its ``.v6`` sibling."""
    changes = {}
    try:
        for family in fw.JUMPS:
            live = __salt__["ccc_docker_firewall.live"](family)
            if any(jump["count"] for jump in live["jumps"].values()):
                changes[f"{family} jump"] = "removed"
            if any(rules is not None for rules in live["chains"].values()):
                changes[f"{family} chain"] = "removed"
    except CommandExecutionError as exc:
        return ccc_state_ret.result(name, False, {}, f"egress chain {fw.CHAIN} not compared: {exc}")
    if any(os.path.lexists(path) for path in (rules_file, fw.v6_file(rules_file))):
        changes["rules file"] = "removed"
    if not changes:
        return ccc_state_ret.result(name, True, {}, f"no egress chain {fw.CHAIN}")
    if __opts__["test"]:
        return ccc_state_ret.result(name, None, changes, f"egress chain {fw.CHAIN} would be removed")
    try:
        __salt__["ccc_docker_firewall.remove"](rules_file)
    except CommandExecutionError as exc:
        return ccc_state_ret.result(name, False, changes, str(exc))
    return ccc_state_ret.result(name, True, changes, f"egress chain {fw.CHAIN} removed")
