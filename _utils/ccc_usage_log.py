"""
The network usage log of the original CCC (its 12-hourly ``containers-collect-usage.yml``), kept
compatible for whoever reads those files: one line ``<now>:\\t<rx>\\t<tx>`` per collection appended to
``<user_data>/container-net-statistics/<STACK_NAME>-<node>.log``, ``<now>`` as Ansible's
``now()`` prints (``2024-05-01 12:00:00.123456``, local time), rx/tx the bytes of the
container's access network as the container counts them. And the ``ccc:usage`` pillar settings.

The folder sits on shared storage next to the users' folders and belongs to the NFS user (as
the original made it), so anyone with that identity may have swapped it or a log file for a
symlink, FIFO or device: the folder is opened without following links (``ccc_safefs``), a log
file is created ``O_EXCL|O_NOFOLLOW`` or else opened as ``O_PATH`` and checked to be a plain
file with one link before it is opened for appending. Plain Python, no Salt.
"""

import datetime
import errno
import os
import stat

import ccc_pillar
import ccc_rules
import ccc_safefs

FOLDER = "container-net-statistics"
DEFAULTS = {"accounting": True, "interval_hours": 12}


def settings(ccc):
    """``ccc:usage`` over ``DEFAULTS``, checked: ``ValueError`` names the bad key."""
    merged = ccc_pillar.deep_merge(DEFAULTS, (ccc or {}).get("usage"))
    unknown = sorted(set(merged) - set(DEFAULTS), key=str)
    if unknown:
        raise ValueError(f"ccc:usage: unknown keys {unknown} (known: {sorted(DEFAULTS)})")
    if not isinstance(merged["accounting"], bool):
        raise ValueError(f"ccc:usage:accounting must be true or false, got {merged['accounting']!r}")
    hours = merged["interval_hours"]
    if not ccc_rules.is_number(hours) or not 0 < hours <= 24 * 31:
        raise ValueError(f"ccc:usage:interval_hours must be a number of hours in (0, 744], got {hours!r}")
    return merged


def line(rx_bytes, tx_bytes, now=None):
    """One log line, as the original wrote it: ``<now()>:\\t<rx>\\t<tx>`` and a newline."""
    stamp = str(now if now is not None else datetime.datetime.now())
    return f"{stamp}:\t{int(rx_bytes)}\t{int(tx_bytes)}\n"


def log_name(stack, node):
    return f"{stack}-{node}.log"


def open_folder(user_data, owner):
    """
    A descriptor of ``<user_data>/container-net-statistics``, made (0755, ``owner``) if missing.
    ``user_data`` must exist (an unmounted share is never created); ``ccc_safefs.UnsafePath``
    when the folder is a symlink or not a folder.
    """
    root = ccc_safefs.open_root(user_data)
    try:
        fd, _ = ccc_safefs.ensure_dir_at(root, FOLDER, 0o755, owner, f"{user_data}/{FOLDER}")
    finally:
        os.close(root)
    return fd


def _open_existing(dir_fd, name):
    path_fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        info = os.fstat(path_fd)
        if stat.S_ISLNK(info.st_mode):
            raise ccc_safefs.UnsafePath(errno.ELOOP, f"{FOLDER}/{name} is a symbolic link; nothing written")
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise ccc_safefs.UnsafePath(errno.EINVAL, f"{FOLDER}/{name} is not a plain file; nothing written")
        return os.open(ccc_safefs.fd_path(path_fd), os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK | os.O_CLOEXEC)
    finally:
        os.close(path_fd)


def append(dir_fd, name, text, owner, mode=0o644):
    """Append ``text`` to the log ``name`` in the folder ``dir_fd`` (made ``owner``'s if new)."""
    try:
        fd = ccc_safefs.own_new(os.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                                        | os.O_CLOEXEC, mode, dir_fd=dir_fd), owner, mode)
    except FileExistsError:
        fd = _open_existing(dir_fd, name)
    try:
        os.write(fd, text.encode("ascii"))
    finally:
        os.close(fd)
