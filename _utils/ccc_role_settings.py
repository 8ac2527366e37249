"""
One cluster role's settings: pillar ``ccc:<key>`` (``ccc_roles.settings_key``) merged over the
role's ``salt://cluster/<role>/defaults.yaml``.

A role's ``map.jinja`` passes its defaults in through ``ccc_cluster.role_settings``; a role's
execution module called bare from the command line reads them from the file server here. Both
end in ``merge``, so the merge and the settings key have one definition, and no module calls
another of ours back through ``__salt__`` for them. Salt-side only (raises
``CommandExecutionError``); the agents never need it.
"""

import yaml

import ccc_pillar
import ccc_role_schema
import ccc_roles
from salt.exceptions import CommandExecutionError


def _name(role):
    try:
        return ccc_roles.role_name(role)
    except ValueError as exc:
        raise CommandExecutionError(str(exc)) from exc


def merge(role, defaults, ccc):
    """The settings of ``role`` from its ``defaults`` (the file's mapping, with or without its
    top-level role key) and the node's ``ccc`` pillar."""
    name = _name(role)
    defaults = ccc_pillar.plain(defaults)
    if isinstance(defaults, dict) and set(defaults) == {name}:
        defaults = defaults[name]
    key = ccc_roles.settings_key(name)
    override = ccc.get(key)
    if override is None:
        override = {}
    if not isinstance(override, dict):
        raise CommandExecutionError(f"ccc:{key} must be a mapping of settings, got {type(override).__name__}")
    return ccc_pillar.deep_merge(defaults or {}, override)


def _file(name, what, get_file_str):
    url = f"salt://cluster/{name}/{what}"
    text = get_file_str(url)
    if not text:
        raise CommandExecutionError(f"{url} is not on the file server")
    return yaml.safe_load(text)


def schema(role, get_file_str):
    """The role's ``salt://cluster/<role>/schema.yaml`` (``ccc_role_schema``), read from the
    file server as plain data (never rendered)."""
    return _file(_name(role), "schema.yaml", get_file_str)


def problems(role, settings, get_file_str):
    """What is wrong with ``settings`` of ``role`` by its schema (``ccc_role_schema.problems``)."""
    return ccc_role_schema.problems(_name(role), settings, schema(role, get_file_str))


def read(role, pillar, get_file_str):
    """The settings of ``role`` with its defaults read from the file server (``get_file_str`` is
    Salt's ``cp.get_file_str``) and the node's whole ``pillar``."""
    name = _name(role)
    return merge(name, _file(name, "defaults.yaml", get_file_str), ccc_pillar.pillar_ccc(pillar))


def given(role, settings, pillar, get_file_str):
    """``(settings, schema)`` for a role's plan: ``settings`` as the caller passed them (the role's
    state, from its ``map.jinja``) or, when ``None`` (the CLI), read as ``read`` does; and the
    role's schema, which the plan checks them against."""
    if settings is None:
        settings = read(role, pillar, get_file_str)
    return settings, schema(role, get_file_str)


def selection(pillar):
    """What one ``state.apply cluster`` does on this node (``ccc_roles.select`` of its
    ``ccc:roles`` and ``ccc:only_roles``)."""
    ccc = ccc_pillar.pillar_ccc(pillar)
    try:
        return ccc_roles.select(ccc.get("roles"), ccc.get("only_roles"))
    except ValueError as exc:
        raise CommandExecutionError(str(exc)) from exc


def enabled(role, pillar):
    """Whether one ``state.apply cluster`` on this node applies ``role``."""
    return _name(role) in selection(pillar)["apply"]
