"""The master's side of a missing swarm overlay: ``reactor/swarm_overlay_needed.sls`` passes the
stack of ``ccc/swarm/overlay_needed`` (sent by a node with ``event.send``) to ``ccc.swarm_overlay``
as data, and the runner has the leader (from the cached pillar) create the overlay, then redeploys
the stack. Likewise a released overlay (``ccc/swarm/overlay_released``, a node removed a container
of a stack that left pillar): the leader prunes at once. Salt's LocalClient is replaced by a
recording stand-in (no master runs here)."""

import pathlib

import pytest
import yaml

from support.scripts import load_module

REPO = pathlib.Path(__file__).resolve().parents[2]


def render_reactor(data, name="swarm_overlay_needed"):
    import salt.config
    import salt.utils.templates

    text = (REPO / "reactor" / f"{name}.sls").read_text()
    context = {"tag": f"ccc/swarm/{name.split('_', 1)[1]}", "data": data, "opts": salt.config.minion_config(None),
               "saltenv": "base", "sls": "", "grains": {}, "pillar": {}, "salt": {}}
    return yaml.safe_load(salt.utils.templates.render_jinja_tmpl(text, context))


@pytest.mark.parametrize("stack", ["ana-main", "x: {evil: 1}\ny", None])
def test_the_reactor_passes_the_stack_as_data(stack):
    reaction = render_reactor({"data": {"stack": stack}, "id": "node2", "tag": "ccc/swarm/overlay_needed"})
    assert reaction == {"ccc-swarm-overlay-needed": {"runner.ccc.swarm_overlay": [{"args": [{"stack": stack}]}]}}


class _Master:
    """The runner's view of the master: cached pillars and a client that records its calls."""

    def __init__(self, answer):
        self.calls, self.answer = [], answer

    def cccs(self):
        return {"node2": {"swarm": {"leader": "node1"}}, "node3": {}}

    def client(self):
        return self

    def cmd(self, tgt, fun, arg, timeout, full_return):
        self.calls.append((tgt, fun, arg, full_return))
        return self.answer


@pytest.fixture
def runner(monkeypatch):
    module = load_module("_runners/ccc.py", "ccc_runner_swarm", opts={})
    redeployed = []
    monkeypatch.setattr(module, "redeploy", lambda stack: redeployed.append(stack) or {"stack": stack, "jid": "42"})

    def run(stack, answer, function="swarm_overlay"):
        master = _Master(answer)
        monkeypatch.setattr(module, "_Master", lambda: master)
        return getattr(module, function)(stack), master.calls, redeployed
    return run


def test_the_leader_creates_the_overlay_then_the_stack_is_redeployed(runner):
    result, calls, redeployed = runner("ana-main", {"node1": {"ret": "created", "retcode": 0}})
    assert calls == [("node1", "ccc_swarm.overlay_present", ["ana-main"], True)]
    assert redeployed == ["ana-main"]
    assert result == {"stack": "ana-main", "leader": "node1", "overlay": "created",
                      "redeploy": {"stack": "ana-main", "jid": "42"}}


def test_a_leader_that_refuses_or_is_silent_means_no_redeploy(runner):
    refused = {"node1": {"ret": "ERROR: 'ana-main' is no active stack of the pillar", "retcode": 1}}
    result, _, redeployed = runner("ana-main", refused)
    assert result["error"].startswith("the leader could not create overlay-ana-main: ERROR: 'ana-main' is no active")
    result, _, redeployed = runner("ana-main", {})
    assert result["error"] == "the leader could not create overlay-ana-main: node1 did not answer"
    assert redeployed == []


def test_a_stack_name_from_event_data_is_checked_before_anything_is_asked(runner):
    result, calls, redeployed = runner("x: {evil: 1}", {})
    assert result == {"stack": "x: {evil: 1}", "error": "not a STACK_NAME"}
    assert calls == [] and redeployed == []


@pytest.mark.parametrize("stack", ["ana-old", "x: {evil: 1}\ny", None])
def test_the_released_reactor_passes_the_stack_as_data(stack):
    reaction = render_reactor({"data": {"stack": stack}, "id": "node2"}, "swarm_overlay_released")
    assert reaction == {"ccc-swarm-overlay-released": {"runner.ccc.swarm_overlay_released": [{"args": [{"stack": stack}]}]}}


def test_a_released_overlay_is_pruned_by_the_leader_at_once(runner):
    pruned = {"created": [], "removed": ["overlay-ana-old"], "in use": [], "leader": "node1"}
    result, calls, redeployed = runner("ana-old", {"node1": {"ret": pruned, "retcode": 0}}, "swarm_overlay_released")
    assert calls == [("node1", "ccc_swarm.overlays", [], True)] and redeployed == []
    assert result == {"stack": "ana-old", "leader": "node1", "overlays": pruned}
    result, calls, _ = runner("../x", {}, "swarm_overlay_released")
    assert result == {"stack": "../x", "error": "not a STACK_NAME"} and calls == []
    result, _, _ = runner("ana-old", {}, "swarm_overlay_released")
    assert result["error"] == "the leader could not remove overlay-ana-old: node1 did not answer"
