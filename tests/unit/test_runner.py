"""The master-side runner picks exactly the nodes where an edited stack may run, and coalesces
and rate-limits the redeploys (decisions on a fake clock and a fake master)."""

import importlib.util
import pathlib
import threading
import time

import pytest
import yaml

from support.site import sample_ccc

REPO = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("ccc_runner", REPO / "_runners" / "ccc.py")
ccc_runner = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ccc_runner)

CCCS = {node: sample_ccc(node) for node in ("node1", "node2", "node3")}


@pytest.mark.parametrize("stack, expected", [
    ("ana-main", ["node1", "node2", "node3"]),     # researcher: allowed everywhere
    ("cene-thesis", ["node3"]),                    # student: node3 only
    ("dara-old", ["node3"]),                       # disabled stacks still name their nodes
    ("no-such-stack", []),
])
def test_targets_are_the_nodes_where_the_stack_may_run(stack, expected):
    assert ccc_runner._targets_for(CCCS, stack) == expected


def test_allowed_nodes_include_the_container_exceptions():
    cccs = {node: dict(sample_ccc(node)) for node in ("node1", "node2", "node3")}
    for ccc in cccs.values():
        ccc["containers"] = [dict(c, ALLOWED_NODES=["node1"]) if c["STACK_NAME"] == "cene-thesis" else c
                             for c in ccc["containers"]]
    assert ccc_runner._targets_for(cccs, "cene-thesis") == ["node1", "node3"]


def test_a_node_named_differently_from_its_minion_id_is_matched_by_name():
    ccc = dict(sample_ccc("node3"), node={"name": "node3"})
    assert ccc_runner._targets_for({"gpu-box-17.lab": ccc}, "cene-thesis") == ["gpu-box-17.lab"]


# --- coalescing and rate limit (pure decision, fake clock) ----------------------------------

LIMITS = {"max_applies": 3, "window": 60, "job_timeout": 300}


def test_an_edit_with_nothing_in_flight_is_applied():
    action, entry = ccc_runner._decide({"pending": True}, [], set(), 100.0, LIMITS)
    assert action == "apply" and entry["pending"]


def test_an_edit_during_a_job_waits_until_all_its_minions_returned():
    entry = {"pending": True, "jid": "j1", "targets": ["node1", "node2"], "started": 100.0}
    assert ccc_runner._decide(entry, [100.0], {"node1"}, 110.0, LIMITS)[0] == "wait"
    action, after = ccc_runner._decide(entry, [100.0], {"node1", "node2"}, 111.0, LIMITS)
    assert action == "apply" and after["jid"] is None
    assert entry["jid"] == "j1"  # the caller's record is not changed


def test_a_job_that_never_returns_counts_as_ended_after_the_timeout():
    entry = {"pending": True, "jid": "j1", "targets": ["node1", "node2"], "started": 100.0}
    assert ccc_runner._decide(entry, [], {"node1"}, 399.0, LIMITS)[0] == "wait"
    assert ccc_runner._decide(entry, [], {"node1"}, 400.0, LIMITS)[0] == "apply"


def test_a_finished_job_with_nothing_pending_is_forgotten():
    entry = {"pending": False, "jid": "j1", "targets": ["node1"], "started": 100.0}
    assert ccc_runner._decide(entry, [100.0], {"node1"}, 105.0, LIMITS)[0] == "idle"


def test_over_the_rate_limit_the_stack_is_held_until_the_window_allows():
    applies = [100.0, 110.0, 120.0]
    action, entry = ccc_runner._decide({"pending": True}, applies, set(), 130.0, LIMITS)
    assert action == "hold" and entry["held_since"] == 130.0
    action, entry = ccc_runner._decide(entry, applies, set(), 159.0, LIMITS)
    assert action == "hold" and entry["held_since"] == 130.0  # held since the first refusal
    action, entry = ccc_runner._decide(entry, applies, set(), 160.0, LIMITS)
    assert action == "apply"
    notice = ccc_runner._notice_for(entry, 160.0, LIMITS)
    assert "3 per 60 s" in notice and "waited 30 s" in notice and len(notice) <= 300
    assert ccc_runner._notice_for({"pending": True}, 160.0, LIMITS) is None


@pytest.mark.parametrize("given, expected", [
    (None, ccc_runner.REDEPLOY_DEFAULTS),
    ({"max_applies": 2, "window": 10}, dict(ccc_runner.REDEPLOY_DEFAULTS, max_applies=2, window=10)),
    ({"max_applies": 0, "window": "x", "job_timeout": True}, ccc_runner.REDEPLOY_DEFAULTS),
    ("nonsense", ccc_runner.REDEPLOY_DEFAULTS),
])
def test_limits_come_from_the_master_config(given, expected):
    assert ccc_runner._limits({"ccc_redeploy": given}) == expected


def test_the_user_of_a_stack_comes_from_the_cached_pillar():
    assert ccc_runner._user_for(CCCS, "bor-main") == "bor.kralj@example.org"
    assert ccc_runner._user_for(CCCS, "no-such-stack") is None


class FakeMaster:
    """Pillar, job cache and publisher of a master whose minions return each job ``duration`` s
    after its publish, with changes to the stack's container or without; except ``busy`` ones
    (still running it), ``lost`` ones (restarted: no longer have it) and ``down`` ones (silent)."""

    def __init__(self, clock, duration, changes=True, busy=(), lost=(), down=()):
        self.clock, self.duration, self.changes = clock, duration, changes
        self.busy, self.lost, self.down = set(busy), set(lost), set(down)
        self.jobs = []  # (published, fun, minions, notice or the jid asked about)
        self.failing_publishes = 0

    def cccs(self):
        return CCCS

    def placement(self, stack):
        return ccc_runner.ccc_redeploy.placement_from(self.cccs(), stack)

    def returns(self, jid):
        published, fun, minions, _ = self.jobs[int(jid)]
        if fun == "saltutil.find_job":  # answered at once: the job's data while the minion has it
            return {minion: {"ret": {"jid": "..."} if minion in self.busy else {}}
                    for minion in minions if minion not in self.down}
        if self.clock.now < published + self.duration:
            return {}
        state = {"ccc_container_|-ccc-container-ana-main_|-ana-main_|-running":
                 {"result": True, "changes": {"recreated": {}} if self.changes else {}}}
        return {minion: {"ret": state} for minion in minions if minion not in self.busy | self.lost | self.down}

    def publish(self, stack, minions, notice):
        if self.failing_publishes:
            self.failing_publishes -= 1
            return None, minions
        self.jobs.append((self.clock.now, "state.apply", minions, notice))
        return str(len(self.jobs) - 1), minions

    def time(self):
        return self.clock.now

    def find_job(self, minions, jid):
        self.jobs.append((self.clock.now, "saltutil.find_job", minions, jid))
        return str(len(self.jobs) - 1)

    def applies(self):
        return [(published - 1000.0, notice) for published, fun, _, notice in self.jobs if fun == "state.apply"]


class FakeClock:
    def __init__(self, now):
        self.now = now

    def time(self):
        return self.now


@pytest.fixture
def runner(monkeypatch, tmp_path):
    """The runner on a fake master with a fake clock (1000.0 s); ``start(**master_kwargs)``."""
    clock = FakeClock(1000.0)
    monkeypatch.setattr(ccc_runner, "__opts__", {"cachedir": str(tmp_path), "ccc_redeploy": dict(LIMITS)},
                        raising=False)
    monkeypatch.setattr(ccc_runner, "time", clock)

    def start(**kwargs):
        master = FakeMaster(clock, **kwargs)
        monkeypatch.setattr(ccc_runner, "_Master", lambda: master)
        return clock, master
    return start


def test_a_save_every_second_is_coalesced_rate_limited_and_ends_applied(runner):
    clock, master = runner(duration=3)
    for second in range(20):  # an event per second, the flush schedule every 2 s
        clock.now = 1000.0 + second
        ccc_runner.redeploy("ana-main")
        if second % 2:
            ccc_runner.flush()
    for _ in range(40):  # no more saves: the pending edit still goes out, once the window allows
        clock.now += 2
        ccc_runner.flush()
    starts = [start for start, _ in master.applies()]
    assert starts[:3] == [0.0, 3.0, 7.0]  # coalesced: the next job at the first flush after the previous returned
    assert len(starts) == 4 and starts[3] >= 60.0  # then held by the limit (3 per 60 s)
    assert master.applies()[0][1] is None and "waited" in master.applies()[3][1]
    assert ccc_runner.redeploy_status()["stacks"] == {}


def test_touching_an_unchanged_file_twice_a_second_gets_no_more_applies_than_the_limit(runner):
    """Each touch is a new file version; applies that change nothing count too, or a touch
    flood would be an apply flood."""
    clock, master = runner(duration=1, changes=False)
    for tick in range(240):  # 120 s: a touch every 0.5 s, the flush schedule every 2 s
        clock.now = 1000.0 + tick / 2
        ccc_runner.redeploy("ana-main", version=f"{1000 + tick}:20:7")
        if tick % 4 == 3:
            ccc_runner.flush()
    starts = [start for start, _ in master.applies()]
    assert all(len([t for t in starts if first <= t < first + LIMITS["window"]]) <= LIMITS["max_applies"]
               for first in starts), starts
    assert len(starts) == 6  # two windows of 3
    assert "waited" in master.applies()[3][1]  # the held one tells the user


def test_the_rate_limit_counts_an_apply_from_when_it_went_out(runner):
    """A publish that takes a while (a busy master, or the record held by another runner) must
    not make its apply look older than it is: the limit holds for the jobs as the minions see
    them (CI: four applies within one window when the first publish was slow)."""
    clock, master = runner(duration=1, changes=False)
    publish, delays = master.publish, [10.0]

    def slow_publish(*args):  # the job goes out once the delay has passed
        clock.now += delays.pop() if delays else 0.0
        return publish(*args)
    master.publish = slow_publish
    for tick in range(300):  # 150 s of a touch every 0.5 s, the flush schedule every 2 s
        clock.now = max(clock.now, 1000.0 + tick / 2)
        ccc_runner.redeploy("ana-main", version=f"{1000 + tick}:20:7")
        if tick % 4 == 3:
            ccc_runner.flush()
    went_out = [start for start, _ in master.applies()]
    assert went_out[0] == 10.0 and len(went_out) > LIMITS["max_applies"]
    assert all(len([t for t in went_out if first <= t < first + LIMITS["window"]]) <= LIMITS["max_applies"]
               for first in went_out), went_out


def test_an_event_that_joins_a_pending_or_running_apply_reads_no_pillar(runner):
    """The master's work per event before coalescing does not grow with the number of minions:
    only an event that may publish reads the minions' cached pillar."""
    clock, master = runner(duration=3, changes=False)
    reads = []
    placement = master.placement
    master.placement = lambda stack: (reads.append(clock.now), placement(stack))[1]
    for tick in range(120):
        clock.now = 1000.0 + tick / 2
        ccc_runner.redeploy("ana-main", version=f"{1000 + tick}:20:7")
        if tick % 4 == 3:
            ccc_runner.flush()
    assert 0 < len(reads) <= 2 * len(master.applies()), (reads, master.applies())
    assert ccc_runner.redeploy_status()["stacks"]["ana-main"]["pending"]


@pytest.mark.parametrize("trouble, expected", [
    ({"down": {"node3"}}, [0.0, 13.0]),   # asked on the first flush PROBE_AFTER s after the publish, read on the next
    ({"lost": {"node3"}}, [0.0, 13.0]),   # restarted since: it no longer has the job
    ({"busy": {"node3"}}, [0.0, 301.0]),  # still running or queueing it: until job_timeout
])
def test_only_a_target_that_still_has_the_job_holds_the_stack(runner, trouble, expected):
    clock, master = runner(duration=1, **trouble)
    ccc_runner.redeploy("ana-main")
    clock.now += 1
    ccc_runner.redeploy("ana-main")  # in flight: node3 has not returned
    for _ in range(160):
        clock.now += 2
        ccc_runner.flush()
    probes = [job for job in master.jobs if job[1] == "saltutil.find_job"]
    assert probes[0][0] == 1011.0 and probes[0][2:] == (["node3"], "0")
    assert [start for start, _ in master.applies()][:2] == expected


def test_concurrent_events_for_a_stack_publish_one_job(runner):
    """Reactor worker threads run the runner concurrently: the locked record lets one publish."""
    _, master = runner(duration=100)
    publish = master.publish
    master.publish = lambda *args: (time.sleep(0.05), publish(*args))[1]
    threads = [threading.Thread(target=ccc_runner.redeploy, args=("ana-main",)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(master.applies()) == 1
    assert ccc_runner.redeploy_status()["stacks"]["ana-main"]["pending"]  # the others' edits wait


def test_a_failed_publish_leaves_the_stack_pending_for_the_next_flush(runner):
    clock, master = runner(duration=1)
    master.failing_publishes = 1
    assert ccc_runner.redeploy("ana-main")["jid"] is None
    assert ccc_runner.redeploy_status()["stacks"]["ana-main"]["pending"]
    clock.now += 2
    assert ccc_runner.flush() == {"ana-main": "apply"} and len(master.applies()) == 1


def test_a_stack_allowed_nowhere_publishes_nothing_and_records_nothing(runner):
    _, master = runner(duration=1)
    assert ccc_runner.redeploy("no-such-stack") == {"stack": "no-such-stack", "targets": [], "jid": None}
    assert ccc_runner.redeploy("../x")["error"] == "not a STACK_NAME"
    assert ccc_runner.redeploy("ana-main\n")["error"] == "not a STACK_NAME"  # the shared rule: a whole match
    assert not master.jobs and ccc_runner.redeploy_status()["stacks"] == {}


# --- one save reported by every node that watches the file -----------------------------------


def test_a_version_several_nodes_report_is_applied_once(runner):
    clock, master = runner(duration=3)
    assert ccc_runner.redeploy("ana-main", version="100:20:7")["action"] == "apply"
    clock.now += 0.1  # node2's and node3's beacons saw the same save
    for _ in range(2):
        assert ccc_runner.redeploy("ana-main", version="100:20:7")["action"] == "covered"
    for _ in range(5):
        clock.now += 2
        ccc_runner.flush()
    assert len(master.applies()) == 1
    clock.now += 30  # a node that saw it only by its stat poll (another NFS client)
    assert ccc_runner.redeploy("ana-main", version="100:20:7")["action"] == "covered"
    assert len(master.applies()) == 1 and ccc_runner.redeploy_status()["stacks"] == {}


def test_a_new_version_during_a_job_is_applied_once_after_it(runner):
    clock, master = runner(duration=3)
    ccc_runner.redeploy("ana-main", version="100:20:7")
    clock.now += 1
    assert ccc_runner.redeploy("ana-main", version="200:21:7")["action"] == "wait"
    assert ccc_runner.redeploy("ana-main", version="100:20:7")["action"] == "covered"  # late report of the first
    clock.now += 1
    assert ccc_runner.redeploy("ana-main", version="200:21:7")["action"] == "wait"  # its own duplicate: still one
    for _ in range(5):
        clock.now += 2
        ccc_runner.flush()
    assert [start for start, _ in master.applies()] == [0.0, 4.0]
    assert ccc_runner.redeploy("ana-main", version="200:21:7")["action"] == "covered"


def test_reports_without_a_version_are_always_applied(runner):
    """A move's announcement (ccc/moved) and a replay after a pillar error carry no version."""
    clock, master = runner(duration=1)
    ccc_runner.redeploy("ana-main", version="100:20:7")
    for version in (None, None):
        clock.now += 2
        ccc_runner.flush()
        assert ccc_runner.redeploy("ana-main", version=version)["action"] == "apply"
    assert len(master.applies()) == 3


def test_versions_are_forgotten_after_a_while(runner):
    clock, master = runner(duration=1)
    ccc_runner.redeploy("ana-main", version="100:20:7")
    clock.now += ccc_runner.VERSION_MEMORY + 1
    ccc_runner.flush()
    assert ccc_runner.redeploy_status()["versions"] == {}
    assert ccc_runner.redeploy("ana-main", version="100:20:7")["action"] == "apply"


def test_a_failed_publish_covers_no_version(runner):
    clock, master = runner(duration=1)
    master.failing_publishes = 1
    assert ccc_runner.redeploy("ana-main", version="100:20:7")["jid"] is None
    assert ccc_runner.redeploy("ana-main", version="100:20:7")["action"] == "apply"  # retried, not "covered"
    assert len(master.applies()) == 1


# --- the reactor ----------------------------------------------------------------------------


def render_reactor(tag, data):
    import salt.config
    import salt.utils.templates

    text = (REPO / "reactor" / "settings_changed.sls").read_text()
    context = {"tag": tag, "data": data, "opts": salt.config.minion_config(None), "saltenv": "base", "sls": "",
               "grains": {}, "pillar": {}, "salt": {}}
    return yaml.safe_load(salt.utils.templates.render_jinja_tmpl(text, context))


@pytest.mark.parametrize("tag, data, stack, version", [
    ("salt/beacon/node1/ccc_settings/ana-main",
     {"stack": "ana-main", "change": "modified", "version": "100:20:7", "id": "node1"}, "ana-main", "100:20:7"),
    ("salt/beacon/node1/ccc_settings/ana-main",  # a replay after a pillar error: no version
     {"stack": "ana-main", "change": "modified", "replay": True, "id": "node1"}, "ana-main", None),
    ("ccc/moved/ana-main", {"data": {"stack": "ana-main"}, "id": "node2", "tag": "ccc/moved/ana-main"}, "ana-main", None),
])
def test_the_reactor_passes_the_stack_and_version_to_the_runner(tag, data, stack, version):
    assert render_reactor(tag, data) == {"ccc-redeploy": {"runner.ccc.redeploy": [
        {"args": [{"stack": stack}, {"version": version}]}]}}


@pytest.mark.parametrize("stack", ["Bad Name", "ana-main\n", "x: {evil: 1}\ny", "'; - other", None, ["ana-main"]])
def test_an_odd_stack_reaches_the_runner_as_data_and_the_runner_refuses_it(runner, stack):
    """The reactor checks no pattern (the runner does, with ccc_rules); a JSON value cannot add
    keys or states to the reaction."""
    _, master = runner(duration=1)
    reaction = render_reactor("salt/beacon/node1/ccc_settings/x", {"stack": stack, "id": "node1"})
    assert reaction == {"ccc-redeploy": {"runner.ccc.redeploy": [{"args": [{"stack": stack}, {"version": None}]}]}}
    assert ccc_runner.redeploy(stack)["error"] == "not a STACK_NAME"
    assert master.jobs == []
    assert "match(" not in (REPO / "reactor" / "settings_changed.sls").read_text()


def render_sls(path, tag, data):
    import salt.config
    import salt.utils.templates

    context = {"tag": tag, "data": data, "opts": salt.config.minion_config(None), "saltenv": "base", "sls": "",
               "grains": {}, "pillar": {}, "salt": {}}
    return yaml.safe_load(salt.utils.templates.render_jinja_tmpl((REPO / path).read_text(), context))


def test_a_returned_apply_flushes_what_waits_behind_it_and_nothing_else_does():
    import master_config

    reactors = {}
    for item in master_config.master_config(REPO)["reactor"]:
        reactors.update(item)
    assert reactors["salt/job/*/ret/*"] == [str(REPO / "reactor" / "job_returned.sls")]
    returned = {"fun": "state.apply", "fun_args": ["containers", {"pillar": {"containers": "ana-main"}}], "id": "node1"}
    assert render_sls("reactor/job_returned.sls", "salt/job/1/ret/node1", returned) == {
        "ccc-flush": {"runner.ccc.flush": []}}
    fast = {"fun": ccc_runner.ccc_redeploy.FAST_FUN, "fun_args": ["ana-main"], "id": "node1"}  # the fast redeploy
    assert render_sls("reactor/job_returned.sls", "salt/job/3/ret/node1", fast) == {
        "ccc-flush": {"runner.ccc.flush": []}}
    for fun in ("test.ping", "saltutil.find_job", "saltutil.sync_all", None):
        assert render_sls("reactor/job_returned.sls", "salt/job/2/ret/node1", {"fun": fun, "id": "node1"}) is None


def test_a_flush_when_the_job_returned_publishes_the_pending_stack_at_once(runner):
    """The job-return reactor's flush: the edit made during a job goes when the job's last target
    returned, not at the schedule's next tick."""
    clock, master = runner(duration=3)
    ccc_runner.redeploy("ana-main", version="100:20:7")
    clock.now += 1
    assert ccc_runner.redeploy("ana-main", version="200:21:7")["action"] == "wait"
    clock.now += 2  # the job's returns arrive: each fires the reactor
    assert ccc_runner.flush() == {"ana-main": "apply"}
    assert [start for start, _ in master.applies()] == [0.0, 3.0]
