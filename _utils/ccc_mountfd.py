"""
Mount operations that never resolve a name a user can swap: binds, propagation and unmounts
work on descriptors, and what they did is checked by identity (mount id, parent mount, root inode).

A mount call given a path looks the path up again. When the path passes through a user's folder
(a live private group lives at ``<pin>/private/<group>``, in the user's own ``private`` folder),
the user can rename the mount point and leave a symlink between two of root's calls: a bind
followed by ``mount(None, path, MS_PRIVATE)`` then changes the propagation of whatever the user
pointed at (``/``), and an unmount by name detaches a mount the user chose. So:

* a bind is built with the new mount API: ``open_tree`` clones the checked source descriptor
  into a detached mount nobody else can see, ``mount_setattr`` gives it its propagation there,
  and ``move_mount`` attaches it onto the checked target descriptor. No step takes a path.
  Afterwards the new mount is looked up by its id: its parent must be the mount the target
  folder is in, its root the source inode, and it has no peer or master in this namespace;
  otherwise it is detached again and ``UnsafePath`` raised.
* an unmount goes through ``/proc/self/fd/N`` of a descriptor whose mount id was checked: the
  magic link resolves to exactly that mount, whatever the user renames (``UMOUNT_NOFOLLOW``
  cannot be used there: it stops at the magic link itself and the kernel answers EINVAL).

The new mount API needs Linux 5.12 (``mount_setattr``); older kernels get ``MountApiMissing``
with the reason, never the by-name fallback. Plain Python: ``ccc_pins`` and the tests import it.
"""

import collections
import ctypes
import errno
import os
import platform
import re

import ccc_safefs

MS_PRIVATE = 1 << 18
MS_SHARED = 1 << 20
MNT_DETACH = 2

# The mount API syscalls come after the point (424) where every architecture shares one table.
_SYSCALLS = {"open_tree": 428, "move_mount": 429, "mount_setattr": 442}
_ARCHES = ("x86_64", "aarch64")
_OPEN_TREE_CLONE = 1
_AT_EMPTY_PATH = 0x1000
_MOVE_MOUNT_F_EMPTY_PATH = 0x4
_MOVE_MOUNT_T_EMPTY_PATH = 0x40

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p)
_libc.umount2.argtypes = (ctypes.c_char_p, ctypes.c_int)


class MountApiMissing(OSError):
    """This kernel or architecture has no ``open_tree``/``move_mount``/``mount_setattr``."""


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


Mount = collections.namedtuple("Mount", "id parent root point shared master")


def _syscall(name, *args):
    if platform.machine() not in _ARCHES:
        raise MountApiMissing(errno.ENOSYS, f"mounting user folders safely needs the new mount API; its system "
                                            f"call numbers are known here for {', '.join(_ARCHES)}, not "
                                            f"{platform.machine()}")
    result = _libc.syscall(ctypes.c_long(_SYSCALLS[name]), *args)
    if result < 0:
        code = ctypes.get_errno()
        if code == errno.ENOSYS:
            raise MountApiMissing(code, f"this kernel ({platform.release()}) has no {name}(2): mounting user folders "
                                        "safely needs Linux 5.12 or newer (open_tree, move_mount, mount_setattr)")
        raise OSError(code, f"{name}: {os.strerror(code)}")
    return result


def mount_id(fd):
    """The id of the mount a descriptor is on (``/proc/self/fdinfo``; the ids of ``mountinfo``)."""
    with open(f"/proc/self/fdinfo/{fd}", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("mnt_id:"):
                return int(line.split()[1])
    raise OSError(errno.EINVAL, f"no mount id for descriptor {fd}")


def mountinfo():
    """Every mount of this namespace as ``Mount`` records (``/proc/self/mountinfo``)."""
    return [_record(line) for line in _table().splitlines()]


def _table():
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as handle:
        return handle.read()


def _lines_at(table, pattern):
    """The records of the table's lines where ``pattern`` is found (each line once): only
    those are parsed, where a node with 500 containers has thousands of mounts."""
    starts = {}
    for found in re.finditer(pattern, table, re.MULTILINE):
        begin = table.rfind("\n", 0, found.start()) + 1
        if begin not in starts:
            close = table.find("\n", found.end())
            starts[begin] = _record(table[begin:close if close >= 0 else len(table)])
    return list(starts.values())


def _record(line):
    fields = line.split()
    tags = dict(tag.split(":", 1) for tag in fields[6:fields.index("-")] if ":" in tag)
    return Mount(int(fields[0]), int(fields[1]), _unescape(fields[3]), _unescape(fields[4]),
                 tags.get("shared"), tags.get("master"))


def children_of(mounts):
    """Mount id -> the mounts right below it, from one read of the table (``mountinfo``): a
    lookup per pin, where a scan of the whole table per pin was pins × mounts."""
    index = {}
    for record in mounts:
        index.setdefault(record.parent, []).append(record)
    return index


def mount_points():
    """Every mount point of this mount namespace."""
    return [record.point for record in mountinfo()]


def _unescape(field):
    # mountinfo escapes space, tab, newline and backslash as octal (\040 ...).
    if "\\" not in field:
        return field
    out, index = [], 0
    while index < len(field):
        if field[index] == "\\" and field[index + 1:index + 4].isdigit():
            out.append(chr(int(field[index + 1:index + 4], 8)))
            index += 4
        else:
            out.append(field[index])
            index += 1
    return "".join(out)


def mount(source, target, fstype=None, flags=0, data=None):
    """mount(2) by path, for root-only admin paths (the pin tmpfs); never for a user's folder."""
    result = _libc.mount(
        source.encode() if source else None, target.encode(), fstype.encode() if fstype else None, flags,
        ctypes.c_char_p(data.encode()) if data else None,
    )
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"mount {source or ''} on {target}: {os.strerror(code)}")


def _set_propagation(tree_fd, propagation):
    attr = _MountAttr(0, 0, propagation, 0)
    _syscall("mount_setattr", ctypes.c_int(tree_fd), b"", ctypes.c_uint(_AT_EMPTY_PATH), ctypes.byref(attr),
             ctypes.c_size_t(ctypes.sizeof(attr)))


def bind(source_fd, target_fd, propagation=MS_PRIVATE, parent=None):
    """
    Bind-mount the directory of ``source_fd`` onto the directory of ``target_fd``; returns the
    new mount's id.

    ``parent``: the mount the target folder must be directly in (checked before and after).
    The propagation is set while the mount is detached, so it never joins the source's peer
    group, and it is never set by name. ``MS_SHARED`` gets a peer group of its own; under a
    shared parent the kernel gives a private one a group of its own too (its copies in the
    parent's slaves, a container's ``rslave`` mount, follow it).
    """
    return bind_all([(source_fd, target_fd, propagation, parent)])[0]


def bind_all(binds):
    """
    ``bind`` for several ``(source_fd, target_fd, propagation, parent)``: each is attached in
    turn, then every one is checked against one read of the mount table (a node with 500
    containers has thousands of mounts, and each read costs the kernel milliseconds; a
    container's pins are seven binds). A mount that fails its check is detached again, and the
    first problem raised once every mount made was checked (one that passed stays); when an
    attach fails, the ones made before it are checked the same way first. Returns the new ids.
    """
    attached, tree_fds = [], []
    try:
        try:
            for source_fd, target_fd, propagation, parent in binds:
                attached.append(_attach(source_fd, target_fd, propagation, parent, tree_fds))
        finally:
            problems = _check_attached(attached)
        if problems:
            raise ccc_safefs.UnsafePath(errno.EXDEV, problems[0])
        return [made["id"] for made in attached]
    finally:
        for fd in tree_fds:
            os.close(fd)


def _attach(source_fd, target_fd, propagation, parent, tree_fds):
    """Clone ``source_fd`` into a detached mount, give it ``propagation`` and attach it onto
    ``target_fd`` (its tree descriptor goes to ``tree_fds``); returns what the check needs."""
    expected = os.fstat(source_fd)
    here = mount_id(target_fd)
    if parent is not None and here != parent:
        raise ccc_safefs.UnsafePath(errno.EXDEV, "something else is mounted on the mount point")
    flags = _OPEN_TREE_CLONE | _AT_EMPTY_PATH | os.O_CLOEXEC
    tree_fd = _syscall("open_tree", ctypes.c_int(source_fd), b"", ctypes.c_uint(flags))
    tree_fds.append(tree_fd)
    _set_propagation(tree_fd, MS_PRIVATE)
    if propagation == MS_SHARED:
        _set_propagation(tree_fd, MS_SHARED)
    _syscall("move_mount", ctypes.c_int(tree_fd), b"", ctypes.c_int(target_fd), b"",
             ctypes.c_uint(_MOVE_MOUNT_F_EMPTY_PATH | _MOVE_MOUNT_T_EMPTY_PATH))
    return {"tree_fd": tree_fd, "id": mount_id(tree_fd), "parent": here, "expected": expected,
            "root": os.fstat(tree_fd), "propagation": propagation}


def _check_attached(attached):
    """The problems of mounts ``_attach`` made (each bad one detached again), from one table."""
    if not attached:
        return []
    table, problems = _table(), []
    for made in attached:
        problem = _bind_problem(made["id"], made["parent"], made["expected"], made["root"], made["propagation"], table)
        if problem:
            unmount(made["tree_fd"], made["id"])
            problems.append(problem)
    return problems


def _bind_problem(new, parent, expected, root, propagation, table=None):
    """What is wrong with the mount ``bind`` just made, judged by identity (None when right);
    ``table``: the mount table as read after it was made."""
    table = _table() if table is None else table
    record = next(iter(_lines_at(table, rf"^{int(new)} ")), None)
    if record is None or record.parent != parent:
        return "the new mount is not where its mount point was opened"
    if (root.st_dev, root.st_ino) != (expected.st_dev, expected.st_ino):
        return "the new mount is not the folder that was checked"
    # A tag is a field of its own (names in the table escape their spaces): the lines that
    # carry it, each parsed to be sure it is the optional field and not a source's name.
    sharing = _lines_at(table, rf" shared:{re.escape(record.shared)}(?=[ \n]|\Z)") if record.shared else []
    peers = [r.id for r in sharing if r.shared == record.shared and r.id != new]
    if record.master or peers or (propagation == MS_SHARED and not record.shared):
        return f"the new mount's propagation is not its own (peers {peers}, master {record.master})"
    return None


def unmount(fd, expected_id):
    """
    Detach (lazily, with everything mounted below it) the mount whose root ``fd`` is, provided
    its id is ``expected_id``. Raises ``UnsafePath`` when ``fd`` is on another mount or is not
    the root of its mount (a folder the user moved into the place that was checked).
    """
    if mount_id(fd) != expected_id:
        raise ccc_safefs.UnsafePath(errno.EXDEV, "a different mount is there now")
    if _libc.umount2(ccc_safefs.fd_path(fd).encode(), MNT_DETACH) != 0:
        code = ctypes.get_errno()
        if code == errno.EINVAL:
            raise ccc_safefs.UnsafePath(code, "what is there now is not the mount that was checked")
        raise OSError(code, f"umount: {os.strerror(code)}")


def child_mount(dir_fd, name):
    """``(O_PATH descriptor, mount id)`` of ``name`` under ``dir_fd`` when something is mounted
    on it (no link followed), else None."""
    try:
        fd = os.open(name, ccc_safefs.PATH_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    child = mount_id(fd)
    if child == mount_id(dir_fd):
        os.close(fd)
        return None
    return fd, child


def unmount_all_at(dir_fd, name):
    """Detach everything mounted on ``name`` under ``dir_fd`` (a root-only folder), by descriptor."""
    while True:
        found = child_mount(dir_fd, name)
        if found is None:
            return
        fd, child = found
        try:
            unmount(fd, child)
        finally:
            os.close(fd)
