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
import salt.utils.master


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


def compiled_digests(opts, minions):
    """``({minion: ccc_digest}, {minions whose pillar has render errors})`` of a pillar the master
    compiles now for each of ``minions``, with their cached grains (master ``opts``)."""
    if not minions:
        return {}, set()
    util = salt.utils.master.MasterPillarUtil(
        list(minions), "list", use_cached_grains=True, grains_fallback=False,
        # pillar_fallback stays off: MasterPillarUtil lets a cached pillar override a live one.
        use_cached_pillar=False, pillar_fallback=False, opts=opts,
    )
    pillars = util.get_minion_pillar()
    return ({minion: ccc_digest(pillar) for minion, pillar in pillars.items()},
            {minion for minion, pillar in pillars.items() if (pillar or {}).get("_errors")})
