"""
Beacon ``ccc_settings``: a user changed ``~/.containers/<STACK_NAME>.yml``.

On the host that file is ``<ccc:cluster:mount_points:nfs:user_data>/<USER_EMAIL>/
container-settings/<STACK_NAME>.yml``. The beacon fires one event per changed stack, tagged
``salt/beacon/<minion id>/ccc_settings/<STACK_NAME>`` with data
``{"stack": <STACK_NAME>, "change": "modified" | "deleted" | "created", "version":
"<mtime_ns>:<ctime_ns>:<size>:<inode>" | "deleted", "id": <minion id>}`` (``"replay": True`` and no
version for a change fired again after a pillar render error, see below). It never reads a
settings file (the deployment does that, on the minion, with its own checks). Every node that
may run the stack watches the same shared file and reports the same ``version``; the master
applies one edit once.

How it watches (``inotify_simple``, not Salt's pyinotify beacon; ``_ccc_settings_watcher.py``):

* inotify on each settings **directory** (``IN_DONT_FOLLOW | IN_ONLYDIR``), filtered by the exact
  file names ``<STACK_NAME>.yml`` configured for that directory. Editors that write a temporary
  file and rename it over the original, and deletions, are seen; the deployment's own files next
  to it (``.deploy``, ``.status``, ``.env-backup``, ``logs/``) and any other name are ignored.
* ``quiet_period`` (s, default 0.15): a stack fires once no change has been seen for that long,
  so a burst of writes (an editor's save: write, rename, chmod) gives one event; saves further
  apart are coalesced by the master (one apply queued or running per stack). ``max_delay`` (s, default 10): a file that keeps changing
  still fires at least this often.
* ``poll_interval`` (s, default 30): every so often each file is ``lstat``-ed and fires when
  ``(mtime_ns, ctime_ns, size, inode)`` changed. inotify does not see edits made on another NFS client,
  and a settings directory that does not exist yet is looked for again at this interval and
  watched once it appears.
* An event fires only when the file's ``(mtime_ns, ctime_ns, size, inode)`` differs from what was last
  seen; the first sight of a file (beacon start, a new stack in the configuration) never fires.
* Symlinks are never followed: a symlinked ``.yml`` still fires (the deployment then refuses
  it), its target is never opened.
* ``immediate`` (default false): Salt calls beacons once a second, so a change settled just after
  a call would wait for the next one. With ``immediate: true`` a thread waits on inotify and fires
  a change the moment its quiet period ends, as Salt fires beacon events
  (``_ccc_settings_dispatch.py``); it costs nothing while nothing changes, and fires only while
  Salt keeps calling the beacon. What it cannot send, the next call returns.

Configuration, either an explicit file list::

    beacons:
      ccc_settings:
        - files:
            - {stack: ana-main, path: /data/shared/user_data/ana@example.org/container-settings/ana-main.yml}
        - quiet_period: 0.15
        - poll_interval: 30
        - max_delay: 10
        - immediate: true
        - interval: 1
        - disable_during_state_run: False

or, as ccc-salt's generic pillar ``pillar/ccc/beacons.sls`` does, the files of this node from
the minion's own ``ccc:`` pillar, as the execution function ``ccc_containers.watched_files``
names them (every container that may run on this node and is not ``DISABLED``; tunables from
``ccc:cluster:beacon:{quiet_period,poll_interval,max_delay}``)::

    beacons:
      ccc_settings:
        - from_pillar: ccc
        - immediate: true
        - interval: 1
        - disable_during_state_run: False

``disable_during_state_run`` must stay off: Salt closes the beacon during every state run, which
would drop the inotify watches exactly while deployments happen.

The pillar-derived list is asked for again at ``poll_interval``; a pillar refresh rebuilds the
beacon, and the new watcher takes over the old one's state (see ``_registry``).

A pillar with render errors (``_errors``, e.g. a site SLS with invalid YAML that reached the minion
through a refresh) may lack containers or storage paths, and nothing refreshes a minion's
in-memory pillar by itself. So while it holds errors the beacon keeps the last list built from a
good pillar (and keeps firing), logs one warning, and asks for ``saltutil.refresh_pillar`` every
``poll_interval`` (at least 10 s). Once a refresh brings a good pillar it rebuilds its list and
fires the stacks changed meanwhile once more, with ``"replay": True`` in the data (while the
pillar was broken the master could not redeploy them).
"""

import importlib
import logging
import os
import threading
import time

import _ccc_beacon_config as beacon_config
import _ccc_settings_dispatch as dispatch
import _ccc_settings_watcher as watching

# A minion process keeps a module imported by name until it restarts; Salt builds the beacon
# loader again after every saltutil.sync_all, and then this takes the helpers as synced.
for _helper in (beacon_config, watching, dispatch):
    importlib.reload(_helper)

log = logging.getLogger(__name__)

__virtualname__ = "ccc_settings"

CONTEXT_KEY = "ccc_settings.watcher"
REGISTRY_MODULE = "_ccc_salt_settings_beacon_registry"
PILLAR_RETRY_MIN = 10.0  # s between two pillar refresh requests while the pillar has render errors
WATCHED_FILES = "ccc_containers.watched_files"


def __virtual__():
    if not watching.HAS_INOTIFY:
        return False, "the ccc_settings beacon needs the inotify_simple Python package"
    return __virtualname__


# --------------------------------------------------------------------------------------------
# Configuration


def _check_tunables(values):
    problems = [f"{key} must be a number of seconds >= 0" for key in watching.DEFAULTS
                if key in values and (not beacon_config.is_number(values[key]) or values[key] < 0)]
    if beacon_config.is_number(values.get("poll_interval")) and values["poll_interval"] < 1:
        problems.append("poll_interval must be at least 1 second")
    return problems


def _file_list_problems(files):
    """The shape of an explicit list: ``{stack, path}`` entries, each path absolute and named
    ``<stack>.yml``, each stack once. Which STACK_NAMEs are valid is the deployment's rule
    (``_checked_stacks``)."""
    if not isinstance(files, list):
        return ["files must be a list of {stack, path}"]
    problems, stacks = [], set()
    for item in files:
        if not isinstance(item, dict) or set(item) != {"stack", "path"}:
            problems.append(f"files entry {item!r} must be {{stack, path}}")
            continue
        stack, path = item["stack"], item["path"]
        if not isinstance(stack, str) or not stack:
            continue  # _checked_stacks names it
        if not isinstance(path, str) or not os.path.isabs(path) or os.path.basename(path) != f"{stack}.yml":
            problems.append(f"files entry {stack}: path must be absolute and end in /{stack}.yml")
        elif stack in stacks:
            problems.append(f"files entry {stack}: listed twice")
        stacks.add(stack)
    return problems


_CHECKED = {}  # explicit file lists already checked by the execution function (validate runs every second)


def _checked_stacks(files):
    """The problems ``ccc_containers.watched_files`` finds with an explicit list's STACK_NAMEs."""
    key = repr(files)
    if key not in _CHECKED:
        if len(_CHECKED) >= 16:  # configurations come and go rarely; never grow without bound
            _CHECKED.clear()
        try:
            _CHECKED[key] = beacon_config.salt_call(__salt__, _opts(), WATCHED_FILES, files=files)["problems"]
        except Exception as exc:  # noqa: BLE001 - not synced yet, say: say so, check again next time
            return [f"cannot check the STACK_NAMEs ({WATCHED_FILES}: {exc})"]
    return _CHECKED[key]


def validate(config):
    """Check the beacon configuration (the raw list of one-key dicts)."""
    conf, problems = beacon_config.check(config, __virtualname__, watching.DEFAULTS, ("files", "from_pillar"),
                                         also=("immediate",))
    if conf is None:
        return beacon_config.verdict(__virtualname__, problems)
    problems += [problem for problem in _check_tunables(conf) if problem not in problems]
    if not isinstance(conf.get("immediate", False), bool):
        problems.append("immediate must be true or false")
    if "files" in conf:
        shape = _file_list_problems(conf["files"])
        problems += shape or _checked_stacks(conf["files"])
    return beacon_config.verdict(__virtualname__, problems)


def _opts():
    return beacon_config.loader_value(__opts__)


def _asked(conf, health):
    """
    ``(files, tunables, errors)`` for the configuration: an explicit list as it is, or this
    node's list from ``ccc_containers.watched_files``. While the pillar holds render errors it
    may lack containers or the storage paths, so the last good list is kept instead (an empty
    one if this process never saw a good pillar: then what the broken pillar names). A failed
    call keeps the last good list too.
    """
    tunables = dict(watching.DEFAULTS)
    if "files" in conf:
        tunables.update({k: conf[k] for k in watching.DEFAULTS if k in conf})
        return conf["files"], tunables, []
    try:
        data = beacon_config.salt_call(__salt__, _opts(), WATCHED_FILES)
    except Exception as exc:  # noqa: BLE001 - not synced yet, or no file can be named: keep what it has
        log.error("ccc_settings: %s failed (%s); keeping the last good list", WATCHED_FILES, exc)
        if health["good"] is not None:
            return list(health["good"][0]), dict(health["good"][1]), []
        tunables.update({k: conf[k] for k in watching.DEFAULTS if k in conf})
        return [], tunables, []
    site = {k: v for k, v in (data.get("beacon") or {}).items() if k in watching.DEFAULTS}
    problems = _check_tunables(site)
    if problems:
        log.error("ccc_settings: ccc:cluster:beacon ignored: %s", "; ".join(problems))
    else:
        tunables.update(site)
    tunables.update({k: conf[k] for k in watching.DEFAULTS if k in conf})
    errors = list(data.get("pillar_errors") or [])
    if errors and health["good"] is not None:
        files, tunables = health["good"]
        return list(files), dict(tunables), errors
    if not errors:
        health["good"] = (list(data["files"]), dict(tunables))
    return data["files"], tunables, errors


# --------------------------------------------------------------------------------------------
# Process-wide state (outlives Salt's beacon loaders)


def _holder():
    holder = beacon_config.registry(REGISTRY_MODULE)
    if not hasattr(holder, "pillar_health"):
        holder.pillar_health = {}
    return holder


def _registry():
    """
    Live beacon states (watcher, lock, dispatcher) by beacon name, kept across beacon loaders
    in this minion process (``_ccc_beacon_config.registry``): a pillar refresh or module sync
    builds a new loader with an empty ``__context__``, without calling ``close`` for
    pillar-configured beacons; the new watcher closes the orphaned one and inherits its state.
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


# --------------------------------------------------------------------------------------------
# Pillar health


def _request_pillar_refresh():
    """Ask this minion to compile its pillar again (``saltutil.refresh_pillar`` fires the local
    ``pillar_refresh`` event; the minion then rebuilds its beacons from the new pillar)."""
    try:
        __salt__["saltutil.refresh_pillar"]()
    except Exception as exc:  # noqa: BLE001 - never let the beacon die over it
        log.debug("ccc_settings: pillar refresh request failed: %s", exc)


def _remember(health, events):
    """While the pillar is broken the master cannot redeploy: note the stacks fired."""
    if health["broken"]:
        for event in events:
            health["replay"][event["stack"]] = event["change"]


def _pillar_health(name, state, events, now):
    """
    Keep a ``from_pillar`` beacon alive through a pillar with render errors.

    Nothing refreshes a minion's in-memory pillar by itself, so a broken one would stay until an
    admin refreshed it. While broken: warn once, ask for a pillar refresh every ``poll_interval``
    (at least ``PILLAR_RETRY_MIN``), and remember the stacks fired (the master cannot redeploy
    them yet: its pillar is just as broken). Once a refresh brings a good pillar: fire those
    stacks again (``"replay": True``) so their edits are applied now.
    """
    health, errors, watcher = _health(name), state["errors"], state["watcher"]
    retry = max(watcher.poll_interval, PILLAR_RETRY_MIN)
    with state["lock"]:
        if errors:
            if not health["broken"]:
                health.update(broken=True, next_refresh=now + retry)
                log.warning("ccc_settings: the pillar has %d render error(s) (%.200s); keeping the last good "
                            "list of %d settings files and asking for a pillar refresh every %g s until it "
                            "renders", len(errors), errors[0], len(watcher.files), retry)
            _remember(health, events)
            if now >= health["next_refresh"]:
                health["next_refresh"] = now + retry
                _request_pillar_refresh()
            return events
        if not health["broken"]:
            return events
        replay, fired = health["replay"], {event["stack"] for event in events}
        health.update(broken=False, replay={})
    log.warning("ccc_settings: the pillar renders again; watching %d settings files, firing again %d "
                "stacks changed meanwhile", len(watcher.files), len(replay))
    return events + [{"tag": stack, "stack": stack, "change": change, "replay": True}
                     for stack, change in sorted(replay.items()) if stack not in fired]


# --------------------------------------------------------------------------------------------
# Immediate delivery


def _deliverer(name, state, from_pillar):
    """
    ``deliver(events)`` for the dispatch thread: fire the events as ``Salt's beacon machinery
    fires a beacon's return (the local ``__beacons_return`` event, which the minion forwards to
    the master when connected), with the same tags and data. Captured here, in the minion's main
    thread: the loader's dunders resolve only there. What cannot be fired waits for the next
    call of the beacon.
    """
    fire, minion_id = __salt__["event.fire"], _opts().get("id") or ""

    def deliver(events):
        with state["lock"]:
            if from_pillar:
                _remember(_health(name), events)
        payload = [{"tag": f"salt/beacon/{minion_id}/{name}/{event['stack']}", "data": dict(event, id=minion_id),
                    "beacon_name": __virtualname__} for event in events]
        try:
            fired = fire({"beacons": payload}, "__beacons_return")
        except Exception as exc:  # noqa: BLE001 - the beacon's next call returns them
            log.debug("ccc_settings: firing at once failed: %s", exc)
            fired = False
        if not fired:
            with state["lock"]:
                state["returned"].extend(events)

    return deliver


def _follow_immediate(conf, name, state):
    """Start or stop the dispatch thread as the configuration says."""
    wanted = bool(conf.get("immediate")) and "event.fire" in __salt__
    current = state.get("dispatcher")
    if wanted and current is None:
        state["dispatcher"] = dispatch.Dispatcher(state["watcher"], state["lock"],
                                                  _deliverer(name, state, "from_pillar" in conf), name=name)
    elif not wanted and current is not None:
        current.stop()
        state["dispatcher"] = None


def _stop(state):
    """Stop a beacon state's thread, then close its watcher."""
    if state.get("dispatcher") is not None:
        state["dispatcher"].stop()
    with state["lock"]:
        state["watcher"].close()


# --------------------------------------------------------------------------------------------
# Salt beacon interface


def _start(conf, name, now):
    """A watcher for a fresh beacon loader (empty ``__context__``); it takes over the orphan."""
    files, tunables, errors = _asked(conf, _health(name))
    watcher = watching.SettingsWatcher(files, **tunables)
    state = {"watcher": watcher, "lock": threading.Lock(), "dispatcher": None, "returned": [], "errors": errors,
             "next_config": now + tunables["poll_interval"]}
    orphan = _registry().get(name)
    if orphan is not None and not isinstance(orphan, dict):  # a watcher registered by an older version
        orphan = {"watcher": orphan, "lock": threading.Lock()}
    if orphan is not None and not orphan["watcher"].closed:
        if orphan.get("dispatcher") is not None:
            orphan["dispatcher"].stop()
        with orphan["lock"]:
            watcher.inherit(orphan["watcher"])
            state["returned"] = list(orphan.get("returned") or [])
    _registry()[name] = state
    _follow_immediate(conf, name, state)
    __context__[CONTEXT_KEY] = state
    log.info("ccc_settings: watching %d settings files (%d directories watched, %d not there yet)",
             len(watcher.files), len(watcher.watched_dirs), len(watcher.missing_dirs))
    return state


def _reconfigure(conf, name, state, now):
    """Follow the configuration: an explicit list every call (it is small), a pillar-derived
    one at the poll interval (a pillar refresh rebuilds the beacon anyway)."""
    files, tunables, state["errors"] = _asked(conf, _health(name))
    watcher = state["watcher"]
    with state["lock"]:
        for key, value in tunables.items():
            setattr(watcher, key, value)
        changed = watcher.set_files(files)
    state["next_config"] = now + tunables["poll_interval"]
    _follow_immediate(conf, name, state)
    if changed:
        log.info("ccc_settings: now watching %d settings files", len(watcher.files))


def beacon(config):
    """
    Fire ``{"tag": STACK_NAME, "stack": STACK_NAME, "change": ..., "version": ...}`` per
    settled change.

    CLI Example:

    .. code-block:: bash

        salt node1 beacons.add ccc_settings "[{'from_pillar': 'ccc'}, {'immediate': True}, {'interval': 1}]"
    """
    conf = beacon_config.merge(config)
    name = conf.get("_beacon_name") or __virtualname__
    state = __context__.get(CONTEXT_KEY)
    now = time.monotonic()
    if state is None or state["watcher"].closed:
        state = _start(conf, name, now)
    elif "files" in conf or now >= state["next_config"]:
        _reconfigure(conf, name, state, now)
    with state["lock"]:
        events, state["returned"] = state["returned"] + state["watcher"].poll(), []
    if state["dispatcher"] is not None:
        state["dispatcher"].heartbeat()
    events = [{"tag": event["stack"], **event} for event in events]
    if "from_pillar" in conf:
        events = _pillar_health(name, state, events, now)
    return events


def close(config):
    """Stop watching: the dispatch thread, then the inotify descriptor (Salt calls this on a
    beacon refresh)."""
    state = __context__.pop(CONTEXT_KEY, None)
    name = beacon_config.merge(config).get("_beacon_name") or __virtualname__
    if state is not None:
        _stop(state)
        if _registry().get(name) is state:
            del _registry()[name]
