"""The ccc_docker beacon (_beacons/ccc_docker.py): EngineWatcher on a fake clock with fake streams
(restarts fast and slow, a crash loop, an engine that accepts but does not answer), the real
non-blocking EventStream against a fake engine on a unix socket, and the thin Salt wrapper."""

import copy
import itertools
import logging
import time
import urllib.parse

import pytest
from support.beacons import beacon_dunders, load_beacon
from support.docker_events import SocketEngine

import ccc_containers
import ccc_pillar

beacon_mod = load_beacon("ccc_docker.py", "ccc_docker_beacon")
EngineWatcher = beacon_mod.EngineWatcher
# The deployment's rules, as the beacon asks them from the execution module on a minion.
RULES = beacon_mod.events.CrashRules(ccc_containers.crash_rules())
EVENTS_FILTER = RULES.filter


@pytest.fixture(autouse=True)
def quiet_warnings():
    """The watcher logs every restart; not here (Salt's deferred log handler would print the
    records to a closed stream at exit)."""
    loggers = [beacon_mod.log, logging.getLogger("salt.loaded.ext.beacons.ccc_docker")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    yield
    for logger, level in zip(loggers, levels):
        logger.setLevel(level)


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class FakeStream:
    def __init__(self, engine):
        self.engine, self.status, self.checks = engine, "waiting", 0

    def check(self):
        self.checks += 1
        if self.status == "waiting" and self.engine.answers:
            self.status = self.engine.answers
        return self.status

    def close(self):
        self.status = "closed"


class FakeEngine:
    """A Docker engine as the watcher sees it: up (streams answer), down (opening fails), hung
    (accepts, never answers) or refusing the stream."""

    def __init__(self, up=True):
        self.up, self.answers, self.streams = up, "open", []

    def open(self):
        if not self.up:
            raise ConnectionRefusedError(111, "ECONNREFUSED")
        self.streams.append(FakeStream(self))
        return self.streams[-1]

    def crash(self):
        """dockerd dies: every stream it served ends."""
        self.up = False
        for stream in self.streams:
            if stream.status != "refused":
                stream.status = "closed"

    def start(self):
        self.up = True


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def engine():
    return FakeEngine()


@pytest.fixture
def watcher(clock, engine):
    return EngineWatcher("unix:///run/docker.sock", clock=clock, opener=engine.open)


def run(watcher, clock, seconds, step=1.0):
    """Poll every ``step`` s for ``seconds``; the events with the time they fired."""
    fired = []
    for _ in range(int(seconds / step)):
        clock.now += step
        fired += [(clock.now, event) for event in watcher.poll()]
    return fired


def test_the_first_stream_fires_nothing_and_an_idle_engine_costs_one_check_per_poll(watcher, clock, engine):
    assert watcher.poll() == [] and watcher.answering
    assert run(watcher, clock, 100) == []
    assert len(engine.streams) == 1 and engine.streams[0].checks == 101


def test_a_restart_faster_than_the_poll_fires_once(watcher, clock, engine):
    watcher.poll()
    clock.now += 1
    engine.crash()
    engine.start()  # back before the next poll
    assert watcher.poll() == [{"engine": "restarted", "away_s": 0.0}]
    assert run(watcher, clock, 60) == []
    assert len(engine.streams) == 2


def test_an_engine_away_for_a_while_fires_when_it_answers_again(watcher, clock, engine):
    watcher.poll()
    engine.crash()
    assert run(watcher, clock, 20) == []
    engine.start()
    engine.answers = None  # a starting dockerd accepts before it answers
    assert run(watcher, clock, 5) == []
    engine.answers = "open"
    assert run(watcher, clock, 1) == [(1026.0, {"engine": "restarted", "away_s": 25.0})]


def test_an_engine_that_was_down_when_the_beacon_started_fires_when_it_comes(clock, engine):
    engine.up = False
    watcher = EngineWatcher("unix:///run/docker.sock", clock=clock, opener=engine.open)
    assert watcher.poll() == [] and not watcher.answering
    engine.start()
    assert run(watcher, clock, 1) == [(1001.0, {"engine": "restarted", "away_s": 1.0})]


def test_a_crash_loop_fires_at_most_once_per_min_interval_and_reports_the_last_restart(watcher, clock, engine):
    watcher.poll()
    fired = []
    for _ in range(60):  # dockerd dies every 2 s for 2 minutes
        engine.crash()
        fired += run(watcher, clock, 1)
        engine.start()
        fired += run(watcher, clock, 1)
    times = [when for when, _ in fired]
    assert all(later - earlier >= 30 for earlier, later in itertools.pairwise(times))
    assert 4 <= len(times) <= 5
    fired += run(watcher, clock, 60)  # the loop stopped: its last restart is still reported, once
    assert len(fired) == len(times) + 1 and fired[-1][0] - times[-1] == 30
    assert run(watcher, clock, 120) == []


def test_a_connection_that_is_never_answered_is_dropped_after_answer_timeout(clock, engine):
    watcher = EngineWatcher("unix:///run/docker.sock", answer_timeout=10, clock=clock, opener=engine.open)
    watcher.poll()
    engine.crash()
    engine.start()
    engine.answers = None  # hung: accepts, never answers
    assert run(watcher, clock, 25) == []
    assert len(engine.streams) == 4  # the old one, then a new one every answer_timeout
    engine.answers = "open"
    assert run(watcher, clock, 1) == [(1026.0, {"engine": "restarted", "away_s": 25.0})]


def test_an_engine_that_refuses_the_stream_is_asked_again_rarely(clock, engine):
    engine.answers = "refused"
    watcher = EngineWatcher("unix:///run/docker.sock", clock=clock, opener=engine.open)
    assert run(watcher, clock, 120) == []
    assert len(engine.streams) == 2  # at 1001 and 1061 s (REFUSED_RETRY)


def test_a_new_watcher_takes_over_the_stream_and_a_pending_restart(watcher, clock, engine):
    watcher.poll()
    clock.now += 1
    engine.crash()
    engine.start()
    assert watcher.poll()  # fired at 1001
    clock.now += 5
    engine.crash()
    engine.start()
    watcher.poll()  # seen, held back by min_interval
    new = EngineWatcher("unix:///run/docker.sock", clock=clock, opener=engine.open)
    new.inherit(watcher)
    assert watcher.closed and watcher.stream is None and new.stream is engine.streams[-1]
    assert run(new, clock, 30)[0] == (1031.0, {"engine": "restarted", "away_s": 0.0})
    assert len(engine.streams) == 3  # no new connection for the takeover


# --------------------------------------------------------------------------------------------
# The real stream against a fake engine on a unix socket


def wait_polls(watcher, until, timeout=5):
    deadline = time.monotonic() + timeout
    fired = []
    while time.monotonic() < deadline:
        fired += watcher.poll()
        if until(fired):
            break
        time.sleep(0.01)
    return fired


def test_the_event_stream_sees_a_real_socket_close_and_reopen(tmp_path):
    sock = tmp_path / "docker.sock"
    engine = SocketEngine(sock)
    watcher = EngineWatcher(f"unix://{sock}", rules=RULES)
    assert wait_polls(watcher, lambda _: watcher.answering) == [] and watcher.answering
    assert engine.requests == [f"GET /events?filters={urllib.parse.quote(EVENTS_FILTER, safe='')} HTTP/1.1"]
    engine.kill()
    engine = SocketEngine(sock)  # a restart between two polls
    fired = wait_polls(watcher, bool)
    assert fired == [{"engine": "restarted", "away_s": 0.0}]
    engine.kill()
    watcher.close()


def test_an_engine_that_accepts_but_does_not_answer_never_blocks_the_poll(tmp_path):
    sock = tmp_path / "docker.sock"
    engine = SocketEngine(sock, answer=False)
    watcher = EngineWatcher(f"unix://{sock}", rules=RULES)
    started = time.monotonic()
    for _ in range(100):
        assert watcher.poll() == []
    assert time.monotonic() - started < 0.5 and not watcher.answering
    engine.kill()
    watcher.close()


def test_a_missing_socket_costs_little_and_fires_nothing(tmp_path):
    watcher = EngineWatcher(f"unix://{tmp_path}/none.sock", rules=RULES)
    assert all(watcher.poll() == [] for _ in range(100)) and watcher.away_since is not None


def test_an_idle_poll_costs_microseconds_of_cpu(tmp_path):
    sock = tmp_path / "docker.sock"
    engine = SocketEngine(sock)
    watcher = EngineWatcher(f"unix://{sock}", rules=RULES)
    wait_polls(watcher, lambda _: watcher.answering)
    polls = 20000
    started = time.process_time()
    for _ in range(polls):
        watcher.poll()
    per_poll = (time.process_time() - started) / polls
    print(f"idle poll: {per_poll * 1e6:.1f} us CPU")
    assert per_poll < 200e-6
    engine.kill()
    watcher.close()


# --------------------------------------------------------------------------------------------
# The Salt wrapper


PILLAR_CONFIG = [{"from_pillar": "ccc"}, {"interval": 1}, {"disable_during_state_run": False}]


@pytest.mark.parametrize("config", [
    PILLAR_CONFIG,
    [{"docker_url": "unix:///var/run/docker.sock"}, {"min_interval": 60}, {"answer_timeout": 10}],
    [{"docker_url": "tcp://10.0.0.5:2375"}],
])
def test_validate_accepts(config):
    assert beacon_mod.validate(config) == (True, "valid beacon configuration")


@pytest.mark.parametrize("config, message", [
    ({"from_pillar": "ccc"}, "list of one-key dicts"),
    ([{"from_pillar": "ccc"}, {"disable_during_state_run": True}], "disable_during_state_run"),
    ([{"from_pillar": "ccc"}, {"docker_url": "unix:///x.sock"}], "exactly one of"),
    ([{"interval": 1}], "exactly one of"),
    ([{"from_pillar": "ccc"}, {"poll": 2}], "unknown keys"),
    ([{"from_pillar": "ccc"}, {"min_interval": -1}], "min_interval"),
    ([{"from_pillar": "ccc"}, {"answer_timeout": "10"}], "answer_timeout"),
    ([{"docker_url": "https://10.0.0.5:2376"}], "unsupported docker_url"),
    ([{"docker_url": "unix://relative.sock"}], "absolute socket path"),
    ([{"docker_url": "tcp://10.0.0.5"}], "host and a port"),
])
def test_validate_refuses(config, message):
    valid, comment = beacon_mod.validate(config)
    assert not valid
    assert message in comment


@pytest.fixture
def salt_dunders(monkeypatch):
    """The beacon's loader dunders, with the real ``ccc_containers.settings`` and ``crash_rules``
    on the same pillar (the beacon reads ccc:node:docker_url and the crash rules through them, as
    on a minion)."""
    beacon_dunders(monkeypatch, beacon_mod, "settings", "crash_rules")
    yield beacon_mod
    beacon_mod.close([])


def test_the_default_endpoint_is_the_deployments(salt_dunders):
    assert beacon_mod.beacon(PILLAR_CONFIG) == []
    assert beacon_mod.__context__[beacon_mod.CONTEXT_KEY].url == ccc_pillar.NODE_DEFAULTS["docker_url"]


def test_the_endpoint_is_asked_for_at_most_every_recheck_interval(salt_dunders, monkeypatch):
    calls = []
    monkeypatch.setattr(beacon_mod, "SETTINGS_RECHECK", 30.0)
    beacon_mod.__salt__["ccc_containers.settings"] = lambda: calls.append(1) or ccc_containers.settings()
    for _ in range(5):
        assert beacon_mod.beacon(PILLAR_CONFIG) == []
    assert len(calls) == 1
    monkeypatch.setattr(beacon_mod, "__context__", {})  # a pillar refresh rebuilds the beacon loader
    beacon_mod.beacon(PILLAR_CONFIG)
    assert len(calls) == 2


def test_without_the_execution_module_the_beacon_waits_and_says_so_once(salt_dunders, monkeypatch):
    errors = []
    monkeypatch.setattr(beacon_mod.log, "error", lambda msg, *args: errors.append(msg % args))
    del beacon_mod.__salt__["ccc_containers.settings"]  # a minion before its first saltutil.sync_all
    for _ in range(3):
        assert beacon_mod.beacon(PILLAR_CONFIG) == []
    assert beacon_mod.CONTEXT_KEY not in beacon_mod.__context__
    assert len(errors) == 1 and "ccc_containers.settings" in errors[0]


def test_without_the_crash_rules_the_beacon_waits_and_says_so_once(salt_dunders, monkeypatch):
    errors = []
    monkeypatch.setattr(beacon_mod.log, "error", lambda msg, *args: errors.append(msg % args))
    del beacon_mod.__salt__["ccc_containers.crash_rules"]  # an execution module synced before the beacon's
    for _ in range(3):
        assert beacon_mod.beacon([{"docker_url": "unix:///run/docker.sock"}]) == []
    assert beacon_mod.CONTEXT_KEY not in beacon_mod.__context__
    assert len(errors) == 1 and "ccc_containers.crash_rules" in errors[0]
    beacon_mod.__salt__["ccc_containers.crash_rules"] = ccc_containers.crash_rules  # synced now: it watches
    assert beacon_mod.beacon([{"docker_url": "unix:///run/docker.sock"}]) == []
    assert beacon_mod.__context__[beacon_mod.CONTEXT_KEY].url == "unix:///run/docker.sock"


def test_beacon_from_pillar_watches_the_nodes_docker_url_and_fires_a_tagged_event(tmp_path, salt_dunders):
    sock = tmp_path / "docker.sock"
    engine = SocketEngine(sock)
    beacon_mod.__pillar__["ccc"] = {"node": {"docker_url": f"unix://{sock}"}}
    assert beacon_mod.beacon(PILLAR_CONFIG) == []
    watcher = beacon_mod.__context__[beacon_mod.CONTEXT_KEY]
    assert watcher.url == f"unix://{sock}" and watcher.min_interval == 30.0
    wait_polls(watcher, lambda _: watcher.answering)
    engine.kill()
    engine = SocketEngine(sock)
    deadline, fired = time.monotonic() + 5, []
    while not fired and time.monotonic() < deadline:
        fired = beacon_mod.beacon(PILLAR_CONFIG)
    assert fired == [{"tag": "restarted", "engine": "restarted", "away_s": 0.0}]
    beacon_mod.close(PILLAR_CONFIG)
    assert watcher.closed and beacon_mod.CONTEXT_KEY not in beacon_mod.__context__
    engine.kill()


def test_beacon_defaults_to_the_standard_socket_and_follows_a_changed_url(tmp_path, salt_dunders, monkeypatch):
    monkeypatch.setattr(beacon_mod, "SETTINGS_RECHECK", 0.0)  # a minion looks every 30 s, and at each refresh
    assert beacon_mod.beacon(PILLAR_CONFIG) == []
    assert beacon_mod.__context__[beacon_mod.CONTEXT_KEY].url == "unix:///var/run/docker.sock"
    beacon_mod.__pillar__["ccc"] = {"node": {"docker_url": f"unix://{tmp_path}/other.sock"}}
    old = beacon_mod.__context__[beacon_mod.CONTEXT_KEY]
    assert beacon_mod.beacon(PILLAR_CONFIG) == []
    assert old.closed and beacon_mod.__context__[beacon_mod.CONTEXT_KEY].url.endswith("/other.sock")


def test_an_unwatchable_url_from_pillar_does_nothing_and_says_so_once(salt_dunders, monkeypatch):
    errors = []
    monkeypatch.setattr(beacon_mod.log, "error", lambda msg, *args: errors.append(msg % args))
    beacon_mod.__pillar__["ccc"] = {"node": {"docker_url": "ssh://admin@node1"}}
    for _ in range(3):
        assert beacon_mod.beacon(PILLAR_CONFIG) == []
    assert len(errors) == 1 and "unsupported docker_url" in errors[0]


def test_a_beacon_loader_rebuilt_without_close_keeps_the_stream(tmp_path, salt_dunders, monkeypatch):
    """Salt 3008 rebuilds the beacon loader (fresh __context__) on a pillar refresh without
    calling close() for pillar-configured beacons: the new watcher takes the old stream over."""
    sock = tmp_path / "docker.sock"
    engine = SocketEngine(sock)
    config = [{"docker_url": f"unix://{sock}"}]
    beacon_mod.beacon(config)
    old = beacon_mod.__context__[beacon_mod.CONTEXT_KEY]
    wait_polls(old, lambda _: old.answering)
    stream = old.stream
    monkeypatch.setattr(beacon_mod, "__context__", {})
    assert beacon_mod.beacon(config) == []
    new = beacon_mod.__context__[beacon_mod.CONTEXT_KEY]
    assert old.closed and new is not old and new.stream is stream and len(engine.requests) == 1
    engine.kill()


def test_salt_loads_the_beacon_from_the_generic_pillar_and_fires_the_reactors_tag(tmp_path):
    """From pillar/ccc/beacons.sls through salt.beacons.Beacon.process (as the minion's main loop
    runs it): the tag reactor/engine_restarted.sls is registered for, and no user data."""
    import salt.beacons
    import salt.config
    import salt.loader
    import salt.pillar

    from support.site import SaltNode

    sock = tmp_path / "docker.sock"
    engine = SocketEngine(sock)
    node = SaltNode(tmp_path / "salt", "node1", f"unix://{sock}", tmp_path / "storage")
    opts = salt.config.minion_config(str(node.config_dir / "minion"))
    opts["grains"] = salt.loader.grains(opts)
    opts["pillar"] = salt.pillar.get_pillar(opts, opts["grains"], "node1", "base").compile_pillar()
    functions = salt.loader.minion_mods(opts)
    config = functions["config.merge"]("beacons", opts["beacons"], omit_opts=True)
    config = {"ccc_docker": config["ccc_docker"]}
    beacons = salt.beacons.Beacon(opts, functions)
    events = []
    try:
        for _ in range(3):  # the first call only starts the interval counter
            events += beacons.process(copy.deepcopy(config), opts["grains"])
            time.sleep(0.05)
        assert events == []
        engine.kill()
        engine = SocketEngine(sock)
        for _ in range(3):
            events += beacons.process(copy.deepcopy(config), opts["grains"])
            time.sleep(0.05)
    finally:
        beacons.beacons["ccc_docker.close"](config["ccc_docker"])
        engine.kill()
    assert [(e["tag"], e["beacon_name"], sorted(e["data"])) for e in events] == [
        ("salt/beacon/node1/ccc_docker/restarted", "ccc_docker", ["away_s", "engine", "id"])]
    assert events[0]["data"]["engine"] == "restarted" and events[0]["data"]["id"] == "node1"
