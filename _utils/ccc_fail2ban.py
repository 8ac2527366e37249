"""
The fail2ban role's rules: check ``ccc:fail2ban`` and write the host sshd jail.

Pillar values end up in a fail2ban config file and in the command line fail2ban runs for
``ignorecommand``, so each is checked against a strict shape before anything is written (the role's
``schema.yaml``: whole numbers, IP addresses or networks, a two-letter country code, a fixed set of
backends). Nothing from pillar reaches a shell unchecked. Plain Python, no Salt imports.
"""

import ipaddress

import ccc_role_schema

# The shipped country check (salt://cluster/fail2ban/files/ignore-country), run by fail2ban.
IGNORE_SCRIPT = "/usr/local/lib/ccc-salt/fail2ban-ignore-country"


def ignore_networks(value):
    """``ignoreip`` (checked by the schema: a list, or the original's space-separated string)
    as a list of networks; ``ValueError`` naming the first entry of a string that is no IP
    address or network (the schema cannot split a string)."""
    if value is None:
        return []
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    networks = []
    for entry in value:
        try:
            networks.append(str(ipaddress.ip_network(str(entry).strip(), strict=False)))
        except ValueError:
            raise ValueError(f"ccc:fail2ban:ignoreip: {entry!r} is not an IP address or network "
                             "(e.g. 10.0.0.0/8, ::1)") from None
    return networks


def check(settings, schema):
    """
    ``ccc:fail2ban`` (defaults merged) → ``(jail settings, problems)`` by the role's ``schema``
    (``salt/cluster/fail2ban/schema.yaml``); the jail settings are only usable when ``problems``
    is empty. Beyond the schema only the parse of a space-separated ``ignoreip`` is left here.
    """
    problems = ccc_role_schema.problems("fail2ban", settings, schema)
    if problems:
        return {}, problems
    jail = {key: settings[key] for key in ("maxretry", "findtime", "bantime", "backend")}
    try:
        jail["ignoreip"] = ignore_networks(settings.get("ignoreip"))
    except ValueError as exc:
        return {}, [str(exc)]
    jail["ignore_country"] = (settings.get("ignore_country") or "").upper() or None
    jail["port"] = str(settings["port"])
    jail["enabled"] = settings["sshd_enabled"]
    return jail, []


def jail_text(jail):
    """The ``[sshd]`` jail file for checked ``jail`` settings."""
    lines = [
        "# Managed by ccc-salt (cluster role fail2ban, pillar ccc:fail2ban): edits are overwritten.",
        "[sshd]",
        f"enabled = {'true' if jail['enabled'] else 'false'}",
        f"port = {jail['port']}",
        "filter = sshd",
        f"backend = {jail['backend']}",
        f"ignoreip = {' '.join(jail['ignoreip'])}",
        f"maxretry = {jail['maxretry']}",
        f"findtime = {jail['findtime']}",
        f"bantime = {jail['bantime']}",
    ]
    if jail["ignore_country"]:
        lines.append(f"ignorecommand = {IGNORE_SCRIPT} <ip> {jail['ignore_country']}")
    return "\n".join(lines) + "\n"
