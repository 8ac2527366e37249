"""
Read the YAML of an original CCC Ansible inventory's variable files: safe YAML only, inline
``!vault`` values kept apart (never mapped as plain text), plain ``{{ var.path }}`` references
expanded within a budget. No templating beyond plain references, no lookups, no ansible needed.
Shared by both entry points of the migration's mapping: the offline tool reads the inventory's
folders (``ccc_migrate/inventory.py``), the inventory pillar reads files from git
(``ccc_migrate_records``).
"""

import re

import yaml

_REFERENCE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*\}\}")


class InventoryError(Exception):
    """The inventory cannot be read (missing hosts file or group, YAML that does not parse)."""


class InlineVault(str):
    """An inline ``!vault`` value (its cipher text): never mapped as plain text."""


class _Loader(yaml.SafeLoader):
    """Safe YAML that keeps ``!vault`` values as ``InlineVault`` instead of failing."""


_Loader.add_constructor("!vault", lambda loader, node: InlineVault(loader.construct_scalar(node)))
_Loader.add_constructor("!unsafe", lambda loader, node: str(loader.construct_scalar(node)))


def load_text(text, source):
    """The YAML ``text`` of the inventory file ``source`` (``{}`` when empty): safe YAML only,
    ``!vault`` kept as ``InlineVault``; the inventory pillar reads files from git this way."""
    try:
        return yaml.load(text, Loader=_Loader) or {}
    except yaml.YAMLError as exc:
        raise InventoryError(f"{source}: not valid YAML: {exc}") from None


def _lookup(dotted, variables):
    value = variables
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(dotted)
        value = value[part]
    return value


# What expanding one variable may produce (characters of text plus one per list item or key):
# plain references nest, so ten references five levels deep would otherwise make 10**5 copies
# (a memory bomb in a commit to the lab's inventory repository). Far above any real inventory.
EXPANSION_BUDGET = 1_000_000


class _TooLarge(Exception):
    pass


def expand(value, variables, depth=0, budget=None):
    """``value`` with plain ``{{ a.b }}`` references replaced from ``variables``; an expression
    the migration cannot evaluate (filters, lookups, unknown names) stays as written. Expanding
    more than ``EXPANSION_BUDGET`` raises ``_TooLarge`` (``expand_all`` then keeps the value as
    written, and its template syntax has it refused)."""
    budget = [EXPANSION_BUDGET] if budget is None else budget
    if isinstance(value, dict):
        _charge(budget, len(value))
        return {key: expand(item, variables, depth, budget) for key, item in value.items()}
    if isinstance(value, list):
        _charge(budget, len(value))
        return [expand(item, variables, depth, budget) for item in value]
    if isinstance(value, str):
        _charge(budget, len(value))
    if not isinstance(value, str) or isinstance(value, InlineVault) or "{{" not in value or depth > 5:
        return value
    whole = _REFERENCE.fullmatch(value.strip())
    try:
        if whole:
            return expand(_lookup(whole.group(1), variables), variables, depth + 1, budget)
        return _REFERENCE.sub(
            lambda match: str(expand(_lookup(match.group(1), variables), variables, depth + 1, budget)), value)
    except KeyError:
        return value


def _charge(budget, cost):
    budget[0] -= cost
    if budget[0] < 0:
        raise _TooLarge()


def expand_all(found, variables):
    """``{key: (expanded value, source)}``; a variable whose expansion would exceed
    ``EXPANSION_BUDGET`` stays as written."""
    expanded = {}
    for key, (value, source) in found.items():
        try:
            expanded[key] = (expand(value, variables), source)
        except _TooLarge:
            expanded[key] = (value, source)
    return expanded


def holds_inline_vault(value):
    """True when ``value`` holds an inline vault value (Jinja the migration cannot expand is
    refused before: ``ccc_migrate_markers``)."""
    if isinstance(value, dict):
        return any(holds_inline_vault(item) for item in value.values())
    if isinstance(value, list):
        return any(holds_inline_vault(item) for item in value)
    return isinstance(value, InlineVault)
