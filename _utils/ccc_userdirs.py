"""
The user's folders as root touches them: create, report, default settings file, purge.

Every user path is reached from its admin-configured storage root through descriptors opened
without following links (``ccc_safefs``): a user may swap anything in their folders at any
moment, so nothing here checks a path and then uses it again by name. A missing storage root
is reported, never created (it is an unmounted share: creating it would put user data on the
node's local disk).

A path is given as ``{"root": <storage root>, "parts": [components below it]}``; ``parts == []``
names an admin-side folder (such as the admin log folder), created with its parents.
Plain Python, used by ``ccc_apply`` and ``ccc_feedback``.
"""

import os

import ccc_safefs

REPORT_MAX_BYTES = 1 << 20



def display(entry):
    """The path an entry names, for people."""
    return os.path.join(entry["root"], *entry["parts"])


def _open_parent(entry):
    try:
        return ccc_safefs.walk(entry["root"], entry["parts"][:-1], "/".join(entry["parts"][:-1]))
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{display(entry)}: its storage root or parent folder is missing on this node (storage not mounted?)"
        ) from None


def ensure_directories(directories):
    """
    Create missing folders with their owner and mode (set through the new folder's descriptor);
    existing ones are left as they are. Returns the created paths.

    Raises ``FileNotFoundError`` for a missing root and ``ccc_safefs.UnsafePath`` when a
    component is a symlink or not a folder.
    """
    created = []
    for entry in directories:
        if not entry["parts"]:
            if not os.path.isdir(entry["root"]):
                os.makedirs(entry["root"], mode=entry["mode"], exist_ok=True)
                created.append(entry["root"])
            continue
        parent = _open_parent(entry)
        try:
            fd, made = ccc_safefs.ensure_dir_at(parent, entry["parts"][-1], entry["mode"], tuple(entry["owner"]),
                                                "/".join(entry["parts"]))
            os.close(fd)
        finally:
            os.close(parent)
        if made:
            created.append(display(entry))
    return created


def open_folder(entry):
    """Descriptor of an existing user folder (None when missing); never through a symlink."""
    try:
        return ccc_safefs.walk(entry["root"], entry["parts"], "/".join(entry["parts"]))
    except FileNotFoundError:
        return None


def read_report(folder_fd, name):
    """The text of an existing report (None if missing or not a regular file)."""
    try:
        data = ccc_safefs.read_regular_at(folder_fd, name, REPORT_MAX_BYTES)
    except OSError:
        return None
    try:
        return None if data is None else data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def write_report(folder, name, text, owner, unchanged=None):
    """
    Replace the report ``name`` in the user folder ``folder`` unless ``unchanged(existing)``
    says the existing text is good enough. Returns True when written.
    """
    fd = open_folder(folder)
    if fd is None:
        return False
    try:
        if unchanged is not None:
            existing = read_report(fd, name)
            if existing is not None and unchanged(existing):
                return False
        ccc_safefs.write_file_at(fd, name, text.encode("utf-8"), 0o644, owner)
        return True
    finally:
        os.close(fd)


def create_file(folder, name, text, owner):
    """Create ``name`` in a user folder only if nothing is there yet. True if written."""
    fd = open_folder(folder)
    if fd is None:
        return False
    try:
        return ccc_safefs.create_file_at(fd, name, text.encode("utf-8"), 0o644, owner)
    finally:
        os.close(fd)


def _parents(entries):
    """Yield ``(entry, parent descriptor)`` for each entry whose parent can be walked to safely."""
    for entry in entries:
        try:
            parent = _open_parent(entry)
        except (FileNotFoundError, ccc_safefs.UnsafePath):
            continue
        try:
            yield entry, parent
        finally:
            os.close(parent)


def existing(entries):
    """The entries that exist (as anything, links included), for reports of a purge."""
    found = []
    for entry, parent in _parents(entries):
        try:
            os.stat(entry["parts"][-1], dir_fd=parent, follow_symlinks=False)
            found.append(entry)
        except FileNotFoundError:
            pass
    return found


def remove(entries):
    """Remove each entry (trees included) by descriptor; a link is removed, never followed."""
    return [display(entry) for entry, parent in _parents(entries) if ccc_safefs.remove_at(parent, entry["parts"][-1])]


def changed_at(folder, name):
    """When ``name`` in a user folder was last changed (None when missing); never followed. The
    ctime, which the kernel (the NFS server) sets on every change: the mtime is the user's
    (``touch -d 2100-01-01``)."""
    fd = open_folder(folder)
    if fd is None:
        return None
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False).st_ctime
    except FileNotFoundError:
        return None
    finally:
        os.close(fd)
