"""
Map the original's data model of compute containers (``deployment_types``,
``deployment_users``, ``deployment_containers``) to ``ccc:user_types``, ``ccc:users`` and
``ccc:containers``. The keys keep their CCC names; what ccc-salt reads differently is changed
here and said in the report (lists written as strings, the redundant USER_EMAIL of a user,
PURGE_USER_DATA).
"""

import re

import ccc_migrate_markers as markers
import ccc_pillar
import ccc_schema

TYPE_KEYS = ("access", "default_nodes", "allowed_nodes", "allowed_device_groups", "allowed_private_data_groups",
             "allowed_private_data_mount_groups", "hardening")
RECORD_KEYS = ccc_schema.USER_SETTABLE_KEYS + ccc_schema.ADMIN_ONLY_KEYS
LIST_KEYS = ("DEPLOYMENT_NODES",) + tuple(key for _, key in ccc_pillar.GRANTS.values())
TYPE_LIST_KEYS = tuple(key for key, _ in ccc_pillar.GRANTS.values()) + ("default_nodes",)


def _as_list(value):
    """A list of names from the original's list or string (split on commas and spaces)."""
    if isinstance(value, str):
        return [item for item in re.split(r"[,\s]+", value) if item]
    return value


def _entries(value, kind, variable, report, source):
    """The entries of a data-model variable: ``value`` must be a ``kind`` (``dict`` or ``list``,
    else TypeError: the variable is refused whole: the offline tool's ``ccc_migrate/guard.py``); an empty one is said
    in the report, and an entry that is not a mapping is refused alone. Yields ``(key, entry)``."""
    if value is not None and not isinstance(value, kind):
        raise TypeError(f"{variable} must be a {'mapping' if kind is dict else 'list'}")
    if not value:
        report.not_mapped(source, variable, "empty: nothing to migrate")
    for key, entry in (value or {}).items() if kind is dict else enumerate(value or []):
        if isinstance(entry, dict) or (entry is None and kind is dict):
            yield key, entry or {}
        else:
            shown = key if kind is dict else f"#{key}"
            report.refused(source, f"{variable}[{markers.name(shown)}]", "not a mapping of KEY: value: left out")


def user_types(value, report, source):
    """``deployment_types`` → ``ccc:user_types``."""
    types = {}
    for name, entry in _entries(value, dict, "deployment_types", report, source):
        where = f"deployment_types[{name}]"
        kept = {key: entry[key] for key in TYPE_KEYS if key in entry}
        for key in TYPE_LIST_KEYS:
            if isinstance(kept.get(key), str):
                kept[key] = _as_list(kept[key])
                report.changed(source, f"{where}.{key}", f"ccc:user_types:{name}:{key}",
                               "a string becomes a list (the original matched it as a substring; difference node-lists)")
        for key in entry:
            if key not in TYPE_KEYS:
                reason = "stale name of access in the original's comments" if key == "network_access" else "no ccc-salt equivalent"
                report.not_mapped(source, f"{where}.{key}", reason)
        types[name] = kept
        report.mapped(source, f"{where}: {', '.join(k for k in entry if k in TYPE_KEYS)}", f"ccc:user_types:{name} (site)")
    return types


def _record(entry, where, target, report, source):
    """One user or container record: known keys kept, lists normalised, the rest reported."""
    kept = {}
    for key, value in entry.items():
        if key not in RECORD_KEYS:
            report.not_mapped(source, f"{where}.{key}", "not a key of a CCC container record")
        elif key == "PURGE_USER_DATA":
            report.changed(source, f"{where}.PURGE_USER_DATA", None,
                           "not carried over: a migration never deletes data (difference purge-user-data)")
        elif key in LIST_KEYS and isinstance(value, str):
            kept[key] = _as_list(value)
            report.changed(source, f"{where}.{key}", f"{target}:{key}",
                           f"the string becomes the list {kept[key]} (the original matched it as a substring)")
        else:
            kept[key] = value
    report.mapped(source, f"{where}: {', '.join(k for k in kept)}", f"{target} (site)")
    return kept


def users(value, report, source):
    """``deployment_users`` → ``ccc:users`` (keyed by e-mail; the record's USER_EMAIL dropped)."""
    mapped = {}
    for email, entry in _entries(value, dict, "deployment_users", report, source):
        entry = dict(entry)
        where = f"deployment_users[{email}]"
        if "USER_EMAIL" in entry:
            own = entry.pop("USER_EMAIL")
            reason = ("dropped: the key of ccc:users is the e-mail" if own == email else
                      f"dropped, and it differs from the key: the key {email} is used")
            report.changed(source, f"{where}.USER_EMAIL", f"ccc:users:{email}", reason)
        mapped[email] = _record(entry, where, f"ccc:users:{email}", report, source)
    return mapped


def containers(value, report, source):
    """``deployment_containers`` → ``ccc:containers``, in order."""
    mapped = []
    for index, entry in _entries(value, list, "deployment_containers", report, source):
        stack = entry.get("STACK_NAME") or f"#{index}"
        mapped.append(_record(dict(entry), f"deployment_containers[{stack}]", f"ccc:containers[{stack}]",
                              report, source))
    return mapped


HANDLERS = {"deployment_types": ("user_types", user_types), "deployment_users": ("users", users),
            "deployment_containers": ("containers", containers)}
