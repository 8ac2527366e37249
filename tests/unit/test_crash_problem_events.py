"""The ``ccc_docker`` beacon tells the master when a compute container crashes
(``salt/beacon/<node>/ccc_docker/died/<STACK>``), so the user's report says why within seconds:
which Docker events count (a crash, not a stop), the chunked event stream read from a real unix
socket, and at most one event per stack per ``died_interval``."""

import json
import logging
import time

import pytest
from support.beacons import load_beacon
from support.docker_events import SocketEngine

import ccc_containers  # noqa: E402  (support.site puts _modules on the path)

beacon_mod = load_beacon("ccc_docker.py", "ccc_docker_beacon_crashes")
# The deployment's rules, as the beacon asks them from the execution module on a minion.
RULES = beacon_mod.events.CrashRules(ccc_containers.crash_rules())


@pytest.fixture(autouse=True)
def quiet():
    level = beacon_mod.log.level
    beacon_mod.log.setLevel(logging.CRITICAL)
    yield
    beacon_mod.log.setLevel(level)


def event(action, stack="ana-main", code="1"):
    attributes = {"ccc.stack": stack, "ccc.managed-by": "ccc-salt", "name": stack}
    if action == "die":
        attributes["exitCode"] = code
    return json.dumps({"Type": "container", "Action": action, "status": action,
                       "Actor": {"ID": "abc", "Attributes": attributes}}).encode()


def test_a_crash_or_an_oom_counts_a_stop_does_not():
    assert beacon_mod.events.died_stack(event("die", code="1"), RULES) == "ana-main"
    assert beacon_mod.events.died_stack(event("die", code="2"), RULES) == "ana-main"
    assert beacon_mod.events.died_stack(event("oom"), RULES) == "ana-main"
    for code in ("0", "137", "143", "255"):  # docker stop, dockerd stopping or gone, a recreate's stop
        assert beacon_mod.events.died_stack(event("die", code=code), RULES) is None
    assert beacon_mod.events.died_stack(event("die", stack="../../x"), RULES) is None  # never a tag part
    assert beacon_mod.events.died_stack(event("start"), RULES) is None
    assert beacon_mod.events.died_stack(b"{not json", RULES) is None


def test_the_rules_are_the_deployments():
    """One definition: the label ccc-salt puts on its containers, the STACK_NAME pattern, and the
    stop exit codes ccc_problems reads from ``docker inspect`` (numbers; Docker's events send text)."""
    assert RULES.filter == '{"type":["container"],"event":["die","oom"],"label":["ccc.managed-by=ccc-salt"]}'
    assert RULES.stops == {0, 137, 143, 255}
    assert beacon_mod.events.died_stack(event("die", code="not a number"), RULES) == "ana-main"
    assert beacon_mod.events.died_stack(event("die", stack="a" * 64), RULES) is None  # longer than a STACK_NAME


def poll_until(watcher, until, timeout=5):
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline and not until(seen):
        watcher.poll()
        seen += watcher.crashes()
        time.sleep(0.01)
    return seen


def test_crashes_come_from_the_real_stream_once_per_stack_per_interval(tmp_path):
    sock = tmp_path / "docker.sock"
    engine = SocketEngine(sock)
    watcher = beacon_mod.EngineWatcher(f"unix://{sock}", died_interval=1.0, rules=RULES)
    poll_until(watcher, lambda _: engine.conns and watcher.answering)
    assert "die" in engine.requests[0] and "ccc.managed-by%3Dccc-salt" in engine.requests[0]
    engine.send(event("die", "ana-main"))
    engine.send(event("die", "ana-main"))  # Docker restarts it at once: it dies again
    engine.send(event("die", "bor-main", code="143"))  # stopped, not crashed
    engine.send(event("oom", "bor-main"))
    started = time.monotonic()
    assert poll_until(watcher, lambda seen: len(seen) >= 2) == ["ana-main", "bor-main"]
    engine.send(event("die", "ana-main"))
    assert poll_until(watcher, bool, timeout=0.5) == []  # within died_interval: held back, not dropped
    assert poll_until(watcher, bool) == ["ana-main"]
    assert time.monotonic() - started >= 1.0
    assert watcher.answering  # events on the stream are not a restart of the engine
    engine.kill()
    watcher.close()


def test_the_beacon_fires_one_tag_per_crashed_stack():
    class Watcher:
        closed, url = False, "unix:///run/docker.sock"

        def poll(self):
            return []

        def crashes(self):
            return ["ana-main"]
    beacon_mod.__context__ = {beacon_mod.CONTEXT_KEY: Watcher()}
    beacon_mod.__context__[beacon_mod.CONTEXT_KEY].min_interval = 30
    try:
        fired = beacon_mod.beacon([{"docker_url": "unix:///run/docker.sock"}])
    finally:
        del beacon_mod.__context__
    assert fired == [{"tag": "died/ana-main", "stack": "ana-main"}]
