"""
Read an original CCC Ansible inventory (the layout of ccc-deployment's sample inventory): the
hosts file, ``group_vars/ccc-cluster``, ``host_vars/<node>`` and the vault file's path. Only
reads: no templating beyond plain variable references, no lookups, no ansible needed.
"""

import pathlib
import re

import yaml

GROUP = "ccc-cluster"
VAULT_FILE = "vault_vars/cluster-secrets.yml"
YAML_SUFFIXES = (".yml", ".yaml")
_REFERENCE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*\}\}")


class InventoryError(Exception):
    """The inventory cannot be read (missing hosts file or group, YAML that does not parse)."""


class InlineVault(str):
    """An inline ``!vault`` value (its cipher text): never mapped as plain text."""


class _Loader(yaml.SafeLoader):
    """Safe YAML that keeps ``!vault`` values as ``InlineVault`` instead of failing."""


_Loader.add_constructor("!vault", lambda loader, node: InlineVault(loader.construct_scalar(node)))
_Loader.add_constructor("!unsafe", lambda loader, node: str(loader.construct_scalar(node)))


def load_yaml(path):
    """One YAML file of the inventory (``{}`` when empty)."""
    return load_text(pathlib.Path(path).read_text(encoding="utf-8"), path)


def load_text(text, source):
    """The YAML ``text`` of the inventory file ``source`` (``{}`` when empty): safe YAML only,
    ``!vault`` kept as ``InlineVault``; the inventory pillar reads files from git this way."""
    try:
        return yaml.load(text, Loader=_Loader) or {}
    except yaml.YAMLError as exc:
        raise InventoryError(f"{source}: not valid YAML: {exc}") from None


def _yaml_files(folder):
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in YAML_SUFFIXES and not p.name.startswith("."))


def _hosts_file(root):
    """The inventory's hosts file: a YAML file at the top with ``all`` → ``children`` → ccc-cluster."""
    for path in _yaml_files(root):
        data = load_yaml(path)
        if isinstance(data, dict) and GROUP in ((data.get("all") or {}).get("children") or {}):
            return path, data
    raise InventoryError(f"{root}: no hosts file (a YAML file with all: children: {GROUP}:)")


def _groups(data):
    """``{group: {host: host vars}}`` of the hosts file, nested groups flattened."""
    groups = {}

    def walk(name, group):
        group = group or {}
        groups[name] = {host: dict(meta or {}) for host, meta in (group.get("hosts") or {}).items()}
        for child, sub in (group.get("children") or {}).items():
            walk(child, sub)
            groups[name].update(groups[child])

    walk("all", data.get("all"))
    return groups


def _vars_in(path, root):
    """``{key: (value, relative source)}`` of a vars file or of every file in a vars folder."""
    files = _yaml_files(path) if path.is_dir() else [path]
    found = {}
    for file in files:
        data = load_yaml(file)
        if not isinstance(data, dict):
            raise InventoryError(f"{file}: expected a mapping of variables")
        found.update({key: (value, str(file.relative_to(root))) for key, value in data.items()})
    return found


def _named_vars(folder, name, root):
    """Vars of ``group_vars/<name>`` or ``host_vars/<name>`` (file or folder), if any."""
    for candidate in [folder / name] + [folder / f"{name}{suffix}" for suffix in YAML_SUFFIXES]:
        if candidate.exists():
            return _vars_in(candidate, root)
    return {}


def read(root):
    """
    The inventory at ``root`` as plain data: ``hosts_file``, ``nodes`` (the ccc-cluster hosts,
    in order, with their connection vars), ``groups`` (other groups → hosts), ``group_vars``
    and ``host_vars`` (``{key: (value, source)}``, references expanded), ``vault_file`` (a path
    or None) and ``other_files`` (vars files the original would not read for ccc-cluster).
    """
    root = pathlib.Path(root)
    if not root.is_dir():
        raise InventoryError(f"{root}: not a folder")
    hosts_path, data = _hosts_file(root)
    groups = _groups(data)
    nodes = groups[GROUP]
    group_vars = {**_named_vars(root / "group_vars", "all", root), **_named_vars(root / "group_vars", GROUP, root)}
    host_vars = {node: _named_vars(root / "host_vars", node, root) for node in nodes}
    other = []
    for folder, known in (("group_vars", {"all", GROUP}), ("host_vars", set(nodes))):
        for path in sorted((root / folder).iterdir()) if (root / folder).is_dir() else []:
            if path.name.split(".")[0] not in known and not path.name.startswith("."):
                other.append(str(path.relative_to(root)))
    vault = root / VAULT_FILE
    plain = {key: value for key, (value, _) in group_vars.items()}
    return {
        "root": str(root), "hosts_file": str(hosts_path.relative_to(root)), "nodes": nodes,
        "groups": {name: sorted(hosts) for name, hosts in groups.items() if name not in ("all", GROUP)},
        "group_vars": expand_all(group_vars, plain),
        "host_vars": {node: expand_all(found, {**plain, **{k: v for k, (v, _) in found.items()}})
                      for node, found in host_vars.items()},
        "vault_file": str(vault) if vault.is_file() else None,
        "other_files": other,
    }


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
