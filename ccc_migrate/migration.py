"""
Migrate a CCC Ansible inventory to a ccc-salt pillar tree (docs/migration.md):

    scripts/migrate-ansible-inventory INVENTORY_DIR OUT_DIR [--check] [--json]
        [--vault-password-file F] [--recipient GPG_KEYID] [--gpg-homedir DIR]

The launcher runs ``python -m ccc_migrate`` (``cli``) with the checkout and its ``_utils`` on
PYTHONPATH, as Salt puts ``_utils`` on the path of what it loads; ``migrate`` is the whole mapping.
Writes ``OUT_DIR/site/...`` and the report (``OUT_DIR/migration-report.{txt,json}``), prints
the report; ``--check`` only prints it. No secret value is ever printed or logged.
"""

import ccc_migrate_check
import ccc_migrate_containers
import ccc_migrate_inventory
import ccc_migrate_markers
import ccc_migrate_report
import yaml

from . import cluster, guard, hosts, markers, paths, vault, write
from . import inventory as inventory_reader
from . import secrets as vault_secrets

DEFAULT_IMAGE_PREFIX = "vicoslab/ccc:"
FIRST = ("mount_points",)  # keys other mappings read (nfs_mounts needs the mount points)


class MigrationError(Exception):
    """The migration cannot go on (unreadable inventory or vault, missing recipient)."""


def _map_group_vars(group_vars, report):
    """The site's ``ccc`` tree from the group variables."""
    site = {}
    for key in sorted(group_vars, key=lambda k: (k not in FIRST, list(group_vars).index(k))):
        value, source = group_vars[key]
        guard.mapped(site, report, source, key,
                     lambda tree, k=key, v=value, s=source: _map_group_var(k, v, s, tree, report))
    return site


def _map_group_var(key, value, source, site, report):
    """One group variable into ``site`` (run by ``guard.mapped``: a value of a shape the mappers
    cannot read is refused alone)."""
    if ccc_migrate_inventory.holds_inline_vault(value):
        report.not_mapped(source, key, "holds an inline vault value the migration cannot decrypt")
    elif key in ccc_migrate_containers.HANDLERS:
        name, handler = ccc_migrate_containers.HANDLERS[key]
        site[name] = handler(value, report, source)
    elif key.startswith("ansible_"):
        report.not_mapped(source, key, "Ansible connection variable")
    elif not cluster.map_var(key, value, site, report, source):
        report.not_mapped(source, key, "no ccc-salt equivalent")


def _image_policy(site, report):
    """Users may name images under the prefixes of the admins' images; registry logins are used
    for the registries of docker_registries (the original allowed any image with root's logins)."""
    images = [c.get("CONTAINER_IMAGE") for c in site.get("containers") or []]
    images += [u.get("CONTAINER_IMAGE") for u in (site.get("users") or {}).values()]
    prefixes = {DEFAULT_IMAGE_PREFIX} | {image.rsplit(":", 1)[0] + ":" for image in images if isinstance(image, str)}
    registries = paths.get(site, "docker:registries") or []
    # compute_container_image_pull_always (mapped to pull before) defaulted to true in the original
    pull = paths.get(site, "cluster:image_policy:pull", "always")
    paths.put(site, "cluster:image_policy", {"allowed_prefixes": sorted(prefixes), "pull": pull,
                                             "credentialed_prefixes": [f"{host}/" for host in registries]})
    report.changed("deployment_containers", "CONTAINER_IMAGE (every image)", paths.shown("cluster:image_policy"),
                   "the original ran any image a user named; users may now name images under the admins' image "
                   "prefixes (difference image-policy)")


def _map_hosts(inventory, site, report):
    local = {str(path).rstrip("/"): key for key, path in (paths.get(site, "cluster:mount_points:local") or {}).items()}
    nodes = {}
    files = {}  # node file -> the hosts it would serve
    for node in inventory["nodes"]:
        files.setdefault(write.node_file(node), []).append(node)
    for node, meta in inventory["nodes"].items():
        sharing = files[write.node_file(node)]
        if len(sharing) > 1:
            others = ", ".join(ccc_migrate_markers.name(other) for other in sharing if other != node)
            report.refused(inventory["hosts_file"], f"host {ccc_migrate_markers.name(node)}",
                           f"its pillar file {write.node_file(node)} would also be the file of {others} "
                           "(pillar/top.sls replaces the dots of a minion id by underscores), so each minion would "
                           "read the other's node data: the node is left out (rename one host)")
            continue
        for key in meta:
            report.not_mapped(inventory["hosts_file"], f"{node}.{key}",
                              "Ansible connection variable: the Salt minion id must be the node name")
        nodes[node] = hosts.map_host(node, inventory["host_vars"].get(node) or {}, report, local)
    for group, members in inventory["groups"].items():
        report.not_mapped(inventory["hosts_file"], f"group {group}",
                          f"target these nodes with a Salt list or nodegroup instead: {', '.join(members)}")
    for path in inventory["other_files"]:
        report.not_mapped(path, "*", "vars of a group or host outside ccc-cluster (the original's plays did not use them)")
    return nodes


def _secrets(inventory, password, report):
    vault_file = inventory["vault_file"]
    if vault_file is None:
        if password is not None:
            raise MigrationError(f"--vault-password-file given but there is no {inventory_reader.VAULT_FILE}")
        return {}
    if password is None:
        report.not_mapped(inventory_reader.VAULT_FILE, "*", "no --vault-password-file: the secrets are not migrated")
        return {}
    try:
        with open(vault_file, "rb") as handle:
            plain = vault.decrypt(handle.read(), password)
    except vault.VaultError as exc:
        raise MigrationError(f"{inventory_reader.VAULT_FILE}: {exc}") from None
    data = yaml.safe_load(plain.decode("utf-8")) or {}
    if not isinstance(data, dict):
        raise MigrationError(f"{inventory_reader.VAULT_FILE}: the decrypted vault is not a mapping of variables")
    data = markers.secrets(data, report, inventory_reader.VAULT_FILE)
    return vault_secrets.map_secrets(data, report, inventory_reader.VAULT_FILE)


def migrate(inventory_dir, password=None):
    """``(site ccc tree, {node: ccc tree}, secrets, report)`` of the inventory at ``inventory_dir``."""
    report = ccc_migrate_report.Report()
    try:
        inventory = inventory_reader.read(inventory_dir)
    except inventory_reader.InventoryError as exc:
        raise MigrationError(str(exc)) from None
    inventory = markers.inventory(inventory, report)  # template syntax never reaches the pillar
    site = _map_group_vars(inventory["group_vars"], report)
    _image_policy(site, report)
    nodes = _map_hosts(inventory, site, report)
    secrets = _secrets(inventory, password, report)
    ccc_migrate_check.check(site, list(inventory["nodes"]), report)
    report.note("the roles check their own settings when applied: run salt '*' state.apply cluster test=True first")
    return site, nodes, secrets, report
