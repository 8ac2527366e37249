"""
Map one node's ``host_vars`` to its pillar file (``site/nodes/<node>.sls``): GPU device groups,
netplan interfaces and VLANs, ZFS pools and datasets; any cluster variable set per host goes
through the cluster mapping into the node's file (node pillar wins over the site's).
"""

from . import cluster, guard, paths

NETPLAN_KEYS = ("addresses", "dhcp4", "dhcp6", "gateway4", "gateway6", "nameservers", "accept_ra", "routes", "mac", "mtu")
VLAN_KEYS = ("id", "link", "addresses", "dhcp4", "dhcp6", "nameservers", "accept_ra", "routes", "mtu")
POOL_PROPERTIES = ("atime", "compression", "dedup", "primarycache", "quota", "recordsize", "sharenfs", "sync", "xattr")
DATASET_PROPERTIES = ("mountpoint", "recordsize", "compression", "logbias", "quota", "xattr", "dedup", "primarycache", "sync")


def _compute_devices(value, tree, report, source, where):
    paths.put(tree, "node:compute_devices", {group: list(ids or []) for group, ids in (value or {}).items()})
    if value is None:
        report.changed(source, "compute_devices", paths.shown("node:compute_devices", where),
                       "null meant every GPU of the node in the original; ccc-salt gives no GPU without a group "
                       "(difference no-gpu-group-means-no-gpu): list the node's GPUs in a group")
    else:
        report.mapped(source, "compute_devices", paths.shown("node:compute_devices", where))


def _interfaces(entries, keys, what, report, source):
    found = {}
    for entry in entries or []:
        name = entry.get("interface")
        dropped = [k for k in entry if k not in keys and k != "interface"]
        found[name] = {k: entry[k] for k in keys if k in entry}
        if dropped:
            report.not_mapped(source, f"{what}[{name}].{','.join(dropped)}", "no netplan key of the role takes it")
    return found


def _netplan(value, tree, report, source, where, key="netplan_iface", section="ethernets"):
    keys = NETPLAN_KEYS if section == "ethernets" else VLAN_KEYS
    paths.put(tree, f"netplan:{section}", _interfaces(value, keys, key, report, source))
    if section == "ethernets":
        paths.put(tree, "roles:netplan", bool(value))
    report.changed(source, key, paths.shown(f"netplan:{section}", where),
                   "keyed by interface; no forced mtu 1500 (only a given mtu is written); gateway6 is the IPv6 gateway "
                   "(the original wrote gateway4 there); set-name only with mac")


def _vlans(value, tree, report, source, where):
    _netplan(value, tree, report, source, where, "netplan_iface_vlans", "vlans")


def _zpools(value, tree, report, source, where):
    pools = {}
    for entry in value or []:
        name = entry.get("name")
        if entry.get("state", "present") != "present":
            report.not_mapped(source, f"zfs_zpools[{name}]", "state absent: ccc-salt never destroys a pool (destroy it by hand)")
            continue
        pool = {"type": entry.get("type") or "stripe", "disks": list(entry.get("devices") or [])}
        properties = {k: entry[k] for k in POOL_PROPERTIES if k in entry}
        if properties:
            pool["properties"] = properties
        if entry.get("options"):
            report.not_mapped(source, f"zfs_zpools[{name}].options", "zpool create flags: use pool_properties (-o)")
        pools[name] = pool
        report.changed(source, f"zfs_zpools[{name}]", paths.shown(f"zfs:pools:{name}", where),
                       "type '' becomes stripe, devices become disks; a pool whose disks differ is reported, never destroyed")
    paths.put(tree, "zfs:pools", pools)


def _zvolumes(value, tree, report, source, where, local_points=None):
    datasets = {}
    for entry in value or []:
        name = f"{entry.get('zpool')}/{entry.get('name')}"
        if entry.get("state", "present") != "present":
            report.not_mapped(source, f"zfs_volumes[{name}]", "state absent: ccc-salt never destroys a dataset")
            continue
        if "volsize" in entry:
            report.not_mapped(source, f"zfs_volumes[{name}]", "volumes (volsize) are not managed by the zfs role")
            continue
        properties = {k: entry[k] for k in DATASET_PROPERTIES if k in entry}
        dataset = {"properties": properties}
        point = (local_points or {}).get(str(properties.get("mountpoint", "")).rstrip("/"))
        if point:
            del properties["mountpoint"]
            dataset["mount_point"] = point
        datasets[name] = dataset
        reason = f"mountpoint becomes mount_point: {point} (ccc:cluster:mount_points:local)" if point else None
        target = paths.shown(f"zfs:datasets:{name}", where)
        report.changed(source, f"zfs_volumes[{name}]", target, reason) if reason else report.mapped(source, f"zfs_volumes[{name}]", target)
    paths.put(tree, "zfs:datasets", datasets)


HANDLERS = {"compute_devices": _compute_devices, "netplan_iface": _netplan, "netplan_iface_vlans": _vlans,
            "zfs_zpools": _zpools}


def map_host(node, found, report, local_points):
    """The node's ``ccc`` tree from its host vars ``{key: (value, source)}``."""
    tree, where = {}, f"nodes/{node}"

    def map_one(key, value, source, tree):
        if key in HANDLERS:
            HANDLERS[key](value, tree, report, source, where)
        elif key == "zfs_volumes":
            _zvolumes(value, tree, report, source, where, local_points)
        elif key.startswith("ansible_"):
            report.not_mapped(source, key, "Ansible connection variable: the Salt minion id is the node name")
        elif not cluster.map_var(key, value, tree, report, source, where):
            report.not_mapped(source, key, "no ccc-salt equivalent")

    for key, (value, source) in found.items():
        guard.mapped(tree, report, source, key, lambda scratch, k=key, v=value, s=source: map_one(k, v, s, scratch))
    return tree
