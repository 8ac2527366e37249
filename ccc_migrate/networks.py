"""
Map the original's list-shaped network and storage variables to ccc-salt pillar: Docker
networks (``docker_networks`` → ``ccc:cluster:networks``), the access classes' networks
(``compute_container_networks`` → ``access_networks`` + ``claims_network``), the FRP clients
(``frpc_networks``) and the NFS mounts (``nfs_mounts`` → ``ccc:nfs_storage:mounts``).
"""

from . import paths

NETWORK_KEYS = {"subnet": "subnet", "gateway": "gateway", "internal_name": "bridge_name", "is_internal": "internal",
                "restricted_access": "restricted_access", "allowed_access": "allowed_access",
                "filter_enabled": "filter_enabled"}
STALE_NETWORK_KEYS = ("restricted_subnet", "allowed_gateway", "restriction_enabled")
BRIDGE_NAME_MAX = 15


def docker_networks(value, tree, report, source, where):
    """``[{name, subnet, gateway, internal_name, ...}]`` → ``ccc:cluster:networks:<name>``."""
    for entry in value or []:
        name = entry.get("name")
        key = f"docker_networks[{name}]"
        if entry.get("disabled"):
            report.not_mapped(source, key, "disabled in the original (not created there either)")
            continue
        network = {ours: entry[theirs] for theirs, ours in NETWORK_KEYS.items() if theirs in entry}
        target = paths.shown(f"cluster:networks:{name}", where)
        stale = [k for k in STALE_NETWORK_KEYS if k in entry]
        unknown = [k for k in entry if k not in NETWORK_KEYS and k not in STALE_NETWORK_KEYS and k not in ("name", "disabled")]
        if len(str(network.get("bridge_name", ""))) > BRIDGE_NAME_MAX:
            report.refused(source, f"{key}.internal_name", f"a Linux bridge name has at most {BRIDGE_NAME_MAX} characters")
        paths.put(tree, f"cluster:networks:{name}", network)
        reasons = [f"{theirs} becomes {ours}" for theirs, ours in NETWORK_KEYS.items() if theirs in entry and theirs != ours]
        reasons += [f"stale keys dropped (the original ignored them): {', '.join(stale)}"] if stale else []
        reasons += [f"unknown keys dropped: {', '.join(unknown)}"] if unknown else []
        report.changed(source, key, target, "; ".join(reasons)) if reasons else report.mapped(source, key, target)


def compute_container_networks(value, tree, report, source, where):
    """``{access: [{name: net}, ...]}`` → ``access_networks`` (names) and ``claims_network``
    (the one network every access class joins, which ccc-salt adds to every container)."""
    names = {access: [entry.get("name") if isinstance(entry, dict) else entry for entry in entries or []]
             for access, entries in (value or {}).items()}
    common = set.intersection(*(set(listed) for listed in names.values())) if names else set()
    claims = "claims" if "claims" in common else (sorted(common)[0] if len(common) == 1 else None)
    paths.put(tree, "cluster:claims_network", claims)
    paths.put(tree, "cluster:access_networks", {access: [n for n in listed if n != claims] for access, listed in names.items()})
    extra = sorted({k for entries in (value or {}).values() for entry in entries or [] if isinstance(entry, dict)
                    for k in entry if k != "name"})
    reason = (f"network entries become names; {claims!r}, joined by every access class, becomes ccc:cluster:claims_network"
              if claims else "network entries become names; no network is common to every class: claims_network null")
    if extra:
        reason += f"; per-network options dropped: {', '.join(extra)}"
    report.changed(source, "compute_container_networks", paths.shown("cluster:access_networks", where), reason)


def frpc_networks(value, tree, report, source, where):
    """``[{network_name, container_name, log_name}]`` → ``ccc:frp_client:networks`` (role on)."""
    entries = [{"network": e.get("network_name"), "container_name": e.get("container_name"),
                **({"log_name": e["log_name"]} if e.get("log_name") else {})} for e in value or []]
    paths.put(tree, "frp_client:networks", entries)
    paths.put(tree, "roles:frp_client", bool(entries))
    report.changed(source, "frpc_networks", paths.shown("frp_client:networks", where),
                   "network_name becomes network; the list switches the frp_client role on")


def nfs_mounts(value, tree, report, source, where):
    """``[{path, src, opts, state}]`` → ``ccc:nfs_storage:mounts:<mount point key>``: each path
    must be one of ``mount_points.nfs`` (ccc-salt mounts exactly those)."""
    points = {path.rstrip("/"): key for key, path in (paths.get(tree, "cluster:mount_points:nfs") or {}).items()
              if isinstance(path, str)}
    mounts = {}
    for entry in value or []:
        path = str(entry.get("path", "")).rstrip("/")
        key = f"nfs_mounts[{entry.get('path')}]"
        if path not in points:
            report.not_mapped(source, key, "not one of mount_points.nfs (ccc-salt mounts only those); mount it outside ccc-salt")
            continue
        if entry.get("state", "mounted") != "mounted":
            report.not_mapped(source, key, f"state {entry.get('state')!r}: ccc-salt only mounts")
            continue
        options = [o for o in str(entry.get("opts") or "").split(",") if o and o != "fsc"]
        mounts[points[path]] = {"source": entry.get("src"), **({"options": options} if options else {})}
        report.changed(source, key, paths.shown(f"nfs_storage:mounts:{points[path]}", where),
                       "keyed by its mount point; fsc dropped (added while the cachefilesd role is on)")
    paths.put(tree, "nfs_storage:mounts", mounts)
    paths.put(tree, "roles:nfs_storage", bool(mounts))


HANDLERS = {"docker_networks": docker_networks, "compute_container_networks": compute_container_networks,
            "frpc_networks": frpc_networks, "nfs_mounts": nfs_mounts}
