"""
State ``ccc_docker_firewall``: the egress chain of restricted Docker networks, compared with
the live one on every run (so hand edits and flushed chains are repaired) and persisted in a
rules file that ``ccc-docker-firewall.service`` replays after every dockerd start.

.. code-block:: yaml

    ccc-cluster-docker-firewall-chain:
      ccc_docker_firewall.managed:
        - rules_file: /etc/ccc-salt/docker-firewall.rules
        - script: /usr/local/sbin/ccc-docker-firewall

The rules come from ``ccc:cluster:networks`` (``_utils/ccc_docker_firewall.py``); the state
applies them by running the same script the unit runs, so boot and Salt share one code path.
"""

import os
import subprocess

import ccc_docker_firewall as fw
import ccc_pillar
import ccc_safefs
import ccc_state_ret

__virtualname__ = "ccc_docker_firewall"


def __virtual__():
    return __virtualname__


def _iptables(*args):
    """``iptables -w ARGS``: (returncode, stdout, stderr)."""
    proc = subprocess.run(["iptables", "-w", *args], capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr.strip()


def _live():
    """The live chain's rules and whether DOCKER-USER jumps to it first."""
    code, chain, _ = _iptables("-S", fw.CHAIN)
    _, parent, _ = _iptables("-S", fw.PARENT)
    return (fw.live_rules(chain) if code == 0 else None), fw.jump_first(parent)


def _diff(live, wanted):
    live = live or []
    return {key: value for key, value in (("added", [r for r in wanted if r not in live]),
                                          ("removed", [r for r in live if r not in wanted])) if value}


def managed(name, rules_file="/etc/ccc-salt/docker-firewall.rules", script="/usr/local/sbin/ccc-docker-firewall"):
    """
    Make chain ``CCC-EGRESS`` hold exactly the rules ``ccc:cluster:networks`` asks for, jumped to
    from the top of ``DOCKER-USER``, and keep them in ``rules_file`` for the boot-time unit. With
    no restricted network the chain, its jump and the file are removed.
    """
    try:
        networks = ccc_pillar.cluster_settings(ccc_pillar.pillar_ccc(__pillar__)).get("networks")
        wanted = fw.chain_rules(networks)
    except ValueError as exc:
        return ccc_state_ret.result(name, False, {}, f"egress rules not applied: {exc}")
    if not wanted:
        return absent(name, rules_file=rules_file)
    text = fw.restore_text(wanted)
    live, jump_ok = _live()
    changes = {}
    if ccc_safefs.read_text(rules_file) != text:
        changes["rules file"] = rules_file
    if live != wanted:
        changes["chain"] = _diff(live, wanted) or {"reordered": wanted}
    if not jump_ok:
        changes["jump"] = f"-I {fw.PARENT} 1 -j {fw.CHAIN}"
    summary = f"{len(wanted)} rule(s) in {fw.CHAIN} for restricted networks"
    if not changes:
        return ccc_state_ret.result(name, True, {}, f"{summary} in place")
    if __opts__["test"]:
        return ccc_state_ret.result(name, None, changes, f"{summary} would be applied")
    ccc_safefs.replace_file(rules_file, text.encode(), 0o644, root="/")
    proc = subprocess.run([script, rules_file], capture_output=True, text=True, check=False)
    live, jump_ok = _live()
    if proc.returncode != 0 or live != wanted or not jump_ok:
        detail = proc.stderr.strip() or proc.stdout.strip() or "the live chain still differs"
        return ccc_state_ret.result(name, False, changes, f"{summary} could not be applied: {detail}")
    return ccc_state_ret.result(name, True, changes, f"{summary} applied")


def absent(name, rules_file="/etc/ccc-salt/docker-firewall.rules"):
    """Remove the jump from ``DOCKER-USER``, the ``CCC-EGRESS`` chain and ``rules_file``."""
    code, listing, _ = _iptables("-S", fw.PARENT)
    jumps = sum(1 for line in listing.splitlines() if line.strip() == f"-A {fw.PARENT} -j {fw.CHAIN}") if code == 0 else 0
    chain_code, _, _ = _iptables("-S", fw.CHAIN)
    changes = {}
    if jumps:
        changes["jump"] = "removed"
    if chain_code == 0:
        changes["chain"] = "removed"
    if os.path.lexists(rules_file):
        changes["rules file"] = "removed"
    if not changes:
        return ccc_state_ret.result(name, True, {}, f"no egress chain {fw.CHAIN}")
    if __opts__["test"]:
        return ccc_state_ret.result(name, None, changes, f"egress chain {fw.CHAIN} would be removed")
    for _ in range(jumps):
        _iptables("-D", fw.PARENT, "-j", fw.CHAIN)
    if chain_code == 0:
        for args in (("-F", fw.CHAIN), ("-X", fw.CHAIN)):
            code, _, error = _iptables(*args)
            if code != 0:
                return ccc_state_ret.result(name, False, changes, f"could not remove {fw.CHAIN}: {error}")
    if os.path.lexists(rules_file):
        os.unlink(rules_file)
    return ccc_state_ret.result(name, True, changes, f"egress chain {fw.CHAIN} removed")
