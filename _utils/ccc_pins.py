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
  seen by the container through its ``rslave`` ``/storage/private``). That is the user's own
  folder, so every mount, propagation change and unmount there works on descriptors
  (``ccc_mountfd``), and a group mount is recognised by its mount id and root inode, never by the
  name it has now: a user who renames or swaps mount points can neither make root act on a host
  path nor keep a revoked group.

Plain Python: ``ccc_apply`` and ``ccc_private_mounts`` use it, the tests import it.
"""

import hashlib
import json
import os

import ccc_mountfd
import ccc_safefs

PIN_SET_LENGTH = 12



def ensure_tree(binds_dir):
    """Mount the pin tmpfs at ``binds_dir`` unless it is there (root only, no devices, no exec)."""
    os.makedirs(binds_dir, mode=0o700, exist_ok=True)
    # ismount first: reading every mount point of a busy node costs more than a pin set
    if os.path.ismount(binds_dir) or binds_dir.rstrip("/") in ccc_mountfd.mount_points():
        return False
    # By path: binds_dir is an admin-configured, root-only folder (no user can rename anything in it).
    flags = 2 | 4 | 8  # MS_NOSUID | MS_NODEV | MS_NOEXEC
    ccc_mountfd.mount("ccc-pins", binds_dir, "tmpfs", flags, "mode=0711,size=4m")
    ccc_mountfd.mount(None, binds_dir, flags=ccc_mountfd.MS_PRIVATE)
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


def _is_pinned(base_fd, name, expected):
    try:
        info = os.stat(name, dir_fd=base_fd, follow_symlinks=False)
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
    base_fd = ccc_safefs.open_root(base)
    try:
        # The checked source's own inode at the target: it is mounted there (the target
        # folder itself lives on the pin tmpfs, never on a source's file system).
        missing = [pin for pin in pins if not _is_pinned(base_fd, pin["name"], identity[pin["name"]])]
        for pin in missing:
            ccc_mountfd.unmount_all_at(base_fd, pin["name"])
        _mount_pins(base_fd, missing, identity)
    finally:
        os.close(base_fd)
    return [pin["name"] for pin in missing]


def _mount_pins(base_fd, pins, identity):
    """Mount ``pins`` into the set at ``base_fd``, each source opened again and still the inode
    ``identify`` saw (else nothing is mounted), all checked against one read of the mount table
    (``ccc_mountfd.bind_all``)."""
    if not pins:
        return
    opened, binds = [], []
    parent = ccc_mountfd.mount_id(base_fd)
    try:
        for pin in pins:
            source_fd = _open_source(pin)
            opened.append(source_fd)
            info = os.fstat(source_fd)
            if (info.st_dev, info.st_ino) != identity[pin["name"]]:
                raise ccc_safefs.UnsafePath(0, f"{'/'.join(pin['parts'])} changed while it was being checked")
            target_fd, _ = ccc_safefs.ensure_dir_at(base_fd, pin["name"], 0o700, (0, 0))
            opened.append(target_fd)
            propagation = ccc_mountfd.MS_SHARED if pin.get("shared") else ccc_mountfd.MS_PRIVATE
            binds.append((source_fd, target_fd, propagation, parent))
        ccc_mountfd.bind_all(binds)
    finally:
        for fd in opened:
            os.close(fd)


def release(binds_dir, stack, keep=()):
    """
    Unmount and remove the pin sets of ``stack`` except ``keep``; returns the removed set ids.

    Only the pins themselves are detached (by descriptor, on the root-only pin tmpfs); what is
    mounted inside them (live private groups, in the user's folder) goes with them, so no name
    inside a user's folder is ever resolved here. Running containers keep their own copy of the
    mounts; only a later start of a container that still names a released set fails (on a
    missing source, never on a user path).
    """
    stack_dir = os.path.join(binds_dir, stack)
    try:
        sets = os.listdir(stack_dir)
    except FileNotFoundError:
        return []
    removed = []
    for set_id in sorted(sets):
        if set_id in keep:
            continue
        base_fd = ccc_safefs.open_root(os.path.join(stack_dir, set_id))
        try:
            for name in os.listdir(base_fd):
                ccc_mountfd.unmount_all_at(base_fd, name)
                os.rmdir(name, dir_fd=base_fd)
        finally:
            os.close(base_fd)
        os.rmdir(os.path.join(stack_dir, set_id))
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
