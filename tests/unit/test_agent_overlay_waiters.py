"""The master's side of the Portainer agents waiting for their swarm overlay: a node whose agent
finds it missing reports ``ccc/swarm/agent_overlay/pending``, the leader reports each overlay it
creates (``.../created``), and each waiting node gets one apply of its agent's overlay state.
The rules (``_utils/ccc_agent_waiters.py``), the reactor (``reactor/swarm_agent_overlay.sls``)
and the runner (``_runners/ccc_agent_overlay.py``, with the master's keys, pillar cache and
publisher replaced by recording stand-ins: no master runs here). On real swarm nodes with a real
master: tests/nodes/test_swarm_portainer_agent.py."""

import pathlib

import pytest
import yaml

import support.site  # noqa: F401  (puts _utils on the path)
from support.scripts import load_module

import ccc_agent_waiters  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
PENDING, CREATED = ccc_agent_waiters.EVENT_PENDING, ccc_agent_waiters.EVENT_CREATED


# ---- the rules --------------------------------------------------------------------------------

def test_a_node_waits_until_the_leader_reports_then_is_applied_once():
    record, wake = ccc_agent_waiters.pending(ccc_agent_waiters.empty(), "gpu2")
    assert not wake and record["waiting"] == ["gpu2"]
    record, wake = ccc_agent_waiters.pending(record, "gpu2")  # reported again: still one waiter
    assert not wake and record["waiting"] == ["gpu2"]
    record, nodes = ccc_agent_waiters.created(record)
    assert nodes == ["gpu2"] and record["waiting"] == []
    record, nodes = ccc_agent_waiters.created(record)  # the leader again: nobody waits
    assert nodes == []


def test_a_report_that_crossed_the_leaders_is_applied_at_once_but_only_once_per_overlay():
    """The worker found the overlay missing just before the leader made it, and the master heard
    the leader first: that node is applied now. Still missing after that apply (the overlay gone
    again), it waits for the next overlay instead of looping."""
    record, nodes = ccc_agent_waiters.created(ccc_agent_waiters.empty())
    assert nodes == []
    record, wake = ccc_agent_waiters.pending(record, "gpu2")
    assert wake and record["waiting"] == []
    record, wake = ccc_agent_waiters.pending(record, "gpu2")
    assert not wake and record["waiting"] == ["gpu2"]
    record, nodes = ccc_agent_waiters.created(record)
    assert nodes == ["gpu2"]


def test_applies_never_outnumber_the_nodes_own_reports():
    """However the reports interleave, and however often the leader reports, a node gets at most
    one apply per pending report it sent."""
    record, applies, reports = ccc_agent_waiters.empty(), 0, 0
    for step in range(200):
        if step % 3 == 0:
            record, wake = ccc_agent_waiters.pending(record, "gpu2")
            reports, applies = reports + 1, applies + wake
        else:
            record, nodes = ccc_agent_waiters.created(record)
            applies += nodes.count("gpu2")
        assert applies <= reports


def test_a_node_whose_key_is_gone_is_forgotten():
    record, _ = ccc_agent_waiters.pending(ccc_agent_waiters.empty(), "gone")
    record, _ = ccc_agent_waiters.pending(record, "gpu2")
    record, nodes = ccc_agent_waiters.created(record, accepted=lambda node: node != "gone")
    assert nodes == ["gpu2"] and "gone" not in record["woken"]


@pytest.mark.parametrize("stored", [None, [], "x", {"created": "9", "waiting": {"a": 1}, "woken": []},
                                    {"created": True, "waiting": ["a", 3], "woken": {"a": "1", "b": 2}}])
def test_a_malformed_record_reads_as_a_fresh_one(stored):
    record = ccc_agent_waiters.normalised(stored)
    assert record["created"] == 0 and set(record) == {"created", "waiting", "woken"}
    assert all(isinstance(node, str) for node in record["waiting"])
    assert all(isinstance(seq, int) for seq in record["woken"].values())


def test_the_record_survives_on_disk_and_an_unreadable_one_starts_over(tmp_path):
    with ccc_agent_waiters.open_record(str(tmp_path)) as holder:
        holder["record"], _ = ccc_agent_waiters.pending(holder["record"], "gpu2")
    with ccc_agent_waiters.open_record(str(tmp_path)) as holder:
        assert holder["record"]["waiting"] == ["gpu2"]
    (tmp_path / ccc_agent_waiters.RECORD_NAME).write_text("{not json")
    with ccc_agent_waiters.open_record(str(tmp_path)) as holder:
        assert holder["record"] == ccc_agent_waiters.empty()


def test_the_state_the_master_applies_is_the_swarm_roles_agent_state():
    state_id, sls = ccc_agent_waiters.AGENT_STATE
    text = (REPO / "salt" / pathlib.Path(*sls.split("."), "init.sls")).read_text()
    assert f"\n{state_id}:\n  ccc_swarm.agent_overlay:" in text


# ---- the reactor ------------------------------------------------------------------------------

def render_reactor(tag, data):
    import salt.config
    import salt.utils.templates

    text = (REPO / "reactor" / "swarm_agent_overlay.sls").read_text()
    context = {"tag": tag, "data": data, "opts": salt.config.minion_config(None),
               "saltenv": "base", "sls": "", "grains": {}, "pillar": {}, "salt": {}}
    return yaml.safe_load(salt.utils.templates.render_jinja_tmpl(text, context))


@pytest.mark.parametrize("tag, function", [(PENDING, "pending"), (CREATED, "created")])
def test_the_reactor_passes_the_sending_minion_to_the_runner(tag, function):
    assert render_reactor(tag, {"id": "gpu-2.lab", "data": {"anything": "ignored"}}) == {
        f"ccc-swarm-agent-overlay-{function}": {f"runner.ccc_agent_overlay.{function}": [
            {"args": [{"node": "gpu-2.lab"}]}]}}


@pytest.mark.parametrize("tag, data", [
    ("ccc/swarm/agent_overlay/other", {"id": "gpu2"}),
    ("ccc/swarm/agent_overlay/created/x", {"id": "gpu2"}),
    (CREATED, {"id": ["gpu1"]}),
    (CREATED, {"id": None}),
    (PENDING, {}),
])
def test_the_reactor_ignores_anything_else(tag, data):
    assert render_reactor(tag, data) is None


def test_an_id_with_yaml_in_it_stays_one_string():
    node = "x\n  runner.evil:\n    - a"
    rendered = render_reactor(CREATED, {"id": node})
    assert rendered["ccc-swarm-agent-overlay-created"]["runner.ccc_agent_overlay.created"] == [
        {"args": [{"node": node}]}]


# ---- the runner -------------------------------------------------------------------------------

@pytest.fixture
def runner(monkeypatch, tmp_path):
    """The runner with the master's side replaced: accepted keys, each minion's cached pillar
    (gpu1 is the leader), and the publisher, which records ``(node, fun, args)``."""
    module = load_module("_runners/ccc_agent_overlay.py", "ccc_agent_overlay_runner",
                         opts={"cachedir": str(tmp_path), "conf_file": "/dev/null"})
    published = []
    pillars = {"gpu1": {"swarm": {"leader": "gpu1"}}, "gpu2": {"swarm": {"leader": "gpu1"}}, "gpu3": {}}
    monkeypatch.setattr(module, "_accepted", lambda node: node in pillars)

    class Keys:
        def list_status(self, status):
            return {"minions": sorted(pillars)} if status == "accepted" else {}

    monkeypatch.setattr(module.salt.key, "get_key", lambda opts: Keys())
    monkeypatch.setattr(module, "_cached_ccc", lambda node: pillars[node])

    class Client:
        def run_job(self, tgt, fun, arg, tgt_type, kwarg):
            published.append((tgt, fun, arg, tgt_type, kwarg))
            return {"jid": f"j{len(published)}", "minions": tgt}

        def destroy(self):
            pass

    monkeypatch.setattr(module.salt.client, "get_local_client", lambda conf: Client())
    module.published = published
    return module


def test_the_waiting_node_is_applied_when_the_leader_reports(runner):
    assert runner.pending("gpu2") == {"node": "gpu2", "action": "waiting"}
    assert runner.published == []
    assert runner.created("gpu1") == {"node": "gpu1", "action": "applied", "jids": {"gpu2": "j1"}}
    assert runner.published == [(["gpu2"], "state.sls_id", list(ccc_agent_waiters.AGENT_STATE), "list",
                                 {"queue": True})]
    assert runner.created("gpu1") == {"node": "gpu1", "action": "none waiting", "jids": {}}
    assert len(runner.published) == 1


@pytest.mark.parametrize("node, error", [
    ("gpu2", "not the swarm leader"), ("gpu3", "not the swarm leader"),
    ("gpu9", "not an accepted minion"), ("../x", "not a minion id"), ("gpu1\n", "not a minion id"),
    (["gpu1"], "not a minion id"), (None, "not a minion id"),
])
def test_a_created_report_from_anyone_but_the_leader_applies_nothing(runner, node, error):
    runner.pending("gpu2")
    assert runner.created(node) == {"node": node, "action": None, "error": error}
    assert runner.published == []
    assert runner.waiting()["waiting"] == ["gpu2"]  # still waits for the leader's report


@pytest.mark.parametrize("node, error", [("gpu9", "not an accepted minion"), ("a b", "not a minion id"),
                                         ({"id": "gpu2"}, "not a minion id")])
def test_a_pending_report_from_an_unknown_id_is_not_recorded(runner, node, error):
    assert runner.pending(node) == {"node": node, "action": None, "error": error}
    assert runner.waiting() == ccc_agent_waiters.empty()


def test_a_flood_of_reports_makes_one_apply_per_overlay(runner):
    for _ in range(50):
        runner.pending("gpu2")
    runner.created("gpu1")
    for _ in range(50):
        runner.pending("gpu2")
    assert len(runner.published) == 1
