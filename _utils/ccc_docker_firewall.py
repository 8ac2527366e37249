"""
Egress rules of restricted Docker networks: pillar in, iptables rules out.

The original inserted DROP/ACCEPT rules into ``DOCKER-USER`` one by one, at run time only: after
a reboot restricted users had open egress, and a DROP added later landed above older ACCEPTs.
Here the whole rule set is computed at once into our own chain (``CHAIN``), in a fixed order,
and written as an ``iptables-restore`` file that a systemd unit replays after every dockerd
start. Pure functions: pillar values in, rules or a ``ValueError`` naming the key out.

Per network of ``ccc:cluster:networks`` (the original's key names):

* ``restricted_access``: destination CIDRs its containers may not reach, or ``anywhere``;
* ``allowed_access``: destination CIDRs accepted although a restriction covers them;
* ``filter_enabled`` (default true): false keeps the lists but writes no rules.

Order in the chain: replies of connections already accepted return first, traffic that stays
on the network's own bridge returns (its containers reach each other and the FRP client), then
every ACCEPT, then every DROP. ``ACCEPT`` is final in ``FORWARD`` (as in the original), so an
allowed destination is also reachable across Docker's own network isolation.
"""

import ipaddress
import re

CHAIN = "CCC-EGRESS"
PARENT = "DOCKER-USER"
ANYWHERE = "anywhere"
# Linux interface names: at most 15 bytes, no "/", ":", whitespace; Docker accepts these.
BRIDGE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$")
ESTABLISHED = f"-A {CHAIN} -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN"


def _v4_network(value, where):
    """``value`` as an IPv4 network (a plain address is a /32); ``ValueError`` naming ``where``."""
    try:
        network = ipaddress.ip_network(str(value).strip(), strict=True)
    except ValueError as exc:
        raise ValueError(f"{where}: {value!r} is not a network address (CIDR): {exc}") from None
    if network.version != 4:
        raise ValueError(f"{where}: {value!r} is IPv6; only IPv4 egress is filtered (iptables)")
    return network


def _destinations(value, where, allow_anywhere):
    """A list of CIDRs (or ``["anywhere"]``) checked and normalised; ``None`` means anywhere."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise ValueError(f"{where} must be a list of CIDRs, got {type(value).__name__}")
    result = []
    for index, item in enumerate(value):
        if allow_anywhere and str(item).strip().lower() == ANYWHERE:
            result.append(None)
        else:
            result.append(str(_v4_network(item, f"{where}[{index}]")))
    return result


def is_restricted(definition):
    """True when a network definition asks for egress rules (and filtering is not switched off)."""
    definition = definition or {}
    enabled = definition.get("filter_enabled", True)
    return bool(definition.get("restricted_access") or definition.get("allowed_access")) and \
        enabled not in (False, "false", "False", "no", 0)


def network_rules(name, definition):
    """The ``-A`` rules (in ``iptables -S`` spelling) of one network; ``[]`` when unrestricted."""
    if not is_restricted(definition):
        return []
    where = f"ccc:cluster:networks:{name}"
    bridge = definition.get("bridge_name")
    if not isinstance(bridge, str) or not BRIDGE_NAME.match(bridge):
        raise ValueError(f"{where}:bridge_name must be set to a Linux interface name (1-15 characters "
                         f"of letters, digits, '_', '.', '-') when the network is restricted, got {bridge!r}")
    match = f"-i {bridge}"
    if definition.get("subnet"):
        match = f"-s {_v4_network(definition['subnet'], where + ':subnet')} {{dest}}{match}"
    else:
        match = "{dest}" + match
    rules = [f"-A {CHAIN} -i {bridge} -o {bridge} -j RETURN"]
    for key, target in (("allowed_access", "ACCEPT"), ("restricted_access", "DROP")):
        for dest in _destinations(definition.get(key), f"{where}:{key}", key == "restricted_access"):
            rules.append(f"-A {CHAIN} " + match.format(dest=f"-d {dest} " if dest else "") + f" -j {target}")
    return rules


def chain_rules(networks):
    """
    Every rule of ``CHAIN`` for ``ccc:cluster:networks``, in order: the conntrack return, then
    per network its same-bridge return, then all ACCEPTs, then all DROPs (networks by name).
    ``[]`` when no network is restricted.
    """
    if networks is None:
        networks = {}
    if not isinstance(networks, dict):
        raise ValueError(f"ccc:cluster:networks must be a mapping of network name to definition, got {type(networks).__name__}")
    per_network = [network_rules(name, networks[name] or {}) for name in sorted(networks)]
    returns = [rules[0] for rules in per_network if rules]
    if not returns:
        return []
    accepts = [rule for rules in per_network for rule in rules[1:] if rule.endswith(" -j ACCEPT")]
    drops = [rule for rules in per_network for rule in rules[1:] if rule.endswith(" -j DROP")]
    return [ESTABLISHED] + returns + accepts + drops


def restore_text(rules):
    """The ``iptables-restore --noflush`` input that replaces ``CHAIN`` with ``rules`` (and only it)."""
    lines = ["# ccc-salt: egress rules of restricted Docker networks (written by cluster.docker)",
             "*filter", f":{CHAIN} - [0:0]", *rules, "COMMIT"]
    return "\n".join(lines) + "\n"


def live_rules(listing):
    """The ``-A`` lines of ``iptables -S CHAIN`` output (the ``-N`` line and blanks dropped)."""
    return [line.strip() for line in (listing or "").splitlines() if line.strip().startswith(f"-A {CHAIN} ")]


def jump_first(listing):
    """True when the first rule of ``iptables -S DOCKER-USER`` output jumps to ``CHAIN``."""
    rules = [line.strip() for line in (listing or "").splitlines() if line.strip().startswith(f"-A {PARENT} ")]
    return bool(rules) and rules[0] == f"-A {PARENT} -j {CHAIN}"
