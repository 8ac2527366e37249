"""
How the master notices that an admin changed pillar: the rules behind ``salt-run
ccc.pillar_watch`` (scheduled on the master every few seconds).

A minion holds its pillar in memory until something refreshes it, so a container added to
pillar would otherwise wait for the periodic reconcile, and the settings beacon would not watch
its file. The watch is cheap while nothing changes: it compares a fingerprint of the pillar
source files (paths, sizes, modification times) and compiles nothing. When the fingerprint
moves (or the master has external pillars other than the inventory pillar, whose stored
result is a watched file: files cannot tell about them), it compiles each
minion's pillar and compares a digest of its ``ccc`` key with the digest it recorded when it
last acted: the minions whose ``ccc`` pillar changed are the ones concerned.
"""

import hashlib
import json
import os

import ccc_inventory_state
import ccc_pillar
import salt.pillar
import salt.utils.master


def file_map(roots):
    """``{path: [size, mtime_ns]}`` of every file below ``roots``; symlinks are followed as the
    pillar renderer follows them. Missing roots count as empty."""
    files = {}
    for root in roots:
        for folder, dirs, names in os.walk(root, followlinks=True):
            dirs.sort()
            for name in sorted(names):
                path = os.path.normpath(os.path.join(folder, name))
                try:
                    stat = os.stat(path)
                except OSError:
                    continue
                files.setdefault(path, [stat.st_size, stat.st_mtime_ns])
    return files


def map_fingerprint(files):
    """A digest of a ``file_map``."""
    digest = hashlib.sha256()
    for path in sorted(files):
        size, mtime = files[path]
        digest.update(f"{path}\0{size}\0{mtime}\n".encode())
    return digest.hexdigest()


def tree_fingerprint(roots):
    """A digest of every file below ``roots`` (path, size, mtime); symlinks are followed as the
    pillar renderer follows them. Missing roots count as empty."""
    digest = hashlib.sha256()
    for root in roots:
        for folder, dirs, files in os.walk(root, followlinks=True):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(folder, name)
                try:
                    stat = os.stat(path)
                except OSError:
                    continue
                digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def to_compile(before, now, reads):
    """
    The minions whose pillar a change of the pillar files from ``before`` to ``now`` (two
    ``file_map``) can change, from what each minion's last compile read (``reads``: ``{minion:
    [paths]}``, see ``compile_pillars``); ``None``: every minion. A file changed or removed
    concerns the minions that read it. A file added, or one that no compile read (the inventory
    pillar's stored result, a file read by other means than the pillar file client), concerns
    every minion: whether a top file's or an include's pattern now matches it, or what reads it,
    is not known. Minions without ``reads`` are left to the caller (they may have read anything).
    """
    changed = {path for path in set(before) | set(now) if before.get(path) != now.get(path)}
    readers = {}
    for minion, paths in reads.items():
        for path in paths:
            readers.setdefault(path, set()).add(minion)
    found = set()
    for path in changed:
        if path not in before or path not in readers:
            return None
        found |= readers[path]
    return found


def watched_roots(opts):
    """The folders whose files decide the pillar: ``pillar_roots`` and the stored result of the
    inventory pillar (``ccc_inventory_state``, which changes with the inventory's revision);
    ``None`` when the master has another external pillar, which no file tells about."""
    extra = []
    for entry in opts.get("ext_pillar") or []:
        if not isinstance(entry, dict) or list(entry) != ["ccc_inventory"]:
            return None
        extra = [ccc_inventory_state.folder(opts["cachedir"])]
    return pillar_roots(opts) + extra


def pillar_roots(opts):
    """Every folder of the master's ``pillar_roots`` (all environments)."""
    roots = opts.get("pillar_roots") or {}
    return [path for env in sorted(roots) for path in roots[env]]


def ccc_digest(pillar):
    """A digest of a compiled pillar's ``ccc`` key (and of its render errors, which hide it)."""
    data = {"ccc": (pillar or {}).get("ccc"), "errors": (pillar or {}).get("_errors")}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def concerned(recorded, digests, changed):
    """The minions whose ``ccc`` digest differs from the recorded one; when the pillar files
    ``changed`` since the watch last looked, also the minions it has no record of (it cannot know
    which pillar they hold in memory: one refresh and reconcile too many is harmless)."""
    return sorted(minion for minion, digest in digests.items()
                  if (minion in recorded and recorded[minion] != digest) or (changed and minion not in recorded))


def compile_pillars(opts, minions):
    """``(digests, broken, cccs, reads)`` of a pillar the master compiles now for each of
    ``minions`` with their cached grains (master ``opts``): ``{minion: ccc_digest}``, the minions
    whose pillar has render errors, ``{minion: its ccc pillar}`` and ``{minion: [paths the
    compile read]}`` (every file the pillar file client served it: top files, SLS files, their
    includes and Jinja imports; a minion compiled without grains has none)."""
    if not minions:
        return {}, set(), {}, {}
    util = _RecordingPillarUtil(
        list(minions), "list", use_cached_grains=True, grains_fallback=False,
        # pillar_fallback stays off: MasterPillarUtil lets a cached pillar override a live one.
        use_cached_pillar=False, pillar_fallback=False, opts=opts,
    )
    pillars = util.get_minion_pillar()
    return ({minion: ccc_digest(pillar) for minion, pillar in pillars.items()},
            {minion for minion, pillar in pillars.items() if (pillar or {}).get("_errors")},
            {minion: ccc_pillar.pillar_ccc(pillar) for minion, pillar in pillars.items()},
            {minion: sorted(util.reads[minion]) for minion in pillars if minion in util.reads})


class _RecordingPillar(salt.pillar.Pillar):
    """A minion's pillar compile that notes every file its pillar file client serves. The
    renderers (Jinja imports and includes too) share this client, so ``get_file``, which every
    other read goes through, sees them all; should Salt read otherwise, a changed file read by
    no compile makes ``to_compile`` compile every minion."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reads = set()
        get_file = self.client.get_file

        def recording_get_file(*call_args, **call_kwargs):
            path = get_file(*call_args, **call_kwargs)
            if isinstance(path, str) and path:
                self.reads.add(os.path.normpath(path))
            return path

        self.client.get_file = recording_get_file


class _RecordingPillarUtil(salt.utils.master.MasterPillarUtil):
    """``MasterPillarUtil`` whose live compiles are ``_RecordingPillar`` (``reads`` by minion)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reads = {}

    def _get_live_minion_pillar(self, minion_id=None, minion_grains=None):
        if minion_id is None or not minion_grains:
            return super()._get_live_minion_pillar(minion_id, minion_grains)
        # No on-demand ``ext``: the configured ext_pillar runs from opts anyway, and Salt's own
        # live compile, which passes that list here, logs an ERROR that it is no dictionary.
        pillar = _RecordingPillar(self.opts, minion_grains, minion_id, self.saltenv)
        compiled = pillar.compile_pillar()
        self.reads[minion_id] = pillar.reads
        return compiled


# s after the watch asked a minion to refresh its pillar during which the minion may still hold
# the old one (the refresh is asynchronous): redeploys there compile the pillar afresh meanwhile.
REFRESH_SETTLE = 10


def holds_current(seen, files, minions, now):
    """
    Whether each of ``minions`` holds in memory the pillar the master would compile for it now,
    so that a redeploy may use it (``ccc_redeploy.job``) instead of compiling one: the pillar
    files are as the watch's last record ``seen`` has them (``files``: a ``file_map`` now; None,
    an external pillar no file tells about, is never known), the watch compiled each minion's
    pillar since it was accepted, and none was asked to refresh in the last ``REFRESH_SETTLE`` s
    or could not be asked (``refreshed``: a time, or None for a failed ask). So an admin's edit
    the watch has not acted on yet is never applied with the pillar from before it.
    """
    if files is None or not seen.get("fingerprint") or map_fingerprint(files) != seen["fingerprint"]:
        return False
    digests = seen.get("digests") if isinstance(seen.get("digests"), dict) else {}
    refreshed = seen.get("refreshed") if isinstance(seen.get("refreshed"), dict) else {}
    for minion in minions:
        asked = refreshed.get(minion, 0)
        if minion not in digests or not isinstance(asked, (int, float)) or now - asked < REFRESH_SETTLE:
            return False
    return bool(minions)


def refreshes_kept(before, asked, accepted, now):
    """The watch record's ``refreshed`` after a run: ``asked`` (``{minion: time, or None when
    the ask failed}``) over ``before``, for accepted minions; a successful ask is forgotten once
    it is ``REFRESH_SETTLE`` s old, a failed one only when a later ask succeeds."""
    kept = {minion: when for minion, when in (before if isinstance(before, dict) else {}).items()
            if minion in accepted and (when is None or (isinstance(when, (int, float)) and now - when < REFRESH_SETTLE))}
    kept.update(asked)
    return kept


def plan(seen, files, accepted, force, index_whole):
    """
    What one watch run compiles, from its last record ``seen`` (``fingerprint``, ``files``,
    ``digests``, ``reads``), the pillar files now (``files``: a ``file_map``, ``None`` on a
    master with an external pillar no file tells about), the ``accepted`` minions, ``force`` and
    whether the redeploy index is whole. Returns ``(minions, changed)``: the minions to compile
    and whether the files changed since the watch last looked.

    Every minion is compiled when forced, with such an external pillar, when the record has no
    file map (a watch before this one) or the index must be rebuilt; otherwise only those an
    edit can change (``to_compile``) and the minions accepted since the last compile, so that the
    next change is compared with what they got.
    """
    fingerprint = None if files is None else map_fingerprint(files)
    changed = bool(force) or fingerprint is None or fingerprint != seen.get("fingerprint")
    recorded = seen.get("digests") if isinstance(seen.get("digests"), dict) else {}
    before = seen.get("files") if isinstance(seen.get("files"), dict) else None
    if force or files is None or before is None or not index_whole:
        return sorted(accepted), changed
    reads = seen.get("reads") if isinstance(seen.get("reads"), dict) else {}
    reads = {minion: paths for minion, paths in reads.items() if minion in accepted and isinstance(paths, list)}
    narrowed = to_compile(before, files, reads) if changed else set()
    if narrowed is None:
        return sorted(accepted), changed
    unread = {minion for minion in accepted if minion not in reads} if changed else set()
    return sorted(narrowed | unread | {minion for minion in accepted if minion not in recorded}), changed
