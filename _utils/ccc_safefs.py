"""
Root's only way to touch user-owned paths: descriptors opened without following links.

Users own their storage folders (``/storage/user`` is ``<user_data>/<email>``, read-write) and
may swap any entry in them for a symlink, FIFO or device node between two system calls root
makes. So nothing here takes a user path as a string: an admin-configured storage root is
opened once (it must exist: a missing root is an unmounted share, never created), and every
component below it is opened relative to its parent with ``O_NOFOLLOW``. Files are opened as
``O_PATH`` first and only re-opened for reading once ``fstat`` says they are regular files (so
a planted device node is never opened by root); writes go to a fresh ``O_EXCL`` name in a
checked directory descriptor and are renamed into place there. Mounts on user folders are made
and undone by descriptor too (``ccc_mountfd``), so the kernel mounts exactly the inode that was checked.

Plain Python, no Salt: the engine side (``ccc_apply``, ``ccc_pins``, ``ccc_userdirs``...) and the tests import it.
"""

import errno
import os
import secrets
import shutil
import stat

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(OSError):
    """A user path is not what it must be (a symlink, a FIFO, a device...): it is not used."""


def _component(name):
    if not name or "/" in name or name in (".", ".."):
        raise UnsafePath(errno.EINVAL, f"{name!r} is not a single path component")
    return name


def open_root(path):
    """Open an admin-configured root (a storage mount point); raises FileNotFoundError if missing."""
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def open_dir_at(dir_fd, name, label=None):
    """Open the directory ``name`` under ``dir_fd`` without following a symlink."""
    try:
        return os.open(_component(name), DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafePath(exc.errno, f"{label or name} is a symbolic link or not a folder") from None
        raise


def walk(root, parts, label=None):
    """Descriptor of ``root/parts[0]/...`` with no symlink followed below ``root``."""
    fd = open_root(root)
    try:
        for part in parts:
            child = open_dir_at(fd, part, label or "/".join(parts))
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def ensure_dir_at(dir_fd, name, mode, owner, label=None):
    """
    Make sure ``name`` is a directory under ``dir_fd``; return ``(fd, created)``.

    Owner and mode are set through the new directory's own descriptor, so a swap after
    ``mkdir`` can never make root chown or chmod something else.
    """
    created = False
    try:
        os.mkdir(_component(name), mode, dir_fd=dir_fd)
        created = True
    except FileExistsError:
        pass
    fd = open_dir_at(dir_fd, name, label)
    if created:
        own_new(fd, owner, mode)
    return fd, created


def own_new(fd, owner, mode):
    """Give what root just created (open as ``fd``) its ``owner`` and ``mode`` through that
    descriptor, never by path; ``fd`` is closed when that fails."""
    try:
        os.fchown(fd, *owner)
        os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular_at(dir_fd, name, max_bytes):
    """
    Open ``name`` for reading only if it is a regular file of at most ``max_bytes``.

    Returns a read descriptor, or None when nothing is there. The entry is first opened as
    ``O_PATH`` (which never triggers a device driver, never blocks on a FIFO), checked with
    ``fstat``, then re-opened through ``/proc/self/fd`` - the same inode, whatever the user
    renamed in between.
    """
    try:
        path_fd = os.open(_component(name), PATH_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    try:
        info = os.fstat(path_fd)
        if stat.S_ISLNK(info.st_mode):
            raise UnsafePath(errno.ELOOP, f"{name} is a symbolic link; it must be a regular file")
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePath(errno.EINVAL, f"{name} is not a regular file")
        if info.st_size > max_bytes:
            raise UnsafePath(errno.EFBIG, f"{name} is {info.st_size} bytes; the limit is {max_bytes} bytes")
        return os.open(f"/proc/self/fd/{path_fd}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    finally:
        os.close(path_fd)


def read_regular_at(dir_fd, name, max_bytes):
    """The bytes of a regular file ``name`` (None when missing); see ``open_regular_at``."""
    fd = open_regular_at(dir_fd, name, max_bytes)
    if fd is None:
        return None
    try:
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            raise UnsafePath(errno.EFBIG, f"{name} is over {max_bytes} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_file_at(dir_fd, name, data, mode, owner=None):
    """
    Replace ``name`` in ``dir_fd`` atomically with ``data``.

    A fresh unpredictable name is created with ``O_EXCL|O_NOFOLLOW`` (nothing planted in
    advance can be opened in its place), owned and moded through its descriptor, then renamed
    over ``name`` within the same checked directory: a symlink planted as ``name`` is replaced,
    never followed.
    """
    temporary = f".{_component(name)}.ccc-tmp-{os.getpid()}-{secrets.token_hex(8)}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                 dir_fd=dir_fd)
    try:
        try:
            _write_all(fd, data)
            if owner:
                os.fchown(fd, *owner)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        # A failed write (disk full, a file size limit) leaves neither a half file in place of
        # ``name`` nor the temporary name behind.
        os.unlink(temporary, dir_fd=dir_fd)
        raise


def _write_all(fd, data):
    """All of ``data`` to ``fd``: ``os.write`` may write less (a file size limit, a full disk
    met part way); what it cannot write raises."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def replace_file(path, data, mode, owner=None, root=None, folder_mode=0o700):
    """
    Replace a root-side file (state dir, node record, cache, move marker, ``/etc/fstab``, a
    modprobe file) atomically with ``write_file_at``: the one atomic writer. Missing folders are
    made (``folder_mode``) below ``root`` (default: the file's grandparent), never a missing
    ``root`` itself: that is a storage root that is not mounted.
    """
    directory = os.path.dirname(path)
    root = root or os.path.dirname(directory)
    if not os.path.isdir(root):
        raise FileNotFoundError(f"{root} does not exist on this node (storage not mounted?)")
    os.makedirs(directory, mode=folder_mode, exist_ok=True)
    fd = open_root(directory)
    try:
        write_file_at(fd, os.path.basename(path), data, mode, owner)
    finally:
        os.close(fd)


def read_text(path):
    """The text of a root-owned admin file (``replace_file``'s counterpart), ``None`` when missing."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def create_file_at(dir_fd, name, data, mode, owner):
    """Create ``name`` only if nothing (not even a dangling symlink) is there; True if written."""
    try:
        fd = os.open(_component(name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                     dir_fd=dir_fd)
    except FileExistsError:
        return False
    try:
        os.write(fd, data)
        os.fchown(fd, *owner)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    return True


def remove_at(dir_fd, name):
    """
    Remove ``name`` below ``dir_fd`` (a whole tree for a directory), never following a link.

    ``shutil.rmtree`` with ``dir_fd`` walks by descriptors and refuses symlinks at the top; a
    symlink or any other non-directory is just unlinked. Returns True if something was removed.
    """
    try:
        info = os.stat(_component(name), dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(name, dir_fd=dir_fd)
    else:
        os.unlink(name, dir_fd=dir_fd)
    return True


def fd_path(fd):
    """The ``/proc/self/fd`` name of a descriptor: the kernel resolves it to exactly that inode."""
    return f"/proc/self/fd/{fd}"
