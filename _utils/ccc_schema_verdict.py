"""
Whether a document certainly meets a JSON schema, decided without the jsonschema package.

Every settings file and admin record is validated on every run, and nearly all of them are
valid. jsonschema's import alone (its ``referencing`` and ``attrs`` stack) took about 40 ms of
each ``salt-call`` that validates anything: a tenth of a redeploy's job and of a no-op apply.
``verdict`` covers the keywords ``ccc_schema.USER_SETTINGS_SCHEMA`` uses, each the way
jsonschema reads it, and answers True only when the document is valid; ``ccc_schema`` then
skips jsonschema. Anything else (an invalid document, a keyword or a value it is not sure
of) goes to jsonschema, which stays the only source of the messages users read.
"""

import re

_ANNOTATIONS = frozenset(("$schema", "$id", "title", "description"))
_TYPES = {  # jsonschema's type checks (bool is not an integer; "integer" of a float: see _type)
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "string": lambda value: isinstance(value, str),
    "boolean": lambda value: isinstance(value, bool),
    "null": lambda value: value is None,
    "integer": lambda value: isinstance(value, int) and not isinstance(value, bool),
}


def verdict(instance, schema):
    """
    True: ``instance`` is valid under ``schema``; False: it is not; None: not sure (a keyword
    or a value this check does not decide exactly). Only True may skip jsonschema.
    """
    if schema is True or schema is False:
        return schema
    if not isinstance(schema, dict):
        return None
    return _all(_KEYWORDS[keyword](value, instance, schema) if keyword in _KEYWORDS else None
                for keyword, value in schema.items() if keyword not in _ANNOTATIONS)


def _all(answers):
    """One invalid part makes the whole invalid; one undecided part leaves it undecided."""
    undecided = False
    for answer in answers:
        if answer is False:
            return False
        undecided = undecided or answer is None
    return None if undecided else True


def _type(names, instance, _schema):
    names = [names] if isinstance(names, str) else names
    if any(name not in _TYPES for name in names):
        return None
    if any(_TYPES[name](instance) for name in names):
        return True
    if "integer" in names and isinstance(instance, float):
        return None  # jsonschema may count 2.0 as an integer
    return False


def _properties(properties, instance, _schema):
    if not isinstance(instance, dict):
        return True
    return _all(verdict(instance[key], sub) for key, sub in properties.items() if key in instance)


def _additional_properties(extra, instance, schema):
    if not isinstance(instance, dict):
        return True
    if "patternProperties" in schema:
        return None
    known = schema.get("properties", {})
    extras = [key for key in instance if key not in known]
    if extra is False:
        return not extras
    return _all(verdict(instance[key], extra) for key in extras)


def _items(items, instance, schema):
    if not isinstance(instance, list):
        return True
    if "prefixItems" in schema:
        return None
    return _all(verdict(item, items) for item in instance)


def _one_of(branches, instance, _schema):
    answers = [verdict(instance, branch) for branch in branches]
    if None in answers:
        return None
    return answers.count(True) == 1


def _enum(values, instance, _schema):
    if not all(isinstance(value, str) for value in values):
        return None
    return isinstance(instance, str) and instance in values


def _unique_items(unique, instance, _schema):
    if not unique or not isinstance(instance, list):
        return True
    if not all(isinstance(item, (str, int)) and not isinstance(item, bool) for item in instance):
        return None  # jsonschema's equality of floats, booleans and containers is its own
    return len(set(instance)) == len(instance)  # strings and integers: Python's equality is the same


def _bound(holds):
    """A numeric bound, read as jsonschema does, for integers only (floats: undecided)."""
    def check(limit, instance, _schema):
        if isinstance(instance, bool) or not isinstance(instance, (int, float)):
            return True
        if isinstance(instance, float) or not isinstance(limit, int):
            return None
        return holds(instance, limit)
    return check


def _size(kind, holds):
    """A length bound that applies to one kind of value (strings, lists or objects)."""
    def check(limit, instance, _schema):
        return holds(len(instance), limit) if isinstance(instance, kind) else True
    return check


def _pattern(pattern, instance, _schema):
    return not isinstance(instance, str) or re.search(pattern, instance) is not None


def _required(names, instance, _schema):
    return not isinstance(instance, dict) or all(name in instance for name in names)


_KEYWORDS = {
    "type": _type,
    "properties": _properties,
    "additionalProperties": _additional_properties,
    "items": _items,
    "oneOf": _one_of,
    "enum": _enum,
    "uniqueItems": _unique_items,
    "minimum": _bound(lambda value, limit: value >= limit),
    "maximum": _bound(lambda value, limit: value <= limit),
    "maxLength": _size(str, lambda size, limit: size <= limit),
    "minLength": _size(str, lambda size, limit: size >= limit),
    "maxItems": _size(list, lambda size, limit: size <= limit),
    "maxProperties": _size(dict, lambda size, limit: size <= limit),
    "pattern": _pattern,
    "required": _required,
}
