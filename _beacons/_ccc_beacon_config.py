"""
What ccc-salt's beacons (``ccc_settings``, ``ccc_docker``) share about living in a minion: the
shape of a beacon configuration, the process-wide registry that outlives Salt's beacon loaders,
the loader's dunders as plain data, and how to ask an execution function for shared data.

Not a beacon itself: Salt never loads ``_``-prefixed files as beacons, but puts their folder on
``sys.path`` while it loads one, so the beacons import this file by name. Beacons are loaded
without the ``_utils`` folders on ``sys.path``; what they need from the shared code
(placement, defaults) they get from execution functions (``salt_call``).
"""

import os
import sys
import types

# Keys Salt itself reads from (or adds to) every beacon configuration.
RESERVED_KEYS = {"interval", "enabled", "run_once", "beacon_module", "disable_during_state_run", "_beacon_name"}


def merge(config):
    """A beacon configuration (a list of one-key dicts, or a dict) as one dict."""
    merged = {}
    if isinstance(config, dict):
        merged.update(config)
    else:
        for item in config or []:
            if isinstance(item, dict):
                merged.update(item)
    return merged


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check(config, beacon, defaults, sources, also=()):
    """
    The checks every ccc-salt beacon configuration passes: a list of one-key dicts, no unknown
    key, ``disable_during_state_run`` off (Salt would close the beacon's watches during every
    state run, exactly while deployments happen), exactly one of ``sources`` (e.g. an explicit
    value or ``from_pillar``), tunables (``defaults``' keys) numbers of seconds >= 0, and
    ``from_pillar`` naming a key.

    Returns ``(conf, problems)``: the merged configuration and what is wrong with it; ``conf``
    is ``None`` when the configuration is too malformed to look further. ``from_pillar`` names
    the pillar key the deployment reads, ``ccc``.
    """
    if not isinstance(config, list) or not all(isinstance(item, dict) for item in config):
        return None, ["configuration must be a list of one-key dicts"]
    conf = merge(config)
    unknown = set(conf) - set(defaults) - RESERVED_KEYS - set(sources) - set(also)
    if unknown:
        return None, [f"unknown keys {sorted(unknown)}"]
    if conf.get("disable_during_state_run"):
        return None, [f"disable_during_state_run would close the {beacon} beacon's watches during every "
                      "state run; leave it False"]
    if sum(key in conf for key in sources) != 1:
        return None, [f"set exactly one of {' and '.join(sources)}"]
    problems = [f"{key} must be a number of seconds >= 0" for key in defaults
                if key in conf and (not is_number(conf[key]) or conf[key] < 0)]
    if "from_pillar" in conf and conf["from_pillar"] != "ccc":
        problems.append("from_pillar must name a pillar key (ccc)")
    return conf, problems


def verdict(beacon, problems):
    """``validate``'s answer for a list of problems."""
    if problems:
        return False, f"{beacon}: " + "; ".join(problems)
    return True, "valid beacon configuration"


def loader_value(value):
    """A Salt loader dunder as a plain dict (the loader wraps them in NamedLoaderContext)."""
    value = value.value() if hasattr(value, "value") else value
    return value if isinstance(value, dict) else {}


def registry(module_name):
    """
    A module kept in ``sys.modules`` under ``module_name`` across beacon loaders: a pillar
    refresh or module sync makes Salt build a new beacon loader (empty ``__context__``), and for
    beacons configured in pillar Salt 3008 does not call ``close`` first. A beacon keeps its
    live watchers there, so the new one takes the old one over (no descriptor leaks, no event
    lost around the refresh). Only the one beacons leader of a minion process runs beacons.
    """
    holder = sys.modules.get(module_name)
    if holder is None:
        holder = types.ModuleType(module_name)
        sys.modules[module_name] = holder
    if not hasattr(holder, "watchers"):
        holder.watchers = {}
    return holder


def _utils_dirs(opts):
    """Where the minion's loader finds shared modules: the synced ``utils`` and ``utils_dirs``."""
    dirs = list(opts.get("utils_dirs") or [])
    if opts.get("extension_modules"):
        dirs.append(os.path.join(opts["extension_modules"], "utils"))
    return {os.path.realpath(path) for path in dirs}


def salt_call(salt, opts, function, *args, **kwargs):
    """
    ``salt[function](*args, **kwargs)`` from the minion's main process, without keeping the shared
    modules (``_utils``) it imports in ``sys.modules``: the minion forks its jobs from this process, and
    a shared module kept here would shadow the one a later ``saltutil.sync_all`` writes (the
    job would run new execution modules on old shared code until the minion restarted). The
    execution module that imported them keeps its own references.
    """
    before = set(sys.modules)
    try:
        return salt[function](*args, **kwargs)
    finally:
        dirs = _utils_dirs(opts)
        for name in set(sys.modules) - before:
            path = getattr(sys.modules.get(name), "__file__", None)
            if path and os.path.dirname(os.path.realpath(path)) in dirs:
                del sys.modules[name]
