"""
Beacon ``ccc_docker``: this node's Docker engine restarted, or answers again after it did not.

After dockerd crashed or was killed and started again, the compute containers may stay exited
(and after a reboot Docker cannot start them at all: their bind sources are pins that only Salt
makes again). The beacon lets the master reconcile the node within seconds instead of at the next
scheduled reconcile. It fires ``salt/beacon/<minion id>/ccc_docker/restarted`` with data
``{"engine": "restarted", "away_s": <seconds the engine was seen not answering, 0 when the
restart was faster than the poll>, "id": <minion id>}``; no user data. It also fires
``salt/beacon/<minion id>/ccc_docker/died/<STACK>`` (data ``{"stack": <STACK>}``) when a compute
container crashes (``die`` with an exit code other than a stop's, or ``oom``): the master's
reactor redeploys that stack like a settings edit, which changes nothing but writes the problem
and the log's last lines into the user's ``.deploy`` report (``ccc_problems``).

How it watches: it keeps one ``GET /events`` request open on the engine's API socket, filtered
to ``die``/``oom`` events of ccc-salt's containers (``_ccc_docker_events``: silent while they run). dockerd closes that
connection when it stops, and the kernel closes it when dockerd is killed, so every restart is
seen, however fast, without asking the engine anything while it runs. An idle poll is one
non-blocking ``recv`` (no data: the same engine is still there). When the stream ends or cannot
be opened, every poll tries again (a refused or missing socket fails at once); the first stream
the engine answers afterwards fires the event. The socket is never blocked on: the minion runs
beacons in its main loop, and a starting dockerd accepts connections before it answers them.

* ``min_interval`` (s, default 30): at most one event per this many seconds, so a dockerd that
  crash-loops (or a flapping socket) cannot make the node reconcile continuously. A restart seen
  within it is not dropped: it fires once the interval has passed.
* ``died_interval`` (s, default 30): at most one crash event per stack per this many seconds
  (Docker restarts a crashing container within seconds at first); a later crash is not dropped.
* ``answer_timeout`` (s, default 30): a connection the engine accepted but has not answered
  after this long is dropped and tried again (and counts as the engine not answering).
* The first stream after the beacon starts fires nothing (a starting minion reconciles anyway),
  unless the engine did not answer before it: then the reconcile at minion start has failed.

Endpoints: ``unix://`` sockets and plain ``tcp://`` / ``http://`` (no TLS). On a unix socket
only dockerd ends the stream; a proxy in front of a TCP endpoint that drops idle connections
would cause an extra (harmless, rate-limited) reconcile.

Configuration, either an explicit endpoint::

    beacons:
      ccc_docker:
        - docker_url: unix:///var/run/docker.sock
        - min_interval: 30
        - interval: 1
        - disable_during_state_run: False

or, as ccc-salt's generic pillar ``pillar/ccc/beacons.sls`` does, the minion's own
``ccc:node:docker_url`` as the deployment reads it (``ccc_containers.settings``, which knows the
default), asked again every ``SETTINGS_RECHECK`` s and whenever Salt rebuilds the beacon::

    beacons:
      ccc_docker:
        - from_pillar: ccc
        - interval: 1
        - disable_during_state_run: False

``disable_during_state_run`` must stay off: Salt would close the stream during every state run
and miss a restart then. The watching logic is the plain-Python class ``EngineWatcher``;
``beacon`` only wraps it.
"""

import importlib
import logging
import time

import _ccc_beacon_config as beacon_config
import _ccc_docker_events as events

importlib.reload(beacon_config)  # the helpers as synced now (see _beacons/ccc_settings.py)
importlib.reload(events)

log = logging.getLogger(__name__)

__virtualname__ = "ccc_docker"

DEFAULTS = {"min_interval": 30.0, "answer_timeout": 30.0, "died_interval": 30.0}
CONTEXT_KEY = "ccc_docker.watcher"
REGISTRY_MODULE = "_ccc_salt_docker_beacon_registry"
SETTINGS = "ccc_containers.settings"
SETTINGS_RECHECK = 30.0  # s between two looks at ccc:node:docker_url (a pillar refresh rebuilds the beacon anyway)
REFUSED_RETRY = 60.0  # s: an engine that answers the stream with an error is asked again this often


def __virtual__():
    return __virtualname__


# --------------------------------------------------------------------------------------------
# The watcher (plain Python, no Salt)


class EngineWatcher:
    """
    Notice restarts of one Docker engine and report them, rate-limited.

    ``poll()`` never blocks and returns ``[]`` or ``[{"engine": "restarted", "away_s": ...}]``.
    ``clock`` is a monotonic clock in seconds; ``opener`` opens a stream (an ``EventStream`` on
    ``rules``, a ``CrashRules``, or a stand-in in tests) or raises ``OSError`` when the engine
    cannot be reached.
    """

    def __init__(self, url, min_interval=DEFAULTS["min_interval"], answer_timeout=DEFAULTS["answer_timeout"],
                 clock=time.monotonic, opener=None, died_interval=DEFAULTS["died_interval"], rules=None):
        self.url = url
        self.min_interval = min_interval
        self.died_interval = died_interval
        self.died_due = set()   # stacks seen crashing, not reported yet
        self.died_fired = {}    # stack -> when its crash was last reported
        self.answer_timeout = answer_timeout
        self.clock = clock
        if opener is None:
            if rules is None:
                raise ValueError("no crash rules to watch the engine's events with")
            family, address = events.endpoint(url)
            opener = lambda: events.EventStream(family, address, rules)
        self._open = opener
        self.stream = None
        self.opened = None       # when the current stream was opened
        self.answering = False   # the current stream is open: the engine answers
        self.away_since = None   # the engine was seen not answering since then (None: not seen)
        self.due = None          # a restart to report: how long the engine was away (s)
        self.last_fired = None
        self.retry_at = None     # after a refused stream: when to ask again
        self._closed = False

    def _away(self, now):
        """The engine does not answer (now) or its stream ended (it stopped): remember since when."""
        if self.away_since is None:
            self.away_since = now
            if self.answering:
                log.warning("ccc_docker: the Docker engine at %s went away", self.url)
        self.answering = False

    def _collect(self):
        """Take the crashes the stream saw (a stand-in stream in tests may not report any)."""
        take = getattr(self.stream, "take_died", None)
        if take is not None:
            self.died_due.update(take())

    def _drop(self):
        if self.stream is not None:
            self._collect()
            self.stream.close()
            self.stream = None

    def _back(self, now):
        """The engine answered a new stream: a restart when it was seen away since the last one."""
        self.answering = True
        if self.away_since is not None:
            away = max(0.0, now - self.away_since)
            log.warning("ccc_docker: the Docker engine at %s answers again (away %.1f s)", self.url, away)
            self.due = away if self.due is None else max(self.due, away)
            self.away_since = None

    def _step(self, now):
        """Advance the stream: open one when there is none, and see what it says. True when an
        open stream just ended (the engine stopped; it may already be back)."""
        if self.stream is None:
            if self.retry_at is not None and now < self.retry_at:
                return False
            self.retry_at = None
            try:
                self.stream = self._open()
            except OSError:
                self._away(now)
                return False
            self.opened = now
        status = self.stream.check()
        if status == "waiting" and now - self.opened >= self.answer_timeout:
            status = "closed"
        if status == "open" and not self.answering:
            self._back(now)
        elif status == "closed":
            ended = self.answering
            self._drop()
            self._away(now)
            return ended
        elif status == "refused":
            self._drop()
            self._back(now)  # it answers, but cannot stream: ask again later, keep quiet meanwhile
            self.answering = False
            self.retry_at = now + REFUSED_RETRY
            log.error("ccc_docker: the Docker engine at %s refused the events stream; restarts go unseen", self.url)
        return False

    def poll(self):
        """Return the restart to report now, if any; never blocks."""
        if self._closed:
            return []
        now = self.clock()
        if self._step(now):
            self._step(now)  # open the next stream at once: a fast restart may already be done
        if self.due is None or (self.last_fired is not None and now - self.last_fired < self.min_interval):
            return []
        event = {"engine": "restarted", "away_s": round(self.due, 1)}
        self.due, self.last_fired = None, now
        return [event]

    def crashes(self):
        """
        The stacks whose container crashed (``die`` with an error, ``oom``) to report now: each
        at most once per ``died_interval`` s (a crash-looping container dies every few seconds);
        a crash seen within it is reported when it has passed. Call after ``poll``.
        """
        if self._closed:
            return []
        self._collect()
        now = self.clock()
        due = sorted(stack for stack in self.died_due
                     if now - self.died_fired.get(stack, float("-inf")) >= self.died_interval)
        for stack in due:
            self.died_due.discard(stack)
            self.died_fired[stack] = now
        for stack in [s for s, when in self.died_fired.items() if now - when >= self.died_interval]:
            if stack not in self.died_due:
                del self.died_fired[stack]  # bounded by the containers crashing lately
        return due

    def inherit(self, old):
        """
        Take over an older watcher's stream and what it knew (a rebuilt beacon loader), so a
        restart around the rebuild is still reported, and the rate limit still holds. A
        watcher of another endpoint only keeps the rate limit.
        """
        self.last_fired = old.last_fired
        self.died_due, self.died_fired = set(old.died_due), dict(old.died_fired)
        if old.url == self.url:
            self.stream, old.stream = old.stream, None
            for key in ("opened", "answering", "away_since", "due", "retry_at"):
                setattr(self, key, getattr(old, key))
        old.close()

    def close(self):
        self._closed = True
        self._drop()

    @property
    def closed(self):
        return self._closed


# --------------------------------------------------------------------------------------------
# Salt beacon interface


def validate(config):
    """Check the beacon configuration (the raw list of one-key dicts)."""
    conf, problems = beacon_config.check(config, __virtualname__, DEFAULTS, ("docker_url", "from_pillar"))
    if conf is not None and "docker_url" in conf:
        try:
            events.endpoint(conf["docker_url"])
        except ValueError as exc:
            problems.append(str(exc))
    return beacon_config.verdict(__virtualname__, problems)


def _pillar_url(now):
    """
    ``ccc:node:docker_url`` from ``ccc_containers.settings`` (the deployment's own reading, its
    default included), asked at most every ``SETTINGS_RECHECK`` s; ``None`` while it cannot be
    asked (the execution module not synced yet, say).
    """
    cached = __context__.get(CONTEXT_KEY + ".url")
    if cached is not None and now < cached[1]:
        return cached[0]
    try:
        url = beacon_config.salt_call(__salt__, beacon_config.loader_value(__opts__), SETTINGS)["node"]["docker_url"]
    except Exception as exc:  # noqa: BLE001 - a beacon must not die: try again later
        if __context__.get(CONTEXT_KEY + ".failed") != str(exc):
            log.error("ccc_docker: %s failed (%s); the beacon waits for it", SETTINGS, exc)
            __context__[CONTEXT_KEY + ".failed"] = str(exc)
        url = cached[0] if cached is not None else None
    __context__[CONTEXT_KEY + ".url"] = (url, now + SETTINGS_RECHECK)
    return url


def _rules():
    """The deployment's crash rules (``events.RULES``), asked once per beacon loader (a module sync
    rebuilds it); ``None`` while they cannot be asked (the execution module not synced yet)."""
    rules = __context__.get(CONTEXT_KEY + ".rules")
    if rules is not None:
        return rules
    try:
        rules = events.CrashRules(beacon_config.salt_call(__salt__, beacon_config.loader_value(__opts__), events.RULES))
    except Exception as exc:  # noqa: BLE001 - a beacon must not die: try again at the next poll
        if __context__.get(CONTEXT_KEY + ".rules_failed") != str(exc):
            log.error("ccc_docker: %s failed (%s); the beacon waits for it", events.RULES, exc)
            __context__[CONTEXT_KEY + ".rules_failed"] = str(exc)
        return None
    __context__[CONTEXT_KEY + ".rules"] = rules
    return rules


def _registry():
    """Live watchers by beacon name, kept across beacon loaders in this minion process
    (``_ccc_beacon_config.registry``): the new watcher takes the old one's stream over, so no
    socket leaks and no restart around a pillar refresh goes unreported."""
    return beacon_config.registry(REGISTRY_MODULE).watchers


def _watcher(conf):
    """This beacon's watcher, made (or remade, when the endpoint changed) as needed; None when
    the endpoint cannot be watched (logged once per endpoint) or is not known yet, or the crash
    rules cannot be asked yet."""
    url = _pillar_url(time.monotonic()) if "from_pillar" in conf else conf.get("docker_url")
    tunables = {key: conf.get(key, default) for key, default in DEFAULTS.items()}
    watcher = __context__.get(CONTEXT_KEY)
    if url is None:
        return None
    if watcher is not None and not watcher.closed and watcher.url == url:
        watcher.min_interval, watcher.answer_timeout = tunables["min_interval"], tunables["answer_timeout"]
        watcher.died_interval = tunables["died_interval"]
        return watcher
    rules = _rules()
    if rules is None:
        return None
    name = conf.get("_beacon_name") or __virtualname__
    try:
        new = EngineWatcher(url, rules=rules, **tunables)
    except ValueError as exc:
        if __context__.get(CONTEXT_KEY + ".bad") != url:
            log.error("ccc_docker: %s; the beacon does nothing", exc)
            __context__[CONTEXT_KEY + ".bad"] = url
        return None
    old = watcher if watcher is not None and not watcher.closed else _registry().get(name)
    if old is not None and old is not new and not old.closed:
        new.inherit(old)
    _registry()[name] = new
    __context__[CONTEXT_KEY] = new
    log.info("ccc_docker: watching the Docker engine at %s", url)
    return new


def beacon(config):
    """
    Fire ``{"tag": "restarted", "engine": "restarted", "away_s": ...}`` when this node's Docker
    engine restarted (at most once per ``min_interval``), and ``{"tag": "died/<STACK>", "stack":
    ...}`` when a compute container crashed (at most once per ``died_interval`` per stack).

    CLI Example:

    .. code-block:: bash

        salt node1 beacons.add ccc_docker "[{'from_pillar': 'ccc'}, {'interval': 1}]"
    """
    watcher = _watcher(beacon_config.merge(config))
    if watcher is None:
        return []
    events = [{"tag": "restarted", **event} for event in watcher.poll()]
    return events + [{"tag": f"died/{stack}", "stack": stack} for stack in watcher.crashes()]


def close(config):
    """Close the events stream (Salt calls this on beacon refresh)."""
    watcher = __context__.pop(CONTEXT_KEY, None)
    name = beacon_config.merge(config).get("_beacon_name") or __virtualname__
    if watcher is not None:
        watcher.close()
        if _registry().get(name) is watcher:
            del _registry()[name]
