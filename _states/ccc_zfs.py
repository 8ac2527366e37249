"""
State module ``ccc_zfs``: the zfs role's pools, datasets and module parameters.

It creates what is missing and sets properties that differ. An existing pool whose layout
differs from pillar in any way (vdev type, disks, compared by resolved device) is reported and
left exactly as it is; a disk that is in a pool or carries any signature never goes into a new
pool. Nothing here destroys, forces or re-labels (``ccc_zfs.change`` refuses those commands).
"""

import os

import ccc_safefs
import _ccc_state_ret as ccc_state_ret
import ccc_zfs
from salt.exceptions import CommandExecutionError

__virtualname__ = "ccc_zfs"

NOT_INSTALLED = "zpool/zfs/blkid are not installed on this node (zfsutils-linux)"


def __virtual__():
    return __virtualname__


def _no_tools(name, what):
    """Test mode before zfsutils-linux is installed: say what would happen; for real: fail."""
    if __opts__["test"]:
        return ccc_state_ret.result(name, None, {}, f"{what} once zfsutils-linux is installed (checked then: {NOT_INSTALLED} yet)")
    return ccc_state_ret.result(name, False, {}, f"{name}: {NOT_INSTALLED}")


def _set(kind, target, differences):
    """``zpool set``/``zfs set`` each differing property; returns the changes."""
    for key, diff in differences.items():
        __salt__["ccc_zfs.change"]([kind, "set", f"{key}={diff['new']}", target])
    return differences


def _property_changes(name, properties, pool_properties):
    """Differences of the pool's root dataset and of the pool itself from pillar."""
    found = {}
    dataset = ccc_zfs.property_differences(properties, __salt__["ccc_zfs.get"]("zfs", name, list(properties)))
    pool = ccc_zfs.property_differences(pool_properties, __salt__["ccc_zfs.get"]("zpool", name, list(pool_properties)))
    if dataset:
        found["properties"] = dataset
    if pool:
        found["pool_properties"] = pool
    return found


def _mismatch(name, vdevs):
    """The layout differences of existing pool ``name`` (``[]`` when it matches pillar)."""
    actual = __salt__["ccc_zfs.layout"](name)
    differences = ccc_zfs.layout_differences(ccc_zfs.wanted_layout(vdevs), actual, __salt__["ccc_zfs.identify"])
    if not differences:
        return []
    return differences + [f"the pool now is {ccc_zfs.describe(actual)}"]


def _blockers(name, vdevs, existing):
    """Why the disks of new pool ``name`` must not be used: a disk of an imported pool (by
    resolved device), missing, or carrying any signature (``blkid -p``)."""
    in_use = {}
    for pool in existing:
        for vdev in __salt__["ccc_zfs.layout"](pool):
            for path in vdev["devices"]:
                for ident in __salt__["ccc_zfs.identify"](path):
                    in_use.setdefault(ident, pool)
    found = []
    for disk in (disk for vdev in vdevs for disk in vdev["disks"]):
        ident = __salt__["ccc_zfs.identify"](disk)[0]
        if ident in in_use:
            found.append(f"disk {disk} is in pool {in_use[ident]}")
            continue
        verdict = __salt__["ccc_zfs.probe"](disk)
        if verdict:
            found.append(verdict)
    return found


def pool_present(name, vdevs, properties=None, pool_properties=None):
    """
    Pool ``name`` exists with ``vdevs`` (``[{"type", "disks"}]``, checked by ``ccc_zfs.plan``),
    its root dataset's ``properties`` and its ``pool_properties``. A missing pool is created
    only from blank disks; an existing one with another layout fails the state, unchanged.
    """
    properties, pool_properties = properties or {}, pool_properties or {}
    pool = {"vdevs": vdevs, "properties": properties, "pool_properties": pool_properties}
    layout = ccc_zfs.describe(ccc_zfs.wanted_layout(vdevs))
    if not __salt__["ccc_zfs.tools"]():
        return _no_tools(name, f"pool {name} would be created from {layout} if missing")
    try:
        existing = __salt__["ccc_zfs.pools"]()
        if name not in existing:
            return _create(name, pool, layout, existing)
        mismatch = _mismatch(name, vdevs)
        if mismatch:
            return ccc_state_ret.result(name, False, {}, (
                f"pool {name} does not match ccc:zfs:pools:{name}: {'; '.join(mismatch)}. Nothing was changed: "
                "ccc-salt never destroys, recreates or re-labels a pool. Make pillar describe the pool as it is, "
                "or rebuild the pool by hand after moving its data"))
        changes = _property_changes(name, properties, pool_properties)
        if not changes:
            return ccc_state_ret.result(name, True, {}, f"pool {name} is as defined ({layout}, {existing[name]})")
        if __opts__["test"]:
            return ccc_state_ret.result(name, None, changes, f"pool {name}: properties would be set")
        _set("zfs", name, changes.get("properties", {}))
        _set("zpool", name, changes.get("pool_properties", {}))
        return ccc_state_ret.result(name, True, changes, f"pool {name}: properties set")
    except CommandExecutionError as exc:
        return ccc_state_ret.result(name, False, {}, f"pool {name}: {exc}; nothing more was changed")


def _create(name, pool, layout, existing):
    """Create pool ``name`` when every disk is free and blank; else fail saying why."""
    blockers = _blockers(name, pool["vdevs"], existing)
    if blockers:
        return ccc_state_ret.result(name, False, {}, (
            f"pool {name} is not created: {'; '.join(blockers)}. ccc-salt uses only disks that are in no "
            "imported pool and carry no signature (blkid -p)"))
    changes = {"pool": "created", "layout": layout}
    if __opts__["test"]:
        return ccc_state_ret.result(name, None, changes, f"pool {name} would be created from {layout} (its disks are blank)")
    __salt__["ccc_zfs.change"](ccc_zfs.create_argv(name, pool))
    mismatch = _mismatch(name, pool["vdevs"])
    if mismatch:
        return ccc_state_ret.result(name, False, changes, f"pool {name} was created but reads back otherwise: {'; '.join(mismatch)}")
    return ccc_state_ret.result(name, True, changes, f"pool {name} created from {layout}")


def dataset_present(name, properties=None):
    """File system ``name`` (``<pool>/<path>``) exists with ``properties``; created when missing
    (with its parents), properties set when they differ. Never destroyed or renamed."""
    properties = properties or {}
    pool = name.split("/")[0]
    if not __salt__["ccc_zfs.tools"]():
        return _no_tools(name, f"dataset {name} would be created if missing")
    try:
        if pool not in __salt__["ccc_zfs.pools"]():
            if __opts__["test"]:
                return ccc_state_ret.result(name, None, {"dataset": "created", "properties": properties},
                                            f"dataset {name} would be created with its pool {pool}")
            return ccc_state_ret.result(name, False, {}, f"dataset {name}: pool {pool} is not imported on this node")
        if name not in __salt__["ccc_zfs.datasets"](pool):
            changes = {"dataset": "created", "properties": properties}
            if __opts__["test"]:
                return ccc_state_ret.result(name, None, changes, f"dataset {name} would be created")
            argv = ["zfs", "create", "-p"]
            for key, value in properties.items():
                argv += ["-o", f"{key}={value}"]
            __salt__["ccc_zfs.change"](argv + [name])
            return ccc_state_ret.result(name, True, changes, f"dataset {name} created")
        differences = ccc_zfs.property_differences(properties, __salt__["ccc_zfs.get"]("zfs", name, list(properties)))
        if not differences:
            return ccc_state_ret.result(name, True, {}, f"dataset {name} is as defined")
        if __opts__["test"]:
            return ccc_state_ret.result(name, None, {"properties": differences}, f"dataset {name}: properties would be set")
        return ccc_state_ret.result(name, True, {"properties": _set("zfs", name, differences)}, f"dataset {name}: properties set")
    except CommandExecutionError as exc:
        return ccc_state_ret.result(name, False, {}, f"dataset {name}: {exc}; nothing more was changed")


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(65536)
    except FileNotFoundError:
        return None


def _live(parameters, live_dir):
    """``{parameter: {"old", "new"}}`` of the loaded module's differing values, in write order
    (no module loaded: ``{}``); a parameter the module lacks raises ``CommandExecutionError``."""
    if not os.path.isdir(live_dir):
        return {}
    current = {}
    for key in parameters:
        value = _read(os.path.join(live_dir, key))
        if value is None:
            raise CommandExecutionError(f"the loaded zfs module has no parameter {key} ({live_dir})")
        current[key] = value.strip()
    return {key: {"old": current[key], "new": str(parameters[key])}
            for key in ccc_zfs.live_order(parameters, current) if current[key] != str(parameters[key])}


def module_parameters(name, parameters=None, live_dir="/sys/module/zfs/parameters"):
    """
    The ZFS module parameters (ARC limits) in modprobe file ``name`` (read at module load) and,
    when the module is loaded, written live to ``live_dir``. No parameters: a file of ours is
    removed (another's is left alone); the live values stay until the module is reloaded.
    """
    parameters = parameters or {}
    current = _read(name)
    wanted = ccc_zfs.modprobe_text(parameters) if parameters else None
    changes = {}
    if wanted is not None and current != wanted:
        changes["file"] = "written"
    elif wanted is None and current is not None and current.startswith(ccc_zfs.HEADER):
        changes["file"] = "removed"
    try:
        live = _live(parameters, live_dir)
    except CommandExecutionError as exc:
        return ccc_state_ret.result(name, False, {}, f"{exc}; nothing was changed")
    if live:
        changes["live"] = live
    if not changes:
        return ccc_state_ret.result(name, True, {}, f"zfs module parameters as defined ({len(parameters)} set)")
    if __opts__["test"]:
        return ccc_state_ret.result(name, None, changes, "zfs module parameters would be set")
    if changes.get("file") == "written":
        try:  # modprobe reads the file at module load: whole or not at all
            ccc_safefs.replace_file(name, wanted.encode("utf-8"), 0o644, folder_mode=0o755)
        except OSError as exc:
            return ccc_state_ret.result(name, False, {}, f"{name} could not be written ({exc}); nothing was changed")
    elif changes.get("file") == "removed":
        os.unlink(name)
    for key in live:
        try:
            with open(os.path.join(live_dir, key), "w", encoding="utf-8") as handle:
                handle.write(str(parameters[key]))
        except OSError as exc:
            return ccc_state_ret.result(name, False, changes, f"the loaded zfs module refused {key}={parameters[key]}: {exc}")
    return ccc_state_ret.result(name, True, changes, "zfs module parameters set")


def modprobe_absent(name):
    """The role's modprobe file ``name`` removed when it is ours (the role's clean)."""
    current = _read(name)
    if current is None or not current.startswith(ccc_zfs.HEADER):
        return ccc_state_ret.result(name, True, {}, f"{name}: no file of ours")
    if __opts__["test"]:
        return ccc_state_ret.result(name, None, {"file": "removed"}, f"{name} would be removed")
    os.unlink(name)
    return ccc_state_ret.result(name, True, {"file": "removed"}, f"{name} removed")
