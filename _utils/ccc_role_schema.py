"""
The one checker of the cluster roles' settings: a role's ``salt/cluster/<role>/schema.yaml`` (plain
data, read with ``yaml.safe_load``, never rendered) says what each key of ``ccc:<role>`` may hold,
and ``problems`` says what is wrong, one sentence per value, naming the pillar key
(``ccc:<role>:<key> must be ..., got ...``). Rules a schema cannot say (one key compared with
another) stay in the role's own module, which runs them only once the schema found nothing.

A schema is the role's defaults' mapping with a spec per key (template-formula keeps a parameters
schema next to its defaults the same way). A spec holds any of:

- ``type``: one name or a list of ``string``, ``integer``, ``number``, ``boolean``, ``list``,
  ``mapping``, ``null`` (a YAML ``true`` is never a number: ``ccc_rules.is_whole``/``is_number``);
- ``minimum`` / ``maximum``: bounds of a number; ``also``: further values allowed as they are
  (``-1`` for "forever");
- ``enum``: the allowed values; ``pattern``: a regular expression a string must match whole;
  ``format``: a named rule (``FORMATS``: the shared rules of ``ccc_rules`` and a few shapes);
- ``items`` (a spec for each list item) and ``min_items``;
- ``keys`` (a spec per known key of a mapping), ``required`` (keys that must be set, not null),
  ``unknown: refuse`` (keys not in ``keys`` are an error), ``names`` and ``values`` (specs for
  the names and the values of a mapping whose names are the admin's, e.g. pools by name);
- ``text``: what the value must be, in the admin's words (else one is made from the spec).

Pure: settings and schema in, problems out.
"""

import ipaddress
import os
import re

import ccc_roles
import ccc_rules


def _ip_network(value):
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return True


def _ip_address(value):
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _ip_version(version):
    """A rule: an IP address of that version (a gateway of that family)."""
    return lambda value: _ip_address(value) and ipaddress.ip_address(value).version == version


def _ip_interface(value):
    """An interface address with its prefix length (10.0.0.5/24, fd00::5/64), as netplan wants it."""
    try:
        ipaddress.ip_interface(value)
    except ValueError:
        return False
    return "/" in value


# Linux interface names: at most 15 bytes (IFNAMSIZ - 1), no slash, colon or white space.
INTERFACE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}")


def _regex(value):
    try:
        re.compile(value)
    except re.error:
        return False
    return True


# format name -> (rule on a string, what it is)
FORMATS = {
    "stack_name": (ccc_rules.is_stack_name, "a STACK_NAME (a-z, 0-9, _ . -)"),
    "email": (ccc_rules.is_email, "an e-mail address"),
    "env_name": (ccc_rules.is_env_name, "an environment variable name"),
    "minion_id": (ccc_rules.is_minion_id, "a minion id"),
    "absolute_path": (os.path.isabs, "an absolute path"),
    "folder": (lambda v: os.path.isabs(v) and os.path.normpath(v) != "/", "an absolute folder other than /"),
    "normalised_folder": (lambda v: os.path.isabs(v) and os.path.normpath(v) == v != "/",
                          "an absolute, normalised folder other than /"),
    "ip_address": (_ip_address, "an IP address"),
    "ip_network": (_ip_network, "an IP address or network (e.g. 10.0.0.0/8, ::1)"),
    "ipv4_address": (_ip_version(4), "an IPv4 address"),
    "ipv6_address": (_ip_version(6), "an IPv6 address"),
    "ip_interface": (_ip_interface, "an address with a prefix length (e.g. 10.0.0.5/24)"),
    "interface_name": (lambda v: bool(INTERFACE_NAME.fullmatch(v)),
                       "an interface name (1 to 15 letters, digits, '_', '.', '-')"),
    "regex": (_regex, "a regular expression"),
}
TYPES = {
    "string": (lambda v: isinstance(v, str), "a string"),
    "integer": (ccc_rules.is_whole, "a whole number"),
    "number": (ccc_rules.is_number, "a number"),
    "boolean": (lambda v: isinstance(v, bool), "true or false"),
    "list": (lambda v: isinstance(v, list), "a list"),
    "mapping": (lambda v: isinstance(v, dict), "a mapping"),
    "null": (lambda v: v is None, "null"),
}
SPEC_KEYS = {"type", "minimum", "maximum", "also", "enum", "pattern", "format", "items", "min_items", "keys",
             "required", "unknown", "names", "values", "text"}


def _types(spec):
    kinds = spec.get("type")
    if kinds is None:
        return []
    return [kinds] if isinstance(kinds, str) else list(kinds)


def _bounds(spec):
    low, high = spec.get("minimum"), spec.get("maximum")
    if low is not None and high is not None:
        return f" {low}..{high}"
    if low is not None:
        return f" >= {low}"
    return f" <= {high}" if high is not None else ""


def describe(spec):
    """What a value of ``spec`` must be, as the end of "must be ...": its ``text``, else made from
    the spec (``a whole number >= 1 or null``)."""
    if spec.get("text"):
        return spec["text"]
    if "enum" in spec:
        return "one of " + ", ".join(str(v) for v in spec["enum"])
    words = []
    for kind in _types(spec):
        word = TYPES[kind][1]
        if kind in ("integer", "number"):
            word += _bounds(spec)
        elif kind == "string" and "format" in spec:
            word = FORMATS[spec["format"]][1]
        elif kind == "string" and "pattern" in spec:
            word = f"a string matching {spec['pattern']}"
        elif kind == "list" and spec.get("min_items"):
            word = "a non-empty list" if spec["min_items"] == 1 else f"a list of at least {spec['min_items']} items"
        words.append(word)
    words += [repr(v) for v in spec.get("also", ())]
    return " or ".join(words) or "a value"


def _fits(value, spec):
    """Whether ``value`` alone (not its items or keys) is what ``spec`` allows."""
    if value in spec.get("also", ()) and not isinstance(value, bool):
        return True
    if "enum" in spec:
        return any(value == v and type(value) is type(v) for v in spec["enum"])
    kinds = _types(spec)
    if kinds and not any(TYPES[kind][0](value) for kind in kinds):
        return False
    if ccc_rules.is_number(value) and not (spec.get("minimum") is None or value >= spec["minimum"]):
        return False
    if ccc_rules.is_number(value) and not (spec.get("maximum") is None or value <= spec["maximum"]):
        return False
    if isinstance(value, str) and "pattern" in spec and not re.fullmatch(spec["pattern"], value):
        return False
    if isinstance(value, str) and "format" in spec and not FORMATS[spec["format"]][0](value):
        return False
    return not (isinstance(value, list) and len(value) < spec.get("min_items", 0))


def _check(path, value, spec, found, item=False, require=True):
    if not _fits(value, spec):
        found.append(f"{path}: {value!r} is not {describe(spec)}" if item
                     else f"{path} must be {describe(spec)}, got {value!r}")
        return
    if isinstance(value, list) and "items" in spec:
        for index, entry in enumerate(value):
            if isinstance(entry, dict) and _fits(entry, spec["items"]):
                _check_mapping(f"{path}[{index}]", entry, spec["items"], found, require)
            else:
                _check(path, entry, spec["items"], found, item=True, require=require)
    if isinstance(value, dict):
        _check_mapping(path, value, spec, found, require)


def _check_mapping(path, value, spec, found, require):
    keys = spec.get("keys") or {}
    missing = [key for key in (spec.get("required", ()) if require else ()) if value.get(key) is None]
    found.extend(f"{path}:{key} is required: {describe(keys.get(key, {}))}" for key in missing)
    for key, child in keys.items():
        if key not in missing and (value.get(key) is not None or (key in value and not _fits(None, child))):
            _check(f"{path}:{key}", value.get(key), child, found, require=require)
    unknown = [key for key in value if key not in keys]
    if unknown and spec.get("unknown") == "refuse":
        found.append(f"{path} has unknown keys: {', '.join(map(str, unknown))} (known: {', '.join(keys)})")
    for key in unknown:
        if "names" in spec and not _fits(key, spec["names"]):
            found.append(f"{path}: {key!r} is not {describe(spec['names'])}")
        elif "values" in spec:
            _check(f"{path}:{key}", value[key], spec["values"], found, require=require)


def problems(role, settings, schema, require=True):
    """What is wrong with ``settings`` (the role's merged settings) by the role's ``schema`` (the
    file's mapping, with or without its top-level role key): sentences an admin can act on, in
    the schema's order; empty when the settings are usable. ``require=False`` lets the keys a
    schema marks ``required`` be null: a role's defaults leave them to the admin (the tests check
    the defaults so)."""
    if isinstance(schema, dict) and set(schema) == {role}:
        schema = schema[role]
    found = []
    _check(f"ccc:{ccc_roles.settings_key(role)}", settings, schema, found, require=require)
    return found


def spec_problems(spec, path="schema"):
    """What is wrong with a schema itself (unknown spec keys, types or formats, a bad pattern):
    the tests run this over every role's schema, so a typo cannot switch a check off."""
    found = [f"{path}: unknown spec key {key!r}" for key in spec if key not in SPEC_KEYS]
    found += [f"{path}: unknown type {kind!r}" for kind in _types(spec) if kind not in TYPES]
    if "format" in spec and spec["format"] not in FORMATS:
        found.append(f"{path}: unknown format {spec['format']!r}")
    if "pattern" in spec and not _regex(spec["pattern"]):
        found.append(f"{path}: pattern {spec['pattern']!r} is no regular expression")
    for key in ("items", "names", "values"):
        if key in spec:
            found += spec_problems(spec[key], f"{path}.{key}")
    for key, child in (spec.get("keys") or {}).items():
        found += spec_problems(child, f"{path}:{key}")
    return found
