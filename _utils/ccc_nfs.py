"""
The NFS rules of the nfs_storage role and of the containers' storage check. Pure: pillar values
and ``/proc/self/mountinfo`` text in, plain data out.

* ``check``: ``ccc:nfs_storage`` against ``ccc:cluster:mount_points:nfs``: each shared mount's
  source (``server:/export``), type and options (``fsc`` added when the cachefilesd role is on).
* ``fstab_line``/``fstab_update``: the mount's ``/etc/fstab`` entry, replacing any other entry
  for the same mount point.
* ``parse_mountinfo``/``mount_at``/``options_missing``: what the kernel has mounted, and whether
  it matches what pillar asks.
* ``required_points``/``storage_fact``/``missing_for``: the containers role refuses user data on
  a node whose NFS mount points are plain directories (a home made on the local disk by mistake
  is lost or forked later). Active only with ``ccc:cluster:mount_points:nfs_required``.
"""

import os
import re

import ccc_role_schema

# Pillar value -> what /proc/self/mountinfo may show for it: a plain "nfs" mount negotiates its
# version, and the kernel reports version 4 mounts as nfs4.
KINDS = {"nfs": ("nfs", "nfs4"), "nfs4": ("nfs4",)}
# fstab/mount options the kernel never reports back (mount(8) or the boot sequence consume them).
UNSHOWN = {"auto", "noauto", "_netdev", "nofail", "defaults", "async", "user", "nouser", "users", "bg", "fg",
           "exec", "suid", "dev", "owner", "group"}
UNSHOWN_PREFIXES = ("x-", "retry=", "comment=", "mountvers=", "mountport=", "mountproto=")
ALIASES = {"nfsvers": "vers"}
SOURCE = re.compile(r"^(?P<server>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<export>/[^\s,]*)$")
NFS_PORT = 2049


def _option_list(value):
    """Mount options the schema let through (a list, or a comma-separated string) as a list."""
    if isinstance(value, str):
        return [part for part in value.split(",") if part]
    return list(value or [])


def check(settings, cluster, schema, cachefilesd_on=False):
    """
    The shared mounts ``settings`` (``ccc:nfs_storage`` over its defaults) asks for, checked by
    the role's ``schema`` and against ``ccc:cluster:mount_points:nfs``: ``(mounts, problems)``;
    each mount is ``{key, path, source, server, fstype, options}`` with ``path`` from
    ``ccc:cluster:mount_points:nfs:<key>``. Nothing is mounted while problems exist.
    """
    problems = ccc_role_schema.problems("nfs_storage", settings, schema)
    if problems:
        return [], problems
    points = (cluster.get("mount_points") or {}).get("nfs") or {}
    mounts = []
    default_options = _option_list(settings.get("options"))
    for key, entry in sorted((settings.get("mounts") or {}).items()):
        if key not in points:
            problems.append(f"ccc:nfs_storage:mounts:{key}: no such key in ccc:cluster:mount_points:nfs "
                            f"({', '.join(sorted(points))})")
            continue
        entry = {"source": entry} if isinstance(entry, str) else entry
        match = SOURCE.match(entry["source"])
        if not match:
            problems.append(f"ccc:nfs_storage:mounts:{key}:source must be server:/export, got {entry['source']!r}")
            continue
        fstype = entry.get("fstype") or settings.get("fstype") or "nfs"
        options = _option_list(entry["options"]) if "options" in entry else list(default_options)
        if cachefilesd_on and "fsc" not in options:
            options.append("fsc")
        mounts.append({"key": key, "path": os.path.normpath(points[key]), "source": entry["source"],
                       "server": match.group("server").strip("[]"), "fstype": fstype,
                       "options": options or ["defaults"]})
    return ([] if problems else mounts), problems


# --------------------------------------------------------------------------------------------
# /etc/fstab


def _escape(field):
    return field.replace("\\", "\\134").replace(" ", "\\040").replace("\t", "\\011")


def fstab_line(mount):
    """The fstab entry of one checked mount (dump 0, pass 0: an NFS share is never fsck'ed)."""
    return f"{_escape(mount['source'])} {_escape(mount['path'])} {mount['fstype']} {','.join(mount['options'])} 0 0"


def _fstab_target(line):
    fields = line.split()
    if len(fields) < 2 or fields[0].startswith("#"):
        return None
    return os.path.normpath(_unescape(fields[1]))


def fstab_update(text, mount):
    """
    ``(new text, old entries)``: ``text`` with exactly one entry for ``mount['path']``, the
    checked one, in place of the first existing entry (others for that path are dropped);
    appended when there was none. ``new text == text`` when nothing changes.
    """
    wanted, lines, old, placed = fstab_line(mount), text.splitlines(), [], False
    out = []
    for line in lines:
        if _fstab_target(line) != mount["path"]:
            out.append(line)
            continue
        old.append(line)
        if not placed:
            out.append(wanted)
            placed = True
    if not placed:
        out.append(wanted)
    return "\n".join(out) + "\n", old


# --------------------------------------------------------------------------------------------
# /proc/self/mountinfo


def _unescape(field):
    """mountinfo and fstab write space, tab, newline and backslash as octal escapes (\\040)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text):
    """
    Every mount of ``text`` (``/proc/self/mountinfo``), in order:
    ``{mount_point, fstype, source, options}``; ``options`` is the union of the per-mount and
    the file system's options (``rw``, ``vers=4.2``, ``fsc``...). Lines that do not parse are skipped.
    """
    mounts = []
    for line in text.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 6 or len(rest) < 2:
            continue
        options = set(fields[5].split(",")) | (set(rest[2].split(",")) if len(rest) > 2 else set())
        mounts.append({"mount_point": _unescape(fields[4]), "fstype": rest[0], "source": _unescape(rest[1]),
                       "options": options})
    return mounts


def mount_at(mounts, path):
    """The mount visible at ``path`` (the last one mounted there), or None when it is no mount point."""
    path = os.path.normpath(path)
    found = None
    for mount in mounts:
        if mount["mount_point"] == path:
            found = mount
    return found


def mount_of(mounts, path):
    """The mount that holds ``path``: the longest mount point at or above it (the last one there)."""
    path, found = os.path.normpath(path), None
    for mount in mounts:
        point = mount["mount_point"]
        if path == point or path.startswith(point.rstrip("/") + "/"):
            if found is None or len(point) >= len(found["mount_point"]):
                found = mount
    return found


def options_missing(wanted, shown):
    """The ``wanted`` options the kernel's ``shown`` options lack (those it never shows are skipped)."""
    missing = []
    for option in wanted:
        key = option.split("=", 1)[0]
        if option in UNSHOWN or option.startswith(UNSHOWN_PREFIXES):
            continue
        option = ALIASES.get(key, key) + option[len(key):]
        if option == "vers=4" and any(o.startswith("vers=4") for o in shown):
            continue  # vers=4 negotiates a minor version: the kernel shows vers=4.2
        if option not in shown:
            missing.append(option)
    return missing


def is_kind(mount, fstype):
    """True when the kernel's ``mount`` is of the pillar type ``fstype``."""
    return mount is not None and mount["fstype"] in KINDS.get(fstype, (fstype,))


# --------------------------------------------------------------------------------------------
# the containers' check


def required_points(ccc, cluster):
    """
    ``{path: pillar fstype}`` of the NFS mount points the containers role insists on, or ``{}``
    when ``ccc:cluster:mount_points:nfs_required`` is off (the default: plain folders, as in
    the quickstart). The type is ``ccc:nfs_storage:mounts:<key>:fstype`` (or ``ccc:nfs_storage:fstype``),
    ``nfs`` when neither says.
    """
    points = cluster.get("mount_points") or {}
    if points.get("nfs_required") is not True:
        return {}
    settings = (ccc or {}).get("nfs_storage") or {}
    entries = settings.get("mounts") if isinstance(settings.get("mounts"), dict) else {}
    required = {}
    for key, path in (points.get("nfs") or {}).items():
        entry = entries.get(key) if isinstance(entries.get(key), dict) else {}
        required[os.path.normpath(path)] = entry.get("fstype", settings.get("fstype", "nfs"))
    return required


def storage_fact(required, mounts):
    """``{path: why}`` for each required mount point that does not lie on an NFS mount of its type now."""
    missing = {}
    for path, fstype in required.items():
        mount = mount_of(mounts, path)
        if not is_kind(mount, fstype):
            on = f"on {mount['fstype']} {mount['mount_point']}" if mount else "on no mount"
            missing[path] = f"{path} is not on its {fstype} share ({on}: the node's own disk, the share is not mounted)"
    return missing


def paths_used(resolution):
    """Every host path a ``run`` resolution creates or binds."""
    used = [entry["root"] for entry in resolution.get("directories") or []]
    for mount in (resolution.get("spec") or {}).get("mounts") or []:
        used.append(mount["pin"]["root"] if mount.get("pin") else mount["source"])
    return used


def missing_for(missing, used):
    """The reasons of ``missing`` (``storage_fact``) that concern a path in ``used``, sorted."""
    reasons = set()
    for path in used:
        path = os.path.normpath(path)
        for point, why in missing.items():
            if path == point or path.startswith(point.rstrip("/") + "/"):
                reasons.add(why)
    return sorted(reasons)
