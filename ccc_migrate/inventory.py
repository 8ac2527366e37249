"""
Read an original CCC Ansible inventory from its folder (the layout of ccc-deployment's sample
inventory): the hosts file, ``group_vars/ccc-cluster``, ``host_vars/<node>`` and the vault
file's path. Only reads; each file's YAML goes through the shared reader
(``ccc_migrate_inventory``: safe YAML, ``!vault`` kept apart, plain references expanded).
"""

import pathlib

import ccc_migrate_inventory as inventory_text

GROUP = "ccc-cluster"
VAULT_FILE = "vault_vars/cluster-secrets.yml"
YAML_SUFFIXES = (".yml", ".yaml")
InventoryError = inventory_text.InventoryError  # one error for both readers


def load_yaml(path):
    """One YAML file of the inventory (``{}`` when empty)."""
    return inventory_text.load_text(pathlib.Path(path).read_text(encoding="utf-8"), path)


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
        "group_vars": inventory_text.expand_all(group_vars, plain),
        "host_vars": {node: inventory_text.expand_all(found, {**plain, **{k: v for k, (v, _) in found.items()}})
                      for node, found in host_vars.items()},
        "vault_file": str(vault) if vault.is_file() else None,
        "other_files": other,
    }
