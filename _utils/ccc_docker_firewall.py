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

Forwarded traffic is not all: a container reaches the node itself (its gateway address on the
network's bridge, every other address of the node) through ``INPUT``, which ``FORWARD`` never
sees. ``INPUT_CHAIN``, jumped to first from ``INPUT``, returns replies, the node services the
network's containers need (the metrics forwarder's exporters, ``node_services``) and the
``allowed_access`` destinations, and drops everything else that enters from a restricted
network's bridge: the node is off limits to a restricted network whatever its lists name.
Docker's embedded DNS (127.0.0.11) answers inside each container and never crosses ``INPUT``.

The networks are IPv4 only (their IPAM, and the lists), so IPv6 from a restricted network's
bridge has no business anywhere: the same two chains in ``ip6tables`` (jumped to first from
``FORWARD`` and ``INPUT``) pass replies and traffic between the bridge's own containers, and drop
the rest.
"""

import ipaddress
import re

CHAIN = "CCC-EGRESS"
PARENT = "DOCKER-USER"
INPUT_CHAIN = "CCC-EGRESS-INPUT"
# Where each family's chains are jumped to from (first rule): ip6tables' DOCKER-USER exists only
# while dockerd's own IPv6 filtering is on, so IPv6 forwarding is caught in FORWARD itself.
JUMPS = {"ipv4": ((PARENT, CHAIN), ("INPUT", INPUT_CHAIN)),
         "ipv6": (("FORWARD", CHAIN), ("INPUT", INPUT_CHAIN))}
TOOLS = {"ipv4": "iptables", "ipv6": "ip6tables"}
ANYWHERE = "anywhere"
# Linux interface names: at most 15 bytes, no "/", ":", whitespace; Docker accepts these.
BRIDGE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$")
ESTABLISHED = f"-A {CHAIN} -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN"
INPUT_ESTABLISHED = f"-A {INPUT_CHAIN} -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN"


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


def _restricted_bridges(networks):
    """``[(name, definition)]`` of the restricted networks, by name, each checked (``network_rules``)."""
    if networks is None:
        networks = {}
    if not isinstance(networks, dict):
        raise ValueError(f"ccc:cluster:networks must be a mapping of network name to definition, got {type(networks).__name__}")
    found = []
    for name in sorted(networks):
        if network_rules(name, networks[name] or {}):
            found.append((name, networks[name]))
    return found


def node_service_rule(bridge, address, port):
    """The ``INPUT_CHAIN`` rule that lets ``bridge`` reach TCP ``port`` on the node's ``address``."""
    return f"-A {INPUT_CHAIN} -d {_v4_network(address, 'node service address')} -i {bridge} -p tcp -m tcp --dport {int(port)} -j RETURN"


def input_rules(networks, node_services=()):
    """
    Every rule of ``INPUT_CHAIN`` (IPv4): the conntrack return, then per restricted network its
    ``node_services`` (``[(network, address, port)]``: TCP services on the node it must reach),
    its ``allowed_access`` destinations and a DROP of the rest from its bridge. ``[]`` when no
    network is restricted.
    """
    restricted = _restricted_bridges(networks)
    if not restricted:
        return []
    rules = [INPUT_ESTABLISHED]
    for name, definition in restricted:
        bridge = definition["bridge_name"]
        rules.extend(node_service_rule(bridge, address, port)
                     for network, address, port in node_services if network == name)
        for dest in _destinations(definition.get("allowed_access"), f"ccc:cluster:networks:{name}:allowed_access", False):
            rules.append(f"-A {INPUT_CHAIN} -d {dest} -i {bridge} -j RETURN")
        rules.append(f"-A {INPUT_CHAIN} -i {bridge} -j DROP")
    return rules


def ipv6_rules(networks):
    """``{CHAIN: [...], INPUT_CHAIN: [...]}`` for ``ip6tables``: replies and same-bridge traffic
    pass, everything else from a restricted network's bridge is dropped; ``{}`` when none is."""
    bridges = [definition["bridge_name"] for _, definition in _restricted_bridges(networks)]
    if not bridges:
        return {}
    forward = [ESTABLISHED] + [f"-A {CHAIN} -i {b} -o {b} -j RETURN" for b in bridges] + \
        [f"-A {CHAIN} -i {b} -j DROP" for b in bridges]
    return {CHAIN: forward, INPUT_CHAIN: [INPUT_ESTABLISHED] + [f"-A {INPUT_CHAIN} -i {b} -j DROP" for b in bridges]}


def rule_sets(networks, node_services=()):
    """
    Everything the firewall installs: ``{"ipv4": {chain: rules}, "ipv6": {chain: rules}}`` in
    chain order, ``{}`` when no network is restricted. ``ValueError`` names a bad key.
    """
    forward = chain_rules(networks)
    if not forward:
        return {}
    return {"ipv4": {CHAIN: forward, INPUT_CHAIN: input_rules(networks, node_services)}, "ipv6": ipv6_rules(networks)}


def restore_text(chains):
    """
    The ``iptables-restore --noflush`` (or ``ip6tables-restore``) input that replaces each chain
    of ``chains`` (``{chain: rules}``; a plain list is ``CHAIN``'s rules) and touches no other.
    """
    if isinstance(chains, list):
        chains = {CHAIN: chains}
    lines = ["# ccc-salt: egress rules of restricted Docker networks (written by cluster.docker)", "*filter"]
    lines += [f":{chain} - [0:0]" for chain in chains]
    for rules in chains.values():
        lines += rules
    return "\n".join(lines + ["COMMIT"]) + "\n"


def v6_file(rules_file):
    """The ``ip6tables-restore`` file kept next to the IPv4 ``rules_file``."""
    return f"{rules_file}.v6"


def live_rules(listing, chain=CHAIN):
    """The ``-A`` lines of ``iptables -S <chain>`` output (the ``-N`` line and blanks dropped)."""
    return [line.strip() for line in (listing or "").splitlines() if line.strip().startswith(f"-A {chain} ")]


# fail2ban (its role runs on the same nodes) inserts jumps to its own chains at the top of INPUT
# whenever a jail starts; those chains only reject banned addresses, so they may stay above ours.
FAIL2BAN_JUMP = re.compile(r" -j f2b-[A-Za-z0-9_.-]+$")


def jump_first(listing, parent=PARENT, chain=CHAIN):
    """True when the first rule of ``iptables -S <parent>`` output jumps to ``chain`` (fail2ban's
    jumps above it do not count)."""
    rules = [line.strip() for line in (listing or "").splitlines() if line.strip().startswith(f"-A {parent} ")
             and not FAIL2BAN_JUMP.search(line.strip())]
    return bool(rules) and rules[0] == f"-A {parent} -j {chain}"
