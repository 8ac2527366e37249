"""
Where a settings edit of a stack goes, kept on disk by the master's pillar watch, so that
``ccc.redeploy`` reads one small file per edit instead of every minion's pillar: its work per
edit then does not grow with the number of minions or stacks (bench/runner_scale.py).

The rule is ``ccc_redeploy.targets_for`` (a minion is a target when its node name is among the
stack's allowed nodes in its own pillar) and ``ccc_redeploy.user_for`` (the USER_EMAIL its first
target's pillar gives); ``summary`` applies it to one minion's pillar in one pass. The pillar
watch compiles a minion's pillar whenever its files may have changed it (and every minion whose
key was accepted since), and ``write`` folds those summaries in.

Layout under ``<cachedir>/ccc-redeploy/index/``: ``minions/<id>.json`` (a minion's summary,
``{stack: user}``), ``targets/<stack>.json`` (``{minion: user}``: what the watch folds changes
into), ``stacks/<stack>.json`` (``{"minions": [...], "user": ...}``: what a redeploy reads,
worked out when written) and ``state.json``
(``version``, ``complete``, ``keys``: the stamp of the accepted-keys folder when it was written).
A reader trusts the index only when it is complete, of this version, the set of accepted keys
has not changed since (one ``stat``) and it knows the stack; on any doubt ``lookup`` answers
``None`` and the caller computes from the pillar cache as before. A write marks the index
incomplete first and complete last, so a crash half-way leaves it distrusted (and the next watch
rebuilds it), never half-right.
"""

import collections
import contextlib
import fcntl
import json
import os
import shutil
import time

import ccc_pillar
import ccc_rules
import ccc_safefs

VERSION = 1
FOLDERS = ("minions", "targets", "stacks")
# A key folder changed this recently (ns) may change again within the same timestamp tick:
# its stamp is not recorded (readers fall back until the next watch).
RACY_NS = 2_000_000_000


def folder(cachedir):
    """The index folder under the master's cachedir."""
    return os.path.join(cachedir, "ccc-redeploy", "index")


def keys_stamp(pki_dir, now_ns=None):
    """A stamp of the accepted minion keys (``<pki_dir>/minions``: changes when a key is accepted
    or deleted); ``None`` when it cannot be read or changed too recently to be told apart."""
    try:
        stat = os.stat(os.path.join(pki_dir, "minions"))
    except (OSError, TypeError):
        return None
    now_ns = time.time_ns() if now_ns is None else now_ns
    if now_ns - stat.st_mtime_ns < RACY_NS:
        return None
    return f"{stat.st_dev}:{stat.st_ino}:{stat.st_mtime_ns}:{stat.st_ctime_ns}"


def summary(ccc, minion):
    """``{stack: USER_EMAIL or None}`` of the stacks whose settings edits must reach ``minion``,
    from its ``ccc`` pillar: ``targets_for``'s rule for every valid, once-defined STACK_NAME."""
    ccc = ccc if isinstance(ccc, dict) else {}
    node = ccc_pillar.node_settings(ccc, minion)["name"]
    users = ccc.get("users") or {}
    entries = [entry for entry in ccc.get("containers") or [] if isinstance(entry, dict)]
    counts = collections.Counter(entry.get("STACK_NAME") for entry in entries
                                 if ccc_rules.is_stack_name(entry.get("STACK_NAME")))
    found, by_type = {}, {}
    for entry in entries:
        stack = entry.get("STACK_NAME")
        if not ccc_rules.is_stack_name(stack) or counts[stack] != 1:
            continue
        record = ccc_pillar.merged_record(users, entry)
        # granted(user type, record) is the type's nodes then the record's: the node is granted
        # when either grants it. The type's answer is worked out once per type (a site's
        # allowed_nodes may list hundreds of nodes; granted de-duplicates in quadratic time).
        kind = record.get("USER_TYPE") if isinstance(record.get("USER_TYPE"), str) else None
        if kind is None or kind not in by_type:
            answer = node in ccc_pillar.granted(ccc_pillar.user_type_of(ccc, record), {}, "nodes")
            if kind is not None:
                by_type[kind] = answer
        if (by_type[kind] if kind is not None else answer) or node in ccc_pillar.granted({}, record, "nodes"):
            email = record.get("USER_EMAIL")
            found[stack] = str(email) if email else None
    return found


def placement(targets):
    """``(targets, user)`` from a stack file's ``{minion: user}``: the minions sorted, the user the
    first of them with one (``ccc_redeploy.user_for`` over the targets' pillars)."""
    minions = sorted(targets)
    return minions, next((targets[minion] for minion in minions if targets[minion]), None)


def lookup(root, stack, stamp):
    """``(targets, user)`` of ``stack`` from the index, or ``None`` when the index cannot be
    trusted for it (missing, incomplete, another version, keys accepted or deleted since, or a
    stack it does not know): the caller then computes from the pillar cache."""
    if stamp is None or not ccc_rules.is_stack_name(stack):
        return None
    state = _read(os.path.join(root, "state.json"))
    if not isinstance(state, dict) or state.get("version") != VERSION or state.get("complete") is not True \
            or state.get("keys") != stamp:
        return None
    data = _read(os.path.join(root, "stacks", f"{stack}.json"))
    minions, user = (data.get("minions"), data.get("user")) if isinstance(data, dict) else (None, None)
    if not isinstance(minions, list) or not minions or not all(type(minion) is str for minion in minions) \
            or not (user is None or isinstance(user, str)):
        return None
    return minions, user


def usable(root):
    """Whether the index is whole (complete, this version), so that summaries of some minions
    can be folded in; otherwise the watch compiles every minion and rewrites it."""
    state = _read(os.path.join(root, "state.json"))
    return isinstance(state, dict) and state.get("version") == VERSION and state.get("complete") is True


def write(root, summaries, removed, stamp, every=False):
    """
    Fold ``summaries`` (``{minion: summary}``, the minions compiled now) into the index and drop
    the ``removed`` minions; ``every``: ``summaries`` covers every accepted minion (any other
    minion the index knows is dropped). Only the files whose content changes are rewritten. An
    index that is not whole (``usable``) is rebuilt from ``summaries`` when they cover every
    minion, and otherwise stays distrusted (``False`` is returned). ``stamp``: ``keys_stamp``
    read before the accepted minions were listed.
    """
    with _locked(root):
        whole = usable(root)
        _write_json(root, "state.json", {"version": VERSION, "complete": False, "keys": None})
        if not whole:
            if not every:
                return False
            for name in FOLDERS:
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        for name in FOLDERS:
            os.makedirs(os.path.join(root, name), mode=0o700, exist_ok=True)
        gone = set(removed) | ((known_minions(root) - set(summaries)) if every else set())
        changes = collections.defaultdict(dict)  # stack -> {minion: user, or _GONE}
        for minion, new in [(minion, summaries[minion]) for minion in sorted(summaries)] + [
                (minion, None) for minion in sorted(gone - set(summaries))]:
            _fold_minion(root, minion, new, changes)
        for stack, change in changes.items():
            _fold_stack(root, stack, change)
        _write_json(root, "state.json", {"version": VERSION, "complete": True, "keys": stamp})
        return True


def _fold_minion(root, minion, new, changes):
    """Write (``new``) or remove (``None``) a minion's summary; note what it changes per stack."""
    _check_minion(minion)
    path = os.path.join(root, "minions", f"{minion}.json")
    old = _read(path)
    old = old if isinstance(old, dict) else {}
    for stack in set(old) | set(new or {}):
        if stack not in (new or {}):
            changes[stack][minion] = _GONE
        elif old.get(stack, _GONE) != new[stack]:
            changes[stack][minion] = new[stack]
    if new is None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    elif new != old or not os.path.exists(path):
        _write_json(root, os.path.join("minions", f"{minion}.json"), new)


def _fold_stack(root, stack, change):
    """Apply one stack's target changes to its files (removed when no target is left): the map
    first, the placement a redeploy reads last."""
    data = _read(os.path.join(root, "targets", f"{stack}.json"))
    targets = data if isinstance(data, dict) else {}
    for minion, user in change.items():
        if user is _GONE:
            targets.pop(minion, None)
        else:
            targets[minion] = user
    if targets:
        _write_json(root, os.path.join("targets", f"{stack}.json"), targets)
        minions, user = placement(targets)
        _write_json(root, os.path.join("stacks", f"{stack}.json"), {"minions": minions, "user": user})
    else:
        for name in ("stacks", "targets"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(root, name, f"{stack}.json"))


def known_minions(root):
    """The minions the index has a summary of."""
    try:
        names = os.listdir(os.path.join(root, "minions"))
    except OSError:
        return set()
    return {name[:-5] for name in names if name.endswith(".json")}


_GONE = object()


def _check_minion(minion):
    """A minion id is a file name here: one that could not be (a separator, a leading dot) is refused."""
    if not isinstance(minion, str) or not minion or minion.startswith(".") or "/" in minion or "\0" in minion:
        raise ValueError(f"minion id {minion!r} cannot name an index file")


def _read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def _write_json(root, relative, data):
    ccc_safefs.replace_file(os.path.join(root, relative), json.dumps(data, sort_keys=True).encode("utf-8"), 0o644,
                            root=root)


@contextlib.contextmanager
def _locked(root):
    os.makedirs(root, mode=0o700, exist_ok=True)
    with open(os.path.join(root, "lock"), "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def recorded_stamp(root):
    """The key stamp the index was last written with (``None``: none, or not trusted)."""
    state = _read(os.path.join(root, "state.json"))
    return state.get("keys") if isinstance(state, dict) else None


def summary_of(root, minion):
    """The summary the index holds for ``minion`` (``None``: none)."""
    _check_minion(minion)
    data = _read(os.path.join(root, "minions", f"{minion}.json"))
    return data if isinstance(data, dict) else None
