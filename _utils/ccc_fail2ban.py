"""
The fail2ban role's rules: check ``ccc:fail2ban`` and write the host sshd jail.

Pillar values end up in a fail2ban config file and in the command line fail2ban runs for
``ignorecommand``, so each is checked against a strict shape before anything is written: whole
numbers, IP addresses or networks (``ipaddress``), a two-letter country code, a fixed set of
backends. Nothing from pillar reaches a shell unchecked. Plain Python, no Salt imports.
"""

import ipaddress
import re

import ccc_rules

BACKENDS = ("systemd", "auto", "polling", "pyinotify")
PORT = re.compile(r"^[a-z0-9][a-z0-9,:-]{0,63}$")
COUNTRY = re.compile(r"^[A-Za-z]{2}$")
LIMITS = {"maxretry": 1, "findtime": 1, "bantime": -1}
# The shipped country check (salt://cluster/fail2ban/files/ignore-country), run by fail2ban.
IGNORE_SCRIPT = "/usr/local/lib/ccc-salt/fail2ban-ignore-country"


def ignore_networks(value):
    """``ignoreip`` as a list of networks (a list, or the original's space-separated string);
    ``ValueError`` naming the first entry that is no IP address or network."""
    if value is None:
        return []
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    if not isinstance(value, list):
        raise ValueError(f"ignoreip must be a list of IP addresses or networks, got {value!r}")
    networks = []
    for entry in value:
        try:
            networks.append(str(ipaddress.ip_network(str(entry).strip(), strict=False)))
        except ValueError:
            raise ValueError(f"ignoreip: {entry!r} is not an IP address or network (e.g. 10.0.0.0/8, ::1)") from None
    return networks


def _whole(name, value, lowest):
    if not ccc_rules.is_whole(value, lowest):
        text = "-1 (forever) or " if lowest < 0 else ""
        raise ValueError(f"{name} must be {text}a whole number >= {max(lowest, 1)} (seconds for times), got {value!r}")
    if lowest < 0 and value == 0:
        raise ValueError(f"{name} must be -1 (forever) or a whole number >= 1, got 0")
    return value


def check(settings):
    """
    ``ccc:fail2ban`` (defaults merged) → ``(jail settings, problems)``. The jail settings are
    only usable when ``problems`` is empty.
    """
    problems, jail = [], {}
    for key, lowest in LIMITS.items():
        try:
            jail[key] = _whole(key, settings.get(key), lowest)
        except ValueError as exc:
            problems.append(str(exc))
    try:
        jail["ignoreip"] = ignore_networks(settings.get("ignoreip"))
    except ValueError as exc:
        problems.append(str(exc))
    country = settings.get("ignore_country")
    if country in (None, ""):
        jail["ignore_country"] = None
    elif isinstance(country, str) and COUNTRY.fullmatch(country):
        jail["ignore_country"] = country.upper()
    else:
        problems.append(f"ignore_country must be a two-letter ISO country code such as SI, got {country!r}")
    port = settings.get("port")
    if ccc_rules.is_whole(port):
        port = str(port)
    if not (isinstance(port, str) and PORT.fullmatch(port)):
        problems.append(f"port must be a service name or port numbers such as ssh or 22,2222, got {port!r}")
    jail["port"] = port
    if settings.get("backend") not in BACKENDS:
        problems.append(f"backend must be one of {', '.join(BACKENDS)}, got {settings.get('backend')!r}")
    jail["backend"] = settings.get("backend")
    jail["enabled"] = settings.get("sshd_enabled") is True
    return jail, problems


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
