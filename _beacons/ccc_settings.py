"""
Beacon ``ccc_settings``: a user changed ``~/.containers/<STACK_NAME>.yml``.

On the host that file is ``<ccc:cluster:mount_points:nfs:user_data>/<USER_EMAIL>/
container-settings/<STACK_NAME>.yml``. The beacon fires one event per changed stack, tagged
``salt/beacon/<minion id>/ccc_settings/<STACK_NAME>`` with data
``{"stack": <STACK_NAME>, "change": "modified" | "deleted" | "created", "id": <minion id>}``
(plus ``"replay": True`` for a change fired again after a pillar render error, see below).
It never reads a settings file (the deployment does that, on the minion, with its own checks).

How it watches (``inotify_simple``, not Salt's pyinotify beacon):

* inotify on each settings **directory** (``IN_DONT_FOLLOW | IN_ONLYDIR``), filtered by the exact
  file names ``<STACK_NAME>.yml`` configured for that directory. Editors that write a temporary
  file and rename it over the original, and deletions, are seen; the deployment's own files next
  to it (``.deploy``, ``.status``, ``.env-backup``, ``logs/``) and any other name are ignored.
* ``quiet_period`` (s, default 1): a stack fires once no change has been seen for that long, so a
  burst of writes gives one event. ``max_delay`` (s, default 10): a file that keeps changing
  still fires at least this often.
* ``poll_interval`` (s, default 30): every so often each file is ``lstat``-ed and fires when
  ``(mtime_ns, size, inode)`` changed. inotify does not see edits made on another NFS client,
  and a settings directory that does not exist yet is looked for again at this interval and
  watched once it appears.
* An event fires only when the file's ``(mtime_ns, size, inode)`` differs from what was last
  seen; the first sight of a file (beacon start, a new stack in the configuration) never fires.
* Symlinks are never followed: a symlinked ``.yml`` still fires (the deployment then refuses
  it), its target is never opened.

Configuration, either an explicit file list::

    beacons:
      ccc_settings:
        - files:
            - {stack: ana-main, path: /data/shared/user_data/ana@example.org/container-settings/ana-main.yml}
        - quiet_period: 1
        - poll_interval: 30
        - max_delay: 10
        - interval: 1
        - disable_during_state_run: False

or, as ccc-salt's generic pillar ``pillar/ccc/beacons.sls`` does, derived on the minion from its
own ``ccc:`` pillar (every container whose user type's ``allowed_nodes`` plus its
``ALLOWED_NODES`` contain this node, and which is not ``DISABLED``; tunables from
``ccc:cluster:beacon:{quiet_period,poll_interval,max_delay}``)::

    beacons:
      ccc_settings:
        - from_pillar: ccc
        - interval: 1
        - disable_during_state_run: False

``disable_during_state_run`` must stay off: Salt closes the beacon during every state run, which
would drop the inotify watches exactly while deployments happen.

The pillar-derived list is recomputed at ``poll_interval``; a pillar refresh rebuilds the beacon,
and the new watcher takes over the old one's state (see ``_registry``). The watching logic is the
plain-Python class ``SettingsWatcher``; ``beacon`` only wraps it.

A pillar with render errors (``_errors``, e.g. a site SLS with invalid YAML that reached the minion
through a refresh) may lack containers or storage paths, and nothing refreshes a minion's
in-memory pillar by itself. So while it holds errors the beacon keeps the last list built from a
good pillar (and keeps firing), logs one warning, and asks for ``saltutil.refresh_pillar`` every
``poll_interval`` (at least 10 s). Once a refresh brings a good pillar it rebuilds its list and
fires the stacks changed meanwhile once more, with ``"replay": True`` in the data (while the
pillar was broken the master could not redeploy them).
"""

import collections
import errno
import logging
import os
import re
import sys
import time
import types

try:
    import inotify_simple

    HAS_INOTIFY = True
except ImportError:  # pragma: no cover - the minion lacks the package
    inotify_simple = None
    HAS_INOTIFY = False

log = logging.getLogger(__name__)

__virtualname__ = "ccc_settings"

# Same rules as _modules/ccc_containers.py (a test keeps them equal).
STACK_NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
EMAIL_PATTERN = re.compile(r"^[A-Za-z0-9_%+-][A-Za-z0-9._%+-]{0,63}@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$")
DEFAULT_USER_DATA = "/data/shared/user_data"
SETTINGS_DIR_NAME = "container-settings"

DEFAULTS = {"quiet_period": 1.0, "poll_interval": 30.0, "max_delay": 10.0}
RESERVED_KEYS = {"interval", "enabled", "run_once", "beacon_module", "disable_during_state_run", "_beacon_name"}
CONTEXT_KEY = "ccc_settings.watcher"
REGISTRY_MODULE = "_ccc_salt_settings_beacon_registry"
PILLAR_RETRY_MIN = 10.0  # s between two pillar refresh requests while the pillar has render errors

if HAS_INOTIFY:
    _F = inotify_simple.flags
    DIR_MASK = (_F.CLOSE_WRITE | _F.MOVED_TO | _F.CREATE | _F.DELETE | _F.MOVED_FROM | _F.ATTRIB
                | _F.DELETE_SELF | _F.MOVE_SELF | _F.DONT_FOLLOW | _F.ONLYDIR)
    SELF_GONE = _F.DELETE_SELF | _F.MOVE_SELF | _F.IGNORED | _F.UNMOUNT
    OVERFLOW = _F.Q_OVERFLOW
else:  # pragma: no cover
    DIR_MASK = SELF_GONE = OVERFLOW = 0

_UNKNOWN = object()  # lstat failed for another reason than "not there": decide later


def __virtual__():
    if not HAS_INOTIFY:
        return False, "the ccc_settings beacon needs the inotify_simple Python package"
    return __virtualname__


# --------------------------------------------------------------------------------------------
# The watcher (plain Python, no Salt)


def _signature(path):
    """``(mtime_ns, size, inode)`` of ``path`` itself (never through a symlink), ``None`` when
    it does not exist, ``_UNKNOWN`` on any other error."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return _UNKNOWN
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class SettingsWatcher:
    """
    Watch settings files and report settled changes.

    ``files``: ``[{"stack": ..., "path": ...}]`` (or a ``{stack: path}`` mapping).
    ``poll()`` never blocks and returns ``[{"stack": ..., "change": ...}]``. ``clock`` is a
    monotonic clock in seconds; ``notifier_factory`` builds the inotify object (tests pass one
    that sees nothing, to exercise the stat poll alone).
    """

    def __init__(self, files, quiet_period=DEFAULTS["quiet_period"], poll_interval=DEFAULTS["poll_interval"],
                 max_delay=DEFAULTS["max_delay"], clock=time.monotonic, notifier_factory=None):
        self.quiet_period = quiet_period
        self.poll_interval = poll_interval
        self.max_delay = max_delay
        self.clock = clock
        self._factory = notifier_factory or inotify_simple.INotify
        self._notifier = None
        self._closed = False
        self.files = {}        # stack -> path
        self.dirs = {}         # dir -> {file name: stack}
        self.wds = {}          # wd -> dir
        self.dir_wd = {}       # dir -> wd (watched dirs only)
        self.seen = {}         # stack -> last signature
        self.pending = {}      # stack -> [first change, last change]
        self.next_poll = self.clock() + self.poll_interval
        self.set_files(files)

    # -- configuration ---------------------------------------------------------------------

    @staticmethod
    def _normalise(files):
        if isinstance(files, dict):
            return {str(stack): os.path.normpath(path) for stack, path in files.items()}
        return {str(item["stack"]): os.path.normpath(item["path"]) for item in files or []}

    def set_files(self, files):
        """Apply a new file list; returns True when it differed. New files are seen, not fired."""
        wanted = self._normalise(files)
        if wanted == self.files:
            return False
        for stack in list(self.files):
            if wanted.get(stack) != self.files[stack]:
                self.seen.pop(stack, None)
                self.pending.pop(stack, None)
        self.files = wanted
        self.dirs = {}
        for stack, path in wanted.items():
            self.dirs.setdefault(os.path.dirname(path), {})[os.path.basename(path)] = stack
        for directory in [d for d in self.dir_wd if d not in self.dirs]:
            self._unwatch(directory)
        for directory in self.dirs:
            if directory not in self.dir_wd:
                self._watch(directory)
        for stack, path in wanted.items():
            if stack not in self.seen:
                self.seen[stack] = _signature(path)
        return True

    @property
    def watched_dirs(self):
        return sorted(self.dir_wd)

    @property
    def missing_dirs(self):
        return sorted(d for d in self.dirs if d not in self.dir_wd)

    # -- inotify ---------------------------------------------------------------------------

    def _inotify(self):
        if self._notifier is None:
            self._notifier = self._factory()
        return self._notifier

    def _watch(self, directory):
        """Watch ``directory`` (a real directory, not a symlink); False when it cannot be."""
        try:
            wd = self._inotify().add_watch(directory, DIR_MASK)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                log.warning("ccc_settings: cannot watch %s (%s); it is polled instead", directory, exc)
            return False
        self.dir_wd[directory] = wd
        self.wds[wd] = directory
        return True

    def _unwatch(self, directory):
        wd = self.dir_wd.pop(directory, None)
        if wd is None:
            return
        if self.wds.get(wd) == directory:
            del self.wds[wd]
        if wd not in self.wds and self._notifier is not None:
            try:
                self._notifier.rm_watch(wd)
            except OSError:
                pass  # already gone with its directory

    def _touch(self, stack, now):
        entry = self.pending.get(stack)
        if entry is None:
            self.pending[stack] = [now, now]
        else:
            entry[1] = now

    def _touch_dir(self, directory, now):
        for stack in self.dirs.get(directory, {}).values():
            self._touch(stack, now)

    def _drain(self, now):
        if self._notifier is None:
            return
        try:
            events = self._notifier.read(timeout=0)
        except OSError as exc:
            log.warning("ccc_settings: reading inotify failed (%s)", exc)
            return
        lost = set()
        for event in events:
            if event.mask & OVERFLOW:
                for stack in self.files:
                    self._touch(stack, now)
                continue
            directory = self.wds.get(event.wd)
            if directory is None:
                continue
            if event.mask & SELF_GONE:
                lost.add(directory)
                continue
            stack = self.dirs.get(directory, {}).get(event.name)
            if stack is not None:
                self._touch(stack, now)
        for directory in lost:
            # Deleted, moved away or unmounted: its files may be gone. Re-arm on the path now
            # or, if it is not back, at the next poll.
            self._unwatch(directory)
            self._touch_dir(directory, now)
            self._watch(directory)

    # -- the poll --------------------------------------------------------------------------

    def _stat_poll(self, now):
        for directory in self.missing_dirs:
            if self._watch(directory):
                self._touch_dir(directory, now)  # files made before the watch existed
        for stack, path in self.files.items():
            if stack not in self.pending and _signature(path) != self.seen.get(stack):
                self._touch(stack, now)

    def poll(self):
        """Return the settled changes since the last call; never blocks."""
        if self._closed:
            return []
        now = self.clock()
        self._drain(now)
        if now >= self.next_poll:
            self.next_poll = now + self.poll_interval
            self._stat_poll(now)
        if not self.pending:
            return []
        events = []
        for stack in sorted(self.pending):
            first, last = self.pending[stack]
            if now - last < self.quiet_period and now - first < self.max_delay:
                continue
            del self.pending[stack]
            current = _signature(self.files[stack])
            before = self.seen.get(stack)
            if current is _UNKNOWN or current == before:
                continue
            self.seen[stack] = current
            if before is None:
                change = "created"
            elif current is None:
                change = "deleted"
            else:
                change = "modified"
            events.append({"stack": stack, "change": change})
        return events

    def inherit(self, old):
        """
        Take over what an older watcher of the same files knew (last signatures, pending
        changes) and close it. The next ``poll`` stat-checks every file, so a change made while
        no watcher was looking still fires, and a file this watcher has never seen still does not.
        """
        for stack, path in self.files.items():
            if old.files.get(stack) == path:
                if stack in old.seen:
                    self.seen[stack] = old.seen[stack]
                if stack in old.pending:
                    self.pending[stack] = list(old.pending[stack])
        old.close()
        self.next_poll = self.clock()

    def close(self):
        self._closed = True
        if self._notifier is not None:
            try:
                self._notifier.close()
            finally:
                self._notifier = None
        self.dir_wd.clear()
        self.wds.clear()

    @property
    def closed(self):
        return self._closed


# --------------------------------------------------------------------------------------------
# Files from pillar (the same placement rule as ccc_containers: allowed nodes, DISABLED)


def _dict(value):
    return value if isinstance(value, dict) else {}


def _truthy(value):
    return value is True or (isinstance(value, (str, int)) and str(value).lower() in ("true", "1", "yes"))


def files_from_ccc(ccc, minion_id):
    """
    The settings files this node watches: every valid, not DISABLED container whose user type's
    ``allowed_nodes`` plus its ``ALLOWED_NODES`` contain this node (``ccc:node:name``, else the
    minion id). Returns ``[{"stack", "path"}]`` sorted by stack.
    """
    ccc = _dict(ccc)
    user_data = _dict(_dict(_dict(ccc.get("cluster")).get("mount_points")).get("nfs")).get("user_data")
    user_data = user_data or DEFAULT_USER_DATA
    if not isinstance(user_data, str) or not os.path.isabs(user_data):
        log.error("ccc_settings: ccc:cluster:mount_points:nfs:user_data %r is not an absolute path", user_data)
        return []
    node = _dict(ccc.get("node")).get("name") or minion_id
    users = _dict(ccc.get("users"))
    user_types = _dict(ccc.get("user_types"))
    containers = ccc.get("containers") if isinstance(ccc.get("containers"), list) else []
    entries = [entry for entry in containers if isinstance(entry, dict)]
    counts = collections.Counter(e.get("STACK_NAME") for e in entries if isinstance(e.get("STACK_NAME"), str))
    files = []
    for entry in entries:
        stack = entry.get("STACK_NAME")
        if not isinstance(stack, str) or not STACK_NAME_PATTERN.match(stack) or counts[stack] > 1:
            continue  # the deployment skips these too
        email = entry.get("USER_EMAIL")
        if not isinstance(email, str) or not EMAIL_PATTERN.match(email):
            continue
        record = dict(_dict(users.get(email)))
        record.update(entry)
        if _truthy(record.get("DISABLED")):
            continue
        user_type = _dict(user_types.get(record.get("USER_TYPE"))) if isinstance(record.get("USER_TYPE"), str) else {}
        allowed = []
        for value in (user_type.get("allowed_nodes"), record.get("ALLOWED_NODES")):
            if isinstance(value, list):
                allowed.extend(value)
        if node not in allowed:
            continue
        files.append({"stack": stack, "path": os.path.join(user_data, email, SETTINGS_DIR_NAME, f"{stack}.yml")})
    return sorted(files, key=lambda item: item["stack"])


# --------------------------------------------------------------------------------------------
# Salt beacon interface


def _merge(config):
    merged = {}
    if isinstance(config, dict):
        merged.update(config)
    else:
        for item in config or []:
            if isinstance(item, dict):
                merged.update(item)
    return merged


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_tunables(values):
    problems = []
    for key in DEFAULTS:
        if key in values and (not _number(values[key]) or values[key] < 0):
            problems.append(f"{key} must be a number of seconds >= 0")
    if _number(values.get("poll_interval")) and values["poll_interval"] < 1:
        problems.append("poll_interval must be at least 1 second")
    return problems


def validate(config):
    """Check the beacon configuration (the raw list of one-key dicts)."""
    if not isinstance(config, list) or not all(isinstance(item, dict) for item in config):
        return False, "ccc_settings: configuration must be a list of one-key dicts"
    conf = _merge(config)
    unknown = set(conf) - set(DEFAULTS) - RESERVED_KEYS - {"files", "from_pillar"}
    if unknown:
        return False, f"ccc_settings: unknown keys {sorted(unknown)}"
    if conf.get("disable_during_state_run"):
        return False, ("ccc_settings: disable_during_state_run would drop the inotify watches during every "
                       "state run; leave it False")
    if ("files" in conf) == ("from_pillar" in conf):
        return False, "ccc_settings: set exactly one of files and from_pillar"
    problems = _check_tunables(conf)
    if "from_pillar" in conf:
        if not isinstance(conf["from_pillar"], str) or not conf["from_pillar"]:
            problems.append("from_pillar must name a pillar key (ccc)")
    else:
        files = conf["files"]
        if not isinstance(files, list):
            problems.append("files must be a list of {stack, path}")
            files = []
        stacks = set()
        for item in files:
            if not isinstance(item, dict) or set(item) != {"stack", "path"}:
                problems.append(f"files entry {item!r} must be {{stack, path}}")
                continue
            stack, path = item["stack"], item["path"]
            if not isinstance(stack, str) or not STACK_NAME_PATTERN.match(stack):
                problems.append(f"files entry: invalid STACK_NAME {stack!r}")
            elif not isinstance(path, str) or not os.path.isabs(path) or os.path.basename(path) != f"{stack}.yml":
                problems.append(f"files entry {stack}: path must be absolute and end in /{stack}.yml")
            elif stack in stacks:
                problems.append(f"files entry {stack}: listed twice")
            stacks.add(stack)
    if problems:
        return False, "ccc_settings: " + "; ".join(problems)
    return True, "valid beacon configuration"


def _loader_value(name):
    """A Salt loader dunder as a plain dict (the loader wraps them in NamedLoaderContext)."""
    value = globals().get(name)
    value = value.value() if hasattr(value, "value") else value
    return value if isinstance(value, dict) else {}


def _pillar():
    return _loader_value("__pillar__") or _loader_value("__opts__").get("pillar") or {}


def _minion_id():
    return _loader_value("__opts__").get("id") or ""


def _resolved(conf):
    """(files, tunables) for this call: from the configuration or from pillar."""
    tunables = dict(DEFAULTS)
    if "from_pillar" in conf:
        ccc = _dict(_pillar()).get(conf["from_pillar"])
        files = files_from_ccc(ccc, _minion_id())
        site = {k: v for k, v in _dict(_dict(_dict(ccc).get("cluster")).get("beacon")).items() if k in DEFAULTS}
        problems = _check_tunables(site)
        if problems:
            log.error("ccc_settings: ccc:cluster:beacon ignored: %s", "; ".join(problems))
        else:
            tunables.update(site)
    else:
        files = conf.get("files") or []
    tunables.update({k: conf[k] for k in DEFAULTS if k in conf})
    return files, tunables


def _holder():
    """The module kept in ``sys.modules`` across beacon loaders (see ``_registry``)."""
    holder = sys.modules.get(REGISTRY_MODULE)
    if holder is None:
        holder = types.ModuleType(REGISTRY_MODULE)
        holder.watchers = {}
        sys.modules[REGISTRY_MODULE] = holder
    if not hasattr(holder, "pillar_health"):  # made by an older version of this module
        holder.pillar_health = {}
    return holder


def _registry():
    """
    Live watchers by beacon name, kept across beacon loaders in this minion process.

    A pillar refresh or module sync makes Salt build a new beacon loader with an empty
    ``__context__``, and for beacons configured in pillar Salt 3008 does not call ``close``
    first (``Beacon._close_beacon`` only looks at minion-config beacons). The new watcher closes
    the orphaned one and inherits its state, so no descriptor leaks and no edit made around the
    refresh is lost. Only the one beacons leader of a minion process runs beacons.
    """
    return _holder().watchers


def _health(name):
    """
    What this beacon knows about its pillar, kept across beacon loaders like the watchers: the
    last watch list built from a pillar without render errors (``good``), whether the pillar is
    broken now, when to ask for the next pillar refresh, and the changes fired meanwhile.
    """
    return _holder().pillar_health.setdefault(
        name, {"good": None, "broken": False, "next_refresh": 0.0, "replay": {}})


def _pillar_errors(conf):
    """The render errors of the pillar a ``from_pillar`` list comes from (``None`` if none)."""
    if "from_pillar" not in conf:
        return None
    errors = _dict(_pillar()).get("_errors")
    if not errors:
        return None
    return errors if isinstance(errors, list) else [errors]


def _watch_list(conf, health, errors):
    """
    (files, tunables) for a new or reconfigured watcher. While the pillar holds render errors
    it may lack containers or the storage paths, so the last good list is kept instead (an
    empty one if this process never saw a good pillar: then only what the broken pillar names).
    """
    if errors and health["good"] is not None:
        files, tunables = health["good"]
        return list(files), dict(tunables)
    files, tunables = _resolved(conf)
    if not errors and "from_pillar" in conf:
        health["good"] = (list(files), dict(tunables))
    return files, tunables


def _request_pillar_refresh():
    """Ask this minion to compile its pillar again (``saltutil.refresh_pillar`` fires the local
    ``pillar_refresh`` event; the minion then rebuilds its beacons from the new pillar)."""
    try:
        __salt__["saltutil.refresh_pillar"]()
    except Exception as exc:  # noqa: BLE001 - never let the beacon die over it
        log.debug("ccc_settings: pillar refresh request failed: %s", exc)


def _pillar_health(name, errors, events, watcher, now):
    """
    Keep a ``from_pillar`` beacon alive through a pillar with render errors.

    Nothing refreshes a minion's in-memory pillar by itself, so a broken one would stay until an
    admin refreshed it. While broken: warn once, ask for a pillar refresh every ``poll_interval``
    (at least ``PILLAR_RETRY_MIN``), and remember the stacks fired (the master cannot redeploy
    them yet: its pillar is just as broken). Once a refresh brings a good pillar: fire those
    stacks again (``"replay": True``) so their edits are applied now.
    """
    health = _health(name)
    retry = max(watcher.poll_interval, PILLAR_RETRY_MIN)
    if errors:
        if not health["broken"]:
            health.update(broken=True, next_refresh=now + retry)
            log.warning("ccc_settings: the pillar has %d render error(s) (%.200s); keeping the last good list "
                        "of %d settings files and asking for a pillar refresh every %g s until it renders",
                        len(errors), errors[0], len(watcher.files), retry)
        for event in events:
            health["replay"][event["stack"]] = event["change"]
        if now >= health["next_refresh"]:
            health["next_refresh"] = now + retry
            _request_pillar_refresh()
        return events
    if health["broken"]:
        replay, fired = health["replay"], {event["stack"] for event in events}
        health.update(broken=False, replay={})
        log.warning("ccc_settings: the pillar renders again; watching %d settings files, firing again %d "
                    "stacks changed meanwhile", len(watcher.files), len(replay))
        events = events + [{"tag": stack, "stack": stack, "change": change, "replay": True}
                           for stack, change in sorted(replay.items()) if stack not in fired]
    return events


def _start(conf, name, errors, now):
    """A watcher for a fresh beacon loader (empty ``__context__``); it takes over the orphan."""
    files, tunables = _watch_list(conf, _health(name), errors)
    watcher = SettingsWatcher(files, **tunables)
    orphan = _registry().get(name)
    if orphan is not None and orphan is not watcher and not orphan.closed:
        watcher.inherit(orphan)
    _registry()[name] = watcher
    state = {"watcher": watcher, "next_config": now + tunables["poll_interval"]}
    __context__[CONTEXT_KEY] = state  # noqa: F821
    log.info("ccc_settings: watching %d settings files (%d directories watched, %d not there yet)",
             len(watcher.files), len(watcher.watched_dirs), len(watcher.missing_dirs))
    return state


def _reconfigure(conf, name, errors, state, now):
    """Follow the configuration: an explicit list every call (it is small), a pillar-derived
    one at the poll interval (a pillar refresh rebuilds the beacon anyway)."""
    files, tunables = _watch_list(conf, _health(name), errors)
    watcher = state["watcher"]
    for key, value in tunables.items():
        setattr(watcher, key, value)
    state["next_config"] = now + tunables["poll_interval"]
    if watcher.set_files(files):
        log.info("ccc_settings: now watching %d settings files", len(watcher.files))


def beacon(config):
    """Fire ``{"tag": STACK_NAME, "stack": STACK_NAME, "change": ...}`` per settled change."""
    conf = _merge(config)
    name = conf.get("_beacon_name") or __virtualname__
    errors = _pillar_errors(conf)
    state = __context__.get(CONTEXT_KEY)  # noqa: F821
    now = time.monotonic()
    if state is None or state["watcher"].closed:
        state = _start(conf, name, errors, now)
    elif "files" in conf or now >= state["next_config"]:
        _reconfigure(conf, name, errors, state, now)
    events = [{"tag": event["stack"], **event} for event in state["watcher"].poll()]
    if "from_pillar" in conf:
        events = _pillar_health(name, errors, events, state["watcher"], now)
    return events


def close(config):
    """Release the inotify file descriptor (Salt calls this on beacon refresh)."""
    state = __context__.pop(CONTEXT_KEY, None)  # noqa: F821
    name = _merge(config).get("_beacon_name") or __virtualname__
    if state is not None:
        state["watcher"].close()
        if _registry().get(name) is state["watcher"]:
            del _registry()[name]
