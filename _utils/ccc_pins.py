"""
Pinned bind sources: no Docker bind source passes through anything a user can change.

Docker resolves a bind source path again at every container start (a crash, a dockerd restart,
a reboot, ``unless-stopped``). A user who owns ``<user_data>/<email>`` could swap their home for
``ln -s / home`` and get the host's ``/`` at the next start. So the containers never see user
paths. For each container the node keeps a *pin set*, a root-only directory

    <binds_dir>/<STACK_NAME>/<set id>/{home,settings,user,private,hdd,ssd,group-<name>}

on its own tmpfs, each entry a bind mount made from a descriptor of the user folder opened
without following links (``ccc_safefs``). A bind mount holds the inode, not the path: whatever
the user renames or swaps later, the container keeps getting the folder that was checked.

* The set id hashes the sources and their inode numbers, so a user who replaces a folder gets a
  new set (and a recreated container) at the next apply, only after the new folder was checked.
  The old container keeps its own set until the swap is done; unused sets are unmounted.
* ``binds_dir`` is a tmpfs mounted here: after a reboot it is empty, Docker cannot start a
  container on a missing source, and the container starts only when Salt has pinned again.
* Live private data groups are mounted inside the container's ``private`` pin (a shared mount,
  seen by the container through its ``rslave`` ``/storage/private``); the mount point directory
  is opened without following links, so it can never land on a host path.

Plain Python: ``ccc_apply`` and ``ccc_private_mounts`` use it, the tests import it.
"""

import hashlib
import json
import os

import ccc_safefs

PIN_SET_LENGTH = 12



def ensure_tree(binds_dir):
    """Mount the pin tmpfs at ``binds_dir`` unless it is there (root only, no devices, no exec)."""
    os.makedirs(binds_dir, mode=0o700, exist_ok=True)
    # ismount first: reading every mount point of a busy node costs more than a pin set
    if os.path.ismount(binds_dir) or binds_dir.rstrip("/") in ccc_safefs.mount_points():
        return False
    flags = 2 | 4 | 8  # MS_NOSUID | MS_NODEV | MS_NOEXEC
    ccc_safefs.mount("ccc-pins", binds_dir, "tmpfs", flags, "mode=0711,size=4m")
    ccc_safefs.mount(None, binds_dir, flags=ccc_safefs.MS_PRIVATE)
    return True


def _open_source(pin):
    label = "/".join(pin["parts"]) or pin["root"]
    return ccc_safefs.walk(pin["root"], pin["parts"], label)


def identify(pins):
    """
    Check every pin source (no link followed) and return ``(set id, {name: (dev, ino)})``.

    Raises ``ccc_safefs.UnsafePath`` naming the first source that is a symlink or not a folder,
    ``FileNotFoundError`` for a missing one. Read-only: test mode uses it too.
    """
    identity, material = {}, []
    for pin in pins:
        fd = _open_source(pin)
        try:
            info = os.fstat(fd)
        finally:
            os.close(fd)
        identity[pin["name"]] = (info.st_dev, info.st_ino)
        material.append([pin["name"], pin["root"], pin["parts"], info.st_ino])
    digest = hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:PIN_SET_LENGTH]
    return digest, identity


def set_dir(binds_dir, stack, set_id):
    """Where the pin set ``set_id`` of ``stack`` lives."""
    return os.path.join(binds_dir, stack, set_id)


def _is_pinned(path, expected):
    try:
        info = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return (info.st_dev, info.st_ino) == expected


def ensure(binds_dir, stack, pins, set_id, identity):
    """
    Make the pin set ``set_id`` of ``stack``: every pin mounted from its checked source.

    Each source is opened again without following links and must still be the inode that
    ``identify`` saw; otherwise the user changed it in between and nothing is mounted.
    Returns the names that were (re)mounted.
    """
    ensure_tree(binds_dir)
    base = set_dir(binds_dir, stack, set_id)
    os.makedirs(base, mode=0o700, exist_ok=True)
    mounted = None  # read only when a pin is missing: a no-op apply stays O(1) per container
    made = []
    base_fd = ccc_safefs.open_root(base)
    try:
        for pin in pins:
            target = os.path.join(base, pin["name"])
            # The checked source's own inode at the target: it is mounted there (the target
            # folder itself lives on the pin tmpfs, never on a source's file system).
            if _is_pinned(target, identity[pin["name"]]):
                continue
            mounted = set(ccc_safefs.mount_points()) if mounted is None else mounted
            if target in mounted:
                ccc_safefs.unmount(target)
            _mount_pin(base, base_fd, pin, identity[pin["name"]])
            made.append(pin["name"])
    finally:
        os.close(base_fd)
    return made


def _mount_pin(base, base_fd, pin, expected):
    source_fd = _open_source(pin)
    try:
        info = os.fstat(source_fd)
        if (info.st_dev, info.st_ino) != expected:
            raise ccc_safefs.UnsafePath(0, f"{'/'.join(pin['parts'])} changed while it was being checked")
        target_fd, _ = ccc_safefs.ensure_dir_at(base_fd, pin["name"], 0o700, (0, 0))
        try:
            propagation = ccc_safefs.MS_SHARED if pin.get("shared") else ccc_safefs.MS_PRIVATE
            ccc_safefs.bind_fd(source_fd, target_fd, os.path.join(base, pin["name"]), propagation)
        finally:
            os.close(target_fd)
    finally:
        os.close(source_fd)


def release(binds_dir, stack, keep=()):
    """
    Unmount and remove the pin sets of ``stack`` except ``keep``; returns the removed set ids.

    Running containers keep their own copy of the mounts; only a later start of a container
    that still names a released set fails (on a missing source, never on a user path).
    """
    stack_dir = os.path.join(binds_dir, stack)
    try:
        sets = os.listdir(stack_dir)
    except FileNotFoundError:
        return []
    removed = []
    mounted = None  # read only when a set goes
    for set_id in sorted(sets):
        if set_id in keep:
            continue
        mounted = ccc_safefs.mount_points() if mounted is None else mounted
        base = os.path.join(stack_dir, set_id)
        for point in sorted((p for p in mounted if p.startswith(base + "/")), key=len, reverse=True):
            ccc_safefs.unmount(point)
        for name in os.listdir(base):
            os.rmdir(os.path.join(base, name))
        os.rmdir(base)
        removed.append(set_id)
    if not keep:
        try:
            os.rmdir(stack_dir)
        except OSError:
            pass
    return removed


def pinned_stacks(binds_dir):
    """STACK_NAMEs that have pin sets on this node."""
    try:
        return sorted(os.listdir(binds_dir))
    except FileNotFoundError:
        return []


# --------------------------------------------------------------------------------------------
# Live private data groups, inside a container's ``private`` pin


def private_pin(attrs):
    """The ``private`` pin of a container (the source of its ``/storage/private``), or None."""
    for mount in (attrs.get("HostConfig") or {}).get("Mounts") or []:
        if mount.get("Target") == "/storage/private":
            return mount.get("Source")
    return None


def reconcile_groups(private_dir, private_data, groups, owner, test=False, mounted=None):
    """
    Mount exactly ``groups`` (from ``<private_data>/<group>``) under one ``private`` pin.

    The mount point is created and opened under the pin's descriptor without following a link,
    and the mount is made onto that descriptor: a user's ``private/<group> -> /usr/sbin`` is
    refused, never mounted over. Returns ``{"mounted": [...], "unmounted": [...]}``.
    ``mounted``: the node's mount points when the caller has read them (one read for all pins).
    """
    prefix = os.path.join(private_dir, "")
    mounted = ccc_safefs.mount_points() if mounted is None else mounted
    present = {p[len(prefix):]: p for p in mounted if p.startswith(prefix) and "/" not in p[len(prefix):]}
    changes = {"mounted": [], "unmounted": [], "refused": []}
    for name, point in sorted(present.items()):
        if name not in groups:
            changes["unmounted"].append(point)
            if not test:
                ccc_safefs.unmount(point)
                _remove_empty_mount_point(private_dir, name)
    missing = [group for group in groups if group not in present]
    if not missing:
        return changes
    if test:
        changes["mounted"].extend(os.path.join(private_dir, group) for group in missing)
        return changes
    private_fd = os.open(private_dir, ccc_safefs.DIR_FLAGS)
    try:
        for group in missing:
            try:
                _mount_group(private_fd, private_dir, private_data, group, owner)
            except (ccc_safefs.UnsafePath, FileNotFoundError) as exc:
                changes["refused"].append(f"{os.path.join(private_dir, group)}: {exc.strerror or exc}")
                continue
            changes["mounted"].append(os.path.join(private_dir, group))
    finally:
        os.close(private_fd)
    return changes


def _mount_group(private_fd, private_dir, private_data, group, owner):
    source_fd = ccc_safefs.walk(private_data, [group])
    try:
        target_fd, _ = ccc_safefs.ensure_dir_at(private_fd, group, 0o755, owner, f"private/{group}")
        try:
            ccc_safefs.bind_fd(source_fd, target_fd, os.path.join(private_dir, group))
        finally:
            os.close(target_fd)
    finally:
        os.close(source_fd)


def _remove_empty_mount_point(private_dir, name):
    """rmdir the now empty mount point (relative to the pin: never through a link)."""
    fd = os.open(private_dir, ccc_safefs.DIR_FLAGS)
    try:
        os.rmdir(name, dir_fd=fd)
    except OSError:
        pass  # not empty or already gone: the user's business
    finally:
        os.close(fd)


def legacy_private_mounts(user_data):
    """Mounts an earlier version made under ``<user_data>/<email>/private/<group>`` (to undo)."""
    prefix = os.path.join(user_data, "")
    found = []
    for point in ccc_safefs.mount_points():
        parts = point[len(prefix):].split("/") if point.startswith(prefix) else []
        if len(parts) == 3 and parts[1] == "private":
            found.append(point)
    return found
