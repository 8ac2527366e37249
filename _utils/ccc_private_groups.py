"""
Live private data groups inside one container's ``private`` pin: which mounts are there, which
must go, which are missing, all decided by identity and done by descriptor.

The pin is the user's own ``private`` folder (``ccc_pins``), so every name below it is the
user's: a mount point can be renamed, moved deeper or swapped for a symlink between two of
root's calls. A group mount is therefore found by its mount id (a mount whose parent is the
pin), reached by walking to it without following links and checked to still have that id, and
kept only when it sits at ``<group>`` and its root is the inode of ``<private_data>/<group>``.
Everything else mounted on the pin goes, through ``ccc_mountfd``: a user who swaps names gets
a refusal or a remount, never a revoked group kept or a host path touched.

Plain Python: ``ccc_private_mounts`` uses it, the tests import it.
"""

import errno
import os

import ccc_mountfd
import ccc_safefs


def private_pin(attrs):
    """The ``private`` pin of a container (the source of its ``/storage/private``), or None;
    ``attrs``: inspect data (its configured mounts) or a list summary (its mount points)."""
    for mount in (attrs.get("HostConfig") or {}).get("Mounts") or []:
        if mount.get("Target") == "/storage/private":
            return mount.get("Source")
    for mount in attrs.get("Mounts") or []:
        if mount.get("Type") == "bind" and mount.get("Destination") == "/storage/private":
            return mount.get("Source")
    return None


def reconcile_groups(private_dir, private_data, groups, owner, test=False, children=None):
    """
    Mount exactly ``groups`` (from ``<private_data>/<group>``) under one ``private`` pin.

    Returns ``{"mounted": [...], "unmounted": [...], "refused": [...]}`` (paths below the pin;
    a refusal says why). ``children``: ``ccc_mountfd.children_of`` the mount table when the
    caller has read it (one read and one index for all pins). ``private_dir`` is the pin's
    root-only path on the pin tmpfs.
    """
    if children is None:
        children = ccc_mountfd.children_of(ccc_mountfd.mountinfo())
    changes = {"mounted": [], "unmounted": [], "refused": []}
    private_fd = os.open(private_dir, ccc_safefs.DIR_FLAGS)
    try:
        pin_id = ccc_mountfd.mount_id(private_fd)
        sources = {group: _identity_or_reason(private_data, group) for group in groups}
        kept = _undo_others(private_fd, private_dir, children.get(pin_id, []), sources, test, changes)
        for group in groups:
            point = os.path.join(private_dir, group)
            if group in kept:
                continue
            if isinstance(sources[group], str):
                changes["refused"].append(f"{point}: {sources[group]}")
            elif test:
                changes["mounted"].append(point)
            else:
                _try(changes, point, "mounted", _mount_group, private_fd, pin_id, private_data, group, sources[group],
                     owner)
    finally:
        os.close(private_fd)
    return changes


def _undo_others(private_fd, private_dir, on_pin, sources, test, changes):
    """Detach every mount on the pin (``on_pin``: the mounts right below it) that is not a
    granted group's source at its own name; returns the groups that are mounted right."""
    kept = set()
    prefix = os.path.join(private_dir, "")
    for child in sorted(on_pin, key=lambda m: m.point):
        relative = child.point[len(prefix):] if child.point.startswith(prefix) else None
        point = os.path.join(private_dir, relative or "?")
        try:
            fd = _open_mount(private_fd, relative, child.id)
        except (OSError, ValueError) as exc:
            changes["refused"].append(f"{point}: {_moved(exc)}")
            continue
        try:
            info = os.fstat(fd)
            if relative not in kept and sources.get(relative) == (info.st_dev, info.st_ino):
                kept.add(relative)
                continue
            changes["unmounted"].append(point)
            if not test:
                _try(changes, point, None, ccc_mountfd.unmount, fd, child.id)
                if "/" not in relative and relative not in sources:
                    _remove_empty(private_fd, relative)
        finally:
            os.close(fd)
    return kept


def _open_mount(private_fd, relative, expected_id):
    """O_PATH descriptor of the mount ``expected_id`` at ``relative`` below the pin, reached
    without following links; ``UnsafePath`` when something else is there now."""
    if not relative:
        raise ccc_safefs.UnsafePath(errno.EXDEV, "its mount point cannot be named below the pin")
    parts = relative.split("/")
    fd = os.dup(private_fd)
    try:
        for part in parts[:-1]:
            child = ccc_safefs.open_dir_at(fd, part, relative)
            os.close(fd)
            fd = child
        if parts[-1] in ("", ".", ".."):
            raise ccc_safefs.UnsafePath(errno.EINVAL, f"{relative!r} is not a mount point name")
        found = os.open(parts[-1], ccc_safefs.PATH_FLAGS, dir_fd=fd)
    finally:
        os.close(fd)
    if ccc_mountfd.mount_id(found) != expected_id:
        os.close(found)
        raise ccc_safefs.UnsafePath(errno.EXDEV, "a different mount is there now")
    return found


def _mount_group(private_fd, pin_id, private_data, group, expected, owner):
    source_fd = ccc_safefs.walk(private_data, [group])
    try:
        info = os.fstat(source_fd)
        if (info.st_dev, info.st_ino) != expected:
            raise ccc_safefs.UnsafePath(errno.EAGAIN, "the group folder changed while it was being checked")
        target_fd, _ = ccc_safefs.ensure_dir_at(private_fd, group, 0o755, owner, f"private/{group}")
        try:
            ccc_mountfd.bind(source_fd, target_fd, ccc_mountfd.MS_PRIVATE, parent=pin_id)
        finally:
            os.close(target_fd)
    finally:
        os.close(source_fd)


def _identity_or_reason(private_data, group):
    """``(st_dev, st_ino)`` of ``<private_data>/<group>`` (no link followed), or why not."""
    try:
        fd = ccc_safefs.walk(private_data, [group])
    except (ccc_safefs.UnsafePath, FileNotFoundError) as exc:
        return exc.strerror or str(exc)
    try:
        info = os.fstat(fd)
    finally:
        os.close(fd)
    return info.st_dev, info.st_ino


def _try(changes, point, key, action, *args):
    """Run one mount action; a swap found on the way is a refusal for this point only."""
    try:
        action(*args)
    except (ccc_safefs.UnsafePath, FileNotFoundError) as exc:
        changes["refused"].append(f"{point}: {_moved(exc)}")
        return
    if key:
        changes[key].append(point)


def _moved(exc):
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return f"{reason} (the user moved or replaced it; tried again at the next apply)"


def _remove_empty(private_fd, name):
    """rmdir the now empty mount point (relative to the pin: never through a link)."""
    try:
        os.rmdir(name, dir_fd=private_fd)
    except OSError:
        pass  # not empty, not a folder or already gone: the user's business


def legacy_private_mounts(user_data, mounts=None):
    """Mounts an earlier version made under ``<user_data>/<email>/private/<group>`` (to undo),
    as ``ccc_mountfd.Mount`` records."""
    prefix = os.path.join(user_data, "")
    found = []
    for record in ccc_mountfd.mountinfo() if mounts is None else mounts:
        parts = record.point[len(prefix):].split("/") if record.point.startswith(prefix) else []
        if len(parts) == 3 and parts[1] == "private":
            found.append(record)
    return found
