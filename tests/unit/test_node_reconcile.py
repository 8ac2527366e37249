"""A node's Docker engine restarted: the reactor (reactor/engine_restarted.sls) calls the runner's
``ccc.reconcile_node``, which applies ``containers`` in full on that node with at most one such
job queued or running per node (a fake master and a fake clock), beside the per-stack record."""

import importlib.util
import pathlib

import pytest
import yaml

import master_config
from support.site import sample_ccc

REPO = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("ccc_runner_nodes", REPO / "_runners" / "ccc.py")
ccc_runner = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ccc_runner)

CCCS = {node: sample_ccc(node) for node in ("node1", "node2", "node3")}
LIMITS = {"max_applies": 3, "window": 60, "job_timeout": 300}


class FakeClock:
    def __init__(self, now):
        self.now = now

    def time(self):
        return self.now


class FakeMaster:
    """Minions return a full reconcile ``duration`` s after its publish (``down`` ones never do
    and do not answer find_job); stack redeploys return at once."""

    def __init__(self, clock, duration, down=()):
        self.clock, self.duration, self.down = clock, duration, set(down)
        self.jobs = []  # (published, fun, minions)
        self.synced = []  # per reconcile: whether modules were synced first
        self.failing = 0

    def cccs(self):
        return CCCS

    def placement(self, stack):
        return ccc_runner.ccc_redeploy.placement_from(CCCS, stack)

    def returns(self, jid):
        published, fun, minions = self.jobs[int(jid)]
        if fun == "saltutil.find_job":
            return {minion: {"ret": {}} for minion in minions if minion not in self.down}
        if fun == "reconcile" and self.clock.now < published + self.duration:
            return {}
        return {minion: {"ret": {}} for minion in minions if minion not in self.down}

    def _job(self, fun, minions):
        self.jobs.append((self.clock.now, fun, minions))
        return str(len(self.jobs) - 1)

    def accepted(self, minion):
        return minion in CCCS or minion == "new-node"  # new-node: accepted, no pillar cached yet

    def reconcile(self, minion, sync=False):
        if self.failing:
            self.failing -= 1
            return None
        self.synced.append(sync)
        return self._job("reconcile", [minion])

    def publish(self, stack, minions, notice):
        return self._job("stack", minions), minions

    def time(self):
        return self.clock.now

    def find_job(self, minions, jid):
        return self._job("saltutil.find_job", minions)

    def reconciles(self, minion=None):
        return [published - 1000.0 for published, fun, minions in self.jobs
                if fun == "reconcile" and (minion is None or minions == [minion])]


@pytest.fixture
def runner(monkeypatch, tmp_path):
    clock = FakeClock(1000.0)
    monkeypatch.setattr(ccc_runner, "__opts__", {"cachedir": str(tmp_path), "ccc_redeploy": dict(LIMITS)},
                        raising=False)
    monkeypatch.setattr(ccc_runner, "time", clock)

    def start(**kwargs):
        master = FakeMaster(clock, **kwargs)
        monkeypatch.setattr(ccc_runner, "_Master", lambda: master)
        return clock, master
    return start


def test_a_restart_reconciles_the_node_in_full_at_once(runner):
    _, master = runner(duration=5)
    assert ccc_runner.reconcile_node("node1") == {"node": "node1", "action": "apply", "jid": "0"}
    assert master.jobs == [(1000.0, "reconcile", ["node1"])]


def test_requests_during_a_reconcile_give_one_more_after_it_never_a_pile_up(runner):
    clock, master = runner(duration=5)
    for second in range(20):  # e.g. a beacon per node firing, restarts in a row, manual runs
        clock.now = 1000.0 + second
        ccc_runner.reconcile_node("node1")
        if second % 2:
            ccc_runner.flush()
    for _ in range(30):
        clock.now += 2
        ccc_runner.flush()
    starts = master.reconciles("node1")
    # each once the one before returned (5 s), at most 3 per 60 s (the rate limit, per node)
    assert starts == [0.0, 5.0, 10.0, 61.0]
    assert ccc_runner.redeploy_status()["nodes"] == {}


def test_nodes_are_independent_and_stacks_keep_their_own_record(runner):
    clock, master = runner(duration=5)
    ccc_runner.reconcile_node("node1")
    ccc_runner.reconcile_node("node2")
    ccc_runner.redeploy("ana-main")
    ccc_runner.reconcile_node("node1")  # waits for node1's job only
    assert master.reconciles() == [0.0, 0.0]
    clock.now += 6
    assert ccc_runner.flush() == {"ana-main": "idle", "node:node1": "apply", "node:node2": "idle"}
    assert master.reconciles("node1") == [0.0, 6.0]
    assert sorted(ccc_runner.redeploy_status()["nodes"]) == ["node1"]


def test_a_node_that_stopped_answering_does_not_hold_its_next_reconcile_for_long(runner):
    clock, master = runner(duration=5, down={"node1"})
    ccc_runner.reconcile_node("node1")
    ccc_runner.reconcile_node("node1")
    for _ in range(10):
        clock.now += 2
        ccc_runner.flush()
    assert master.reconciles("node1") == [0.0, 12.0]  # probed PROBE_AFTER s after, read PROBE_WAIT s later


def test_a_failed_publish_is_retried_by_the_next_flush(runner):
    clock, master = runner(duration=1)
    master.failing = 1
    assert ccc_runner.reconcile_node("node2")["jid"] is None
    clock.now += 2
    assert ccc_runner.flush() == {"node:node2": "apply"} and master.reconciles() == [2.0]


@pytest.mark.parametrize("node, error", [
    ("node9", "not an accepted minion"),
    ("../node1", "not a minion id"),
    ("", "not a minion id"),
    (None, "not a minion id"),
])
def test_only_known_minions_are_reconciled(runner, node, error):
    _, master = runner(duration=1)
    assert ccc_runner.reconcile_node(node)["error"] == error
    assert not master.jobs and ccc_runner.redeploy_status()["nodes"] == {}


# --------------------------------------------------------------------------------------------
# The reactor


def render_reactor(tag, data):
    import salt.config
    import salt.utils.templates

    text = (REPO / "reactor" / "engine_restarted.sls").read_text()
    context = {"tag": tag, "data": data, "opts": salt.config.minion_config(None), "saltenv": "base", "sls": "",
               "grains": {}, "pillar": {}, "salt": {}}
    return yaml.safe_load(salt.utils.templates.render_jinja_tmpl(text, context))


def test_the_reactor_calls_the_runner_for_the_node_that_fired():
    assert render_reactor("salt/beacon/gpu-01.lab/ccc_docker/restarted", {"id": "gpu-01.lab", "away_s": 3.2}) == {
        "ccc-reconcile-node": {"runner.ccc.reconcile_node": [{"args": [{"node": "gpu-01.lab"}]}]}}


@pytest.mark.parametrize("tag, data", [
    ("salt/beacon/node1/ccc_docker/", {"id": "node1", "error": "beacon failed"}),  # Salt's beacon error event
    ("salt/beacon/node2/ccc_docker/restarted", {"id": "node1"}),
    ("salt/beacon/node1/ccc_docker/restarted", {"id": ["node1"]}),
])
def test_the_reactor_ignores_anything_else(tag, data):
    assert render_reactor(tag, data) is None


@pytest.mark.parametrize("node", ["x y", "node1\n", "*", "node1: {evil: 1}", "-rf"])
def test_an_odd_minion_id_reaches_the_runner_as_data_and_the_runner_refuses_it(runner, node):
    """The reactor checks no pattern (the runner does, once); what it passes is a JSON string,
    never YAML text, so an id cannot add keys or states."""
    _, master = runner(duration=5)
    rendered = render_reactor(f"salt/beacon/{node}/ccc_docker/restarted", {"id": node})
    assert rendered == {"ccc-reconcile-node": {"runner.ccc.reconcile_node": [{"args": [{"node": node}]}]}}
    assert ccc_runner.reconcile_node(node) == {"node": node, "action": None, "error": "not a minion id"}
    assert master.jobs == []


def test_the_master_config_routes_the_beacons_event_to_the_reactor():
    reactors = {}
    for item in master_config.master_config(REPO)["reactor"]:
        reactors.update(item)
    assert reactors["salt/beacon/*/ccc_docker/restarted"] == [str(REPO / "reactor" / "engine_restarted.sls")]
    assert "match(" not in (REPO / "reactor" / "engine_restarted.sls").read_text()  # one check: the runner's


def render_sls(path, **context):
    import salt.config
    import salt.utils.templates

    base = {"opts": salt.config.minion_config(None), "saltenv": "base", "sls": "", "grains": {}, "pillar": {},
            "salt": {}}
    return yaml.safe_load(salt.utils.templates.render_jinja_tmpl((REPO / path).read_text(), dict(base, **context)))


@pytest.mark.parametrize("node", ["node1", "x y", "*", "node1: {evil: 1}"])
def test_a_minion_start_passes_the_id_to_the_runner_as_data(node):
    """reactor/minion_start.sls passes the id as a JSON string (no keys or states can be added);
    the runner checks it and targets exactly that minion ("*" reconciles no other node)."""
    reaction = render_sls("reactor/minion_start.sls", tag=f"salt/minion/{node}/start", data={"id": node})
    assert reaction == {"ccc-node-start": {"runner.ccc.node_start": [{"args": [{"node": node}]}]}}


@pytest.mark.parametrize("tag, data", [
    ("salt/minion/node2/start", {"id": "node1"}),    # the tag names another minion than the data
    ("salt/minion/node1/start", {"id": ["node1"]}),
    ("salt/minion/node1/start", {}),
    ("salt/minion/node1/start/x", {"id": "node1"}),
])
def test_a_start_event_whose_tag_and_data_disagree_causes_nothing(tag, data):
    assert render_sls("reactor/minion_start.sls", tag=tag, data=data) is None


@pytest.mark.parametrize("node, error", [
    ("node9", "not an accepted minion"),
    ("*", "not a minion id"),
    ("node1\n", "not a minion id"),
    ("x y", "not a minion id"),
    (None, "not a minion id"),
])
def test_a_start_of_an_unknown_or_odd_minion_is_refused(runner, node, error):
    _, master = runner(duration=1)
    assert ccc_runner.node_start(node) == {"node": node, "action": None, "error": error}
    assert master.jobs == [] and ccc_runner.redeploy_status()["nodes"] == {}


def test_a_start_syncs_the_modules_and_reconciles_in_one_job_also_without_cached_pillar(runner):
    _, master = runner(duration=5)
    assert ccc_runner.node_start("new-node") == {"node": "new-node", "action": "apply", "jid": "0"}
    assert master.jobs == [(1000.0, "reconcile", ["new-node"])] and master.synced == [True]
    ccc_runner.reconcile_node("node1")
    assert master.synced == [True, False]  # an engine restart: no sync


def test_a_minion_restarting_in_a_loop_gets_few_reconciles(runner):
    """Each restart loses the queued job (the minion no longer has it): coalesced, it is
    probed before the next goes; rate-limited per node, 3 per 60 s at most."""
    clock, master = runner(duration=5, down={"node1"})
    for second in range(120):  # a start event every second for two minutes
        clock.now = 1000.0 + second
        ccc_runner.node_start("node1")
        if second % 2:
            ccc_runner.flush()
    starts = master.reconciles("node1")
    assert all(len([t for t in starts if first <= t < first + 60]) <= 3 for first in starts), starts
    assert 2 <= len(starts) <= 6 and all(master.synced)


def test_a_sync_asked_during_a_reconcile_goes_with_the_next_one(runner):
    clock, master = runner(duration=5)
    ccc_runner.reconcile_node("node1")
    clock.now += 1
    assert ccc_runner.node_start("node1")["action"] == "wait"
    clock.now += 5
    ccc_runner.flush()
    assert master.reconciles("node1") == [0.0, 6.0] and master.synced == [False, True]
