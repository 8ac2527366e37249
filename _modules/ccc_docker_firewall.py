"""
Execution module ``ccc_docker_firewall``: the egress chains of restricted Docker networks as
``iptables``/``ip6tables`` show them on this node, and the two acts on them: load the rules files
through the boot-time script (so boot and Salt share one code path), or remove the chains, their
jumps and the files. The rules themselves are decided in ``_utils/ccc_docker_firewall.py``; the
state ``ccc_docker_firewall`` compares and reports. Returns data or raises
``CommandExecutionError``.
"""

import os
import subprocess

from salt.exceptions import CommandExecutionError

import ccc_docker_firewall as fw
import ccc_safefs

__virtualname__ = "ccc_docker_firewall"


def __virtual__():
    return __virtualname__


def _tables(family, *args):
    """``iptables -w ARGS`` (``ip6tables`` for ipv6): (returncode, stdout, stderr)."""
    try:
        proc = subprocess.run([fw.TOOLS[family], "-w", *args], capture_output=True, text=True, check=False)
    except FileNotFoundError as exc:
        return 127, "", str(exc)
    return proc.returncode, proc.stdout, proc.stderr.strip()


def _family(family):
    if family not in fw.TOOLS:
        raise CommandExecutionError(f"family must be one of {', '.join(sorted(fw.TOOLS))}, not {family!r}")
    return family


def ipv6_works():
    """
    Whether ``ip6tables`` works on this node (a kernel without IPv6 gets only the IPv4 chains).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker_firewall.ipv6_works
    """
    return _tables("ipv6", "-S", "INPUT")[0] == 0


def live(family="ipv4"):
    """
    The egress chains of ``family`` (``ipv4``/``ipv6``) as they are now:
    ``{"chains": {chain: [rules] or None when missing}, "jumps": {parent: {"first": bool,
    "count": int}}}``, where ``first`` says the parent's first rule jumps to our chain
    (fail2ban's jumps above it do not count) and ``count`` how many jumps to it the parent has.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker_firewall.live ipv6
    """
    chains, jumps = {}, {}
    for parent, chain in fw.JUMPS[_family(family)]:
        code, listing, _ = _tables(family, "-S", chain)
        chains[chain] = fw.live_rules(listing, chain) if code == 0 else None
        code, parent_listing, _ = _tables(family, "-S", parent)
        parent_listing = parent_listing if code == 0 else ""
        jumps[parent] = {"first": fw.jump_first(parent_listing, parent, chain),
                         "count": sum(1 for line in parent_listing.splitlines()
                                      if line.strip() == f"-A {parent} -j {chain}")}
    return {"chains": chains, "jumps": jumps}


def apply(rules_file, script, rule_sets):
    """
    Write ``rule_sets`` (``{"ipv4": {chain: rules}, "ipv6": {chain: rules}}``, an empty ipv6 part
    where ip6tables does not work) to ``rules_file`` and its ``.v6`` sibling (0644), then load
    them with ``script`` (``ccc-docker-firewall``, the one the boot-time unit runs). ``True``, or
    ``CommandExecutionError`` with what the script said.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker_firewall.apply /etc/ccc-salt/docker-firewall.rules \\
            /usr/local/sbin/ccc-docker-firewall \\
            '{"ipv4": {"CCC-EGRESS": ["-A CCC-EGRESS -i ccc-student -j DROP"], "CCC-EGRESS-INPUT": []}, "ipv6": {}}'
    """
    ccc_safefs.replace_file(rules_file, fw.restore_text(rule_sets["ipv4"]).encode(), 0o644, root="/")
    if rule_sets.get("ipv6"):
        ccc_safefs.replace_file(fw.v6_file(rules_file), fw.restore_text(rule_sets["ipv6"]).encode(), 0o644, root="/")
    try:
        proc = subprocess.run([script, rules_file, fw.v6_file(rules_file)], capture_output=True, text=True, check=False)
    except OSError as exc:
        raise CommandExecutionError(f"{script} could not be run: {exc}") from exc
    if proc.returncode != 0:
        said = proc.stderr.strip() or proc.stdout.strip()
        raise CommandExecutionError(said or f"{script} exit status {proc.returncode}")
    return True


def remove(rules_file="/etc/ccc-salt/docker-firewall.rules"):
    """
    Remove the jumps to our chains, the chains themselves (both families) and ``rules_file``
    with its ``.v6`` sibling. Returns what was removed (``{"ipv4": [...], "ipv6": [...],
    "files": [...]}``); ``CommandExecutionError`` names a chain that could not be removed.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker_firewall.remove
    """
    removed = {}
    for family in fw.JUMPS:
        found = live(family)
        done = removed.setdefault(family, [])
        for parent, chain in fw.JUMPS[family]:
            for _ in range(found["jumps"][parent]["count"]):
                _tables(family, "-D", parent, "-j", chain)
            if found["jumps"][parent]["count"]:
                done.append(f"{parent} -j {chain}")
        for chain in dict.fromkeys(chain for _, chain in fw.JUMPS[family]):
            if found["chains"][chain] is None:
                continue
            for args in (("-F", chain), ("-X", chain)):
                code, _, error = _tables(family, *args)
                if code != 0:
                    raise CommandExecutionError(f"could not remove {family} {chain}: {error}")
            done.append(chain)
    removed["files"] = [path for path in (rules_file, fw.v6_file(rules_file)) if os.path.lexists(path)]
    for path in removed["files"]:
        os.unlink(path)
    return removed
