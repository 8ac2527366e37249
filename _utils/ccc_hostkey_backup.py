"""
Backups of the shared SSH host key sets (``<store>/host-keys``, ``ccc_hostkeys.store``), for the sshd_hostkeys role.

Every container's SSH identity lives in that one shared folder; losing it (a wiped NFS share, a
mistaken ``rm``) would change every container's host key and make every user's ``ssh`` warn of a
man in the middle. Each node therefore keeps root-only tar copies in a local folder: one new tar
whenever the sets changed (the content digest is part of the file name, so an unchanged tree
costs one hash and no write), the newest ``keep`` kept. Plain Python, no Salt imports.
"""

import hashlib
import io
import os
import re
import tarfile
import time

import ccc_rules
import ccc_safefs

PREFIX = "host-keys-"
NAME = re.compile(r"^host-keys-(\d{8}T\d{6}Z)-([0-9a-f]{16})\.tar$")
MAX_FILE = 1 << 16


def _members(source):
    """``[(relative path, bytes)]`` of every key file below ``source``, sorted; in-progress
    sets (dot folders) are left out."""
    members = []
    for stack in sorted(os.listdir(source)):
        folder = os.path.join(source, stack)
        if stack.startswith(".") or os.path.islink(folder) or not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as handle:
                    members.append((f"{stack}/{name}", handle.read(MAX_FILE)))
    return members


def digest(members):
    """A short content digest of ``members`` (names and bytes)."""
    hasher = hashlib.sha256()
    for name, data in members:
        hasher.update(name.encode() + b"\0" + len(data).to_bytes(8, "big") + data)
    return hasher.hexdigest()[:16]


def backups(backup_dir):
    """Existing backups, oldest first: ``[(file name, digest)]``."""
    if not os.path.isdir(backup_dir):
        return []
    found = [(name, NAME.match(name)) for name in os.listdir(backup_dir)]
    return sorted((name, match.group(2)) for name, match in found if match)


def plan(source, backup_dir, keep):
    """
    What ``apply`` would do: ``{"sets": n, "digest": str, "write": file name or None,
    "prune": [file name]}``. ``write`` is None when the newest backup has the same content.
    """
    if not ccc_rules.is_whole(keep, 1):
        raise ValueError(f"ccc:sshd_hostkeys:keep must be a whole number >= 1, got {keep!r}")
    members = _members(source)
    current = digest(members)
    existing = backups(backup_dir)
    write = None
    if not existing or existing[-1][1] != current:
        write = f"{PREFIX}{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{current}.tar"
    names = [name for name, _ in existing] + ([write] if write else [])
    return {"sets": len({name.split("/")[0] for name, _ in members}), "digest": current,
            "write": write, "prune": names[:-keep] if len(names) > keep else [], "members": members}


def _tar_bytes(members):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o600, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def apply(steps, backup_dir):
    """Write the backup ``plan`` asked for (0600 in a 0700 folder, via a temporary name and a
    rename) and remove the pruned ones."""
    os.makedirs(backup_dir, mode=0o700, exist_ok=True)
    os.chmod(backup_dir, 0o700)
    if steps["write"]:
        ccc_safefs.replace_file(os.path.join(backup_dir, steps["write"]), _tar_bytes(steps["members"]), 0o600,
                                root=backup_dir)
    for name in steps["prune"]:
        os.unlink(os.path.join(backup_dir, name))
