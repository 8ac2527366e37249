"""
The node's record of the containers ccc-salt created, and what counts as managed.

A container is managed when it carries the managed-by label AND its id is in
``<ccc:node:state_dir>/managed-containers.json``. The label alone proves nothing: a container
inherits its image's labels and anyone with Docker access can set one. Whoever can write the
record (or its folder) decides what ccc-salt removes, so it must be root's and private; an
untrustworthy record stops everything (``CommandExecutionError``) instead of being guessed at.

Changes are made under an ``flock`` on ``<record>.lock`` and written atomically, so concurrent
creates (threads of one run, or two runs) never lose an id.
"""

import contextlib
import fcntl
import json
import logging
import os
import stat

from salt.exceptions import CommandExecutionError

import ccc_rules
import ccc_safefs

log = logging.getLogger(__name__)

RECORD_FILE = "managed-containers.json"
# In the record, beside the ids: the name of a container being created, until its id is recorded.
CREATING = "creating:"
# A recreate's names for the new and the old container while it swaps them (``ccc_swap``).
SWAP_SUFFIXES = (".ccc-new", ".ccc-old")


def swap_names(stack):
    """The names of a recreate's new and old container while it swaps them."""
    return tuple(stack + suffix for suffix in SWAP_SUFFIXES)


def name(attrs):
    """The container's name, from inspect data or a list summary."""
    return (attrs.get("Name") or (attrs.get("Names") or [""])[0]).lstrip("/")


def _path(client):
    state_dir = getattr(client, "ccc_state_dir", None)
    if not state_dir:
        raise CommandExecutionError("this Docker client has no node state dir (ccc_engine.client makes one): "
                                    "without the record of created containers none counts as managed")
    return os.path.join(state_dir, RECORD_FILE)


def _check_private(path, status):
    # Whoever can write the record (or its folder) decides what ccc-salt removes.
    if status.st_uid != os.geteuid() or status.st_mode & 0o022:
        raise CommandExecutionError(f"{path} must belong to uid {os.geteuid()} and be writable by nobody else; "
                                    "not trusting the record of ccc-salt's containers")


# The last parse of each record, by its exact content (read and checked as above every time): a
# run over 500 containers reads it twice per container, and parsing it each time made a no-op
# apply grow with the square of the containers.
_parsed = {}


def _read(path):
    """The recorded container ids, ``None`` when there is no record yet; raises when untrustworthy."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CommandExecutionError(f"cannot read {path}: {exc}") from exc
    with os.fdopen(fd, "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise CommandExecutionError(f"{path} is not a regular file")
        _check_private(path, status)
        _check_private(os.path.dirname(path), os.stat(os.path.dirname(path)))
        raw = handle.read()
        known = _parsed.get(path)
        if known is not None and known[0] == raw:
            return set(known[1])
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            data = None
    ids = data.get("containers") if isinstance(data, dict) else None
    if not isinstance(ids, list) or not all(isinstance(item, str) for item in ids):
        raise CommandExecutionError(f"{path} is not a record of container ids: repair it, or remove it to adopt "
                                    "the labelled containers again")
    _parsed[path] = (raw, frozenset(ids))
    return set(ids)


def _write(path, ids):
    ccc_safefs.replace_file(path, (json.dumps({"containers": sorted(ids)}, indent=1) + "\n").encode(), 0o600)


@contextlib.contextmanager
def _lock(path):
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    _check_private(directory, os.stat(directory))
    fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _load_or_adopt(client, path):
    """
    The recorded ids (lock held). Without a record (first run after an upgrade) the containers
    that carry the managed-by label now are adopted once, and logged: the earlier version kept
    no record. Even a test run writes it, so later runs never adopt again.
    """
    ids = _read(path)
    if ids is None:
        label = f"{ccc_rules.MANAGED_BY_LABEL}={ccc_rules.MANAGED_BY_VALUE}"
        found = client.api.containers(all=True, filters={"label": label})
        ids = {summary["Id"] for summary in found}
        _write(path, ids)
        # A fresh node has nothing to adopt; an upgraded one has, and the admin should know which.
        (log.warning if ids else log.info)(
            "no record of ccc-salt's containers at %s yet (new node or upgrade): adopted the %d labelled container(s) %s",
            path, len(ids), sorted(name(summary) for summary in found))
    return ids


def recorded_ids(client):
    """The ids (and names being created) of the containers this role created on this node."""
    path = _path(client)
    ids = _read(path)
    if ids is None:
        with _lock(path):
            ids = _load_or_adopt(client, path)
    return ids


def change(client, add=(), drop=()):
    """Add or drop container ids (locked, replaced atomically)."""
    path = _path(client)
    with _lock(path):
        ids = _load_or_adopt(client, path)
        updated = (ids | set(add)) - set(drop)
        if updated != ids:
            _write(path, updated)


def is_managed(client, attrs, recorded=None):
    """
    True when ccc-salt created this container: the managed-by label AND its id in the node's
    record. ``attrs``: inspect data or a list summary; ``recorded``: the ids when already read.
    The one definition everything that acts on containers uses. A container whose create was
    cut short before its id was recorded counts by its name, recorded before the create
    (``ccc_engine.create_recorded``), so the next apply can remove it.
    """
    found = attrs["Labels"] if "Labels" in attrs else (attrs.get("Config") or {}).get("Labels")
    if (found or {}).get(ccc_rules.MANAGED_BY_LABEL) != ccc_rules.MANAGED_BY_VALUE:
        return False
    recorded = recorded_ids(client) if recorded is None else recorded
    return attrs["Id"] in recorded or CREATING + name(attrs) in recorded


def managed_by_stack(client):
    """
    STACK_NAME -> the summaries of all its managed containers: the one named STACK_NAME first,
    then its ``.ccc-old`` (the container a half-done recreate rolls back to), then the rest.
    """
    found = {}
    recorded = recorded_ids(client)
    label_filter = f"{ccc_rules.MANAGED_BY_LABEL}={ccc_rules.MANAGED_BY_VALUE}"
    for summary in client.api.containers(all=True, filters={"label": label_filter}):
        stack = (summary.get("Labels") or {}).get(ccc_rules.STACK_LABEL)
        if stack and is_managed(client, summary, recorded):
            found.setdefault(stack, []).append(summary)
    for stack, summaries in found.items():
        old = swap_names(stack)[1]
        summaries.sort(key=lambda summary: (name(summary) != stack, name(summary) != old, name(summary)))
    return found


def managed_containers(client):
    """
    STACK_NAME -> container summary for every container ccc-salt manages on this engine. A stack
    is its container named exactly STACK_NAME: a leftover of an interrupted recreate stands for
    it only while there is none, so it never hides the real one, but orphans, clean and pin
    releases still see a stack that has only leftovers.
    """
    return {stack: found[0] for stack, found in managed_by_stack(client).items()}
