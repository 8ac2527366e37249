"""
What the inventory pillar serves, kept on the master: ``<cachedir>/ccc-inventory/state.json``
(root's, 0600: it holds the users' records). Written only by ``salt-run ccc_inventory.refresh``
and only when it changes; read by the external pillar on every compile and by the pillar watch,
whose fingerprint covers this folder (``ccc_pillar_watch.watched_roots``), so a new revision
reaches the nodes like an edit of a pillar file.

Keys: ``revision`` (the commit last examined), ``site`` (the site pillar's fingerprint it was
checked against), ``served`` (``{"users", "containers"}``, of ``loaded_revision``, the last
revision that loaded), ``last_good`` (per entry: record and revision) and ``report``.
"""

import contextlib
import fcntl
import json
import os

import ccc_safefs

FOLDER = "ccc-inventory"
STATE = "state.json"


def folder(cachedir):
    return os.path.join(cachedir, FOLDER)


def read(cachedir):
    """The stored state, ``{}`` when there is none yet (or it does not parse)."""
    try:
        with open(os.path.join(folder(cachedir), STATE), encoding="utf-8") as handle:
            state = json.load(handle)
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def write(cachedir, state):
    """Replace the state (atomically) when it differs; returns whether it was written."""
    if read(cachedir) == state:
        return False
    os.makedirs(cachedir, mode=0o700, exist_ok=True)
    text = json.dumps(state, sort_keys=True, default=str)  # default: a YAML date the checks let through
    ccc_safefs.replace_file(os.path.join(folder(cachedir), STATE), text.encode("utf-8"), 0o600, root=cachedir)
    return True


@contextlib.contextmanager
def locked(cachedir):
    """One refresh at a time (the schedule and an admin's salt-run may overlap)."""
    directory = folder(cachedir)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    with open(os.path.join(directory, ".lock"), "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
