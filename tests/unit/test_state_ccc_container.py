"""The ``ccc_container`` states (``_states/ccc_container.py``) with a fake ``__salt__`` that returns
the execution module's facts: what an admin reads in ``state.apply`` output (result, changes,
comment) in test mode, with nothing to do, with changes and on failures, worded by the state alone;
the real ``ccc_docker`` execution module, which returns the facts as data and asks the master for
what they request; and that module against a Docker engine that does not answer, where every node
state fails with one clean line instead of a traceback."""

import dataclasses
import json
import pathlib

import pytest
from salt.exceptions import CommandExecutionError

from support.scripts import load_module
from support.site import sample_ccc

import ccc_apply
import ccc_deploy
import ccc_plan
import ccc_swarm

REPO = pathlib.Path(__file__).resolve().parents[2]
DEAD_ENGINE = "unix:///nonexistent/ccc-test-docker.sock"


def states(salt, test=False, context=None):
    return load_module("_states/ccc_container.py", "ccc_container_state", salt=salt, opts={"test": test},
                context={} if context is None else context)


def raises(message):
    def function(*args, **kwargs):
        raise CommandExecutionError(message)
    return function


def facts(stack="box1", action="run", **fields):
    """One container's facts as ``ccc_docker.deploy`` returns them (``ccc_apply.Applied`` as data)."""
    return dataclasses.asdict(ccc_apply.Applied(stack, action, **fields))


CREATED = {"created": {"image": "img", "networks": ["lab"], "gpus": []}}
OUTCOME = facts(reason="placed on node1", done="created and started", changes=CREATED)
REPORTED = {"result": True, "changes": CREATED, "comment": "box1: created and started (placed on node1)"}


# ---------------------------------------------------------------------------------------------
# deployed + running: one batch, each container reports in its own state


def test_running_reports_the_outcome_the_deployed_state_applied_without_applying_again():
    calls = []
    salt = {"ccc_docker.deploy_many": lambda stacks, test: calls.append(("many", stacks, test)) or {
                "box1": dict(OUTCOME), "box2": facts("box2", "failed", problem="box2: refusing a user path")},
            "ccc_docker.deploy": lambda name, test: calls.append(("one", name, test))}
    context = {}
    module = states(salt, context=context)
    batch = module.deployed("ccc-containers-deploy", stacks=["box1", "box2"])
    assert batch == {"name": "ccc-containers-deploy", "result": True, "changes": {},
                     "comment": "2 container(s) applied, 1 failed; each reports in its own state"}
    assert module.running("box1") == {"name": "box1", **REPORTED}
    assert module.running("box2") == {"name": "box2", "result": False, "changes": {},
                                      "comment": "box2: refusing a user path"}
    assert calls == [("many", ["box1", "box2"], False)]
    summary = module.summary("ccc-containers-summary")
    assert summary["result"] is False and summary["comment"] == "2 container(s) processed, 1 failed\nfailed: box2"


def test_deployed_in_test_mode_passes_test_mode_and_changes_nothing_itself():
    seen = []
    pending = facts(reason="placed on node1", changes={"recreated": {"shm_size": {"old": 1, "new": 2}}})
    module = states({"ccc_docker.deploy_many": lambda stacks, test: seen.append(test) or {"box1": pending}}, test=True)
    batch = module.deployed("ccc-containers-deploy", stacks=["box1"])
    assert seen == [True]
    assert batch["result"] is True and batch["changes"] == {} and "1 container(s) checked, 0 failed" in batch["comment"]
    assert module.running("box1") == {"name": "box1", "result": None, "changes": pending["changes"],
                                      "comment": "box1: would be recreated (placed on node1)"}


def test_running_without_a_deployed_state_applies_its_container_itself():
    module = states({"ccc_docker.deploy": lambda name, test: facts(name, reason="placed on node1",
                                                                   done="running, unchanged")})
    assert module.running("box1") == {"name": "box1", "result": True, "changes": {},
                                      "comment": "box1: running, unchanged (placed on node1)"}
    assert module.summary("s") == {"name": "s", "result": True, "changes": {}, "comment": "1 container(s) processed, 0 failed"}


def test_a_deploy_that_raises_fails_that_container_only_and_counts_in_the_summary():
    module = states({"ccc_docker.deploy": raises("not trusting the record of ccc-salt's containers")})
    result = module.running("box1")
    assert result == {"name": "box1", "result": False, "changes": {},
                      "comment": "box1: CommandExecutionError: not trusting the record of ccc-salt's containers"}
    assert "failed: box1" in module.summary("s")["comment"]


def test_deployed_fails_in_one_line_when_nothing_can_be_applied_and_running_then_tries_itself():
    module = states({"ccc_docker.deploy_many": raises("ccc:node:create_parallelism must be a whole number of at least 1, got 0"),
                     "ccc_docker.deploy": lambda name, test: facts(name, "failed", problem=f"{name}: no")})
    batch = module.deployed("ccc-containers-deploy", stacks=["box1"])
    assert batch == {"name": "ccc-containers-deploy", "result": False, "changes": {},
                     "comment": "ccc:node:create_parallelism must be a whole number of at least 1, got 0"}
    assert module.running("box1")["comment"] == "box1: no"


def test_summary_fails_on_selection_errors_even_when_every_container_passed():
    module = states({"ccc_docker.deploy": lambda name, test: dict(OUTCOME)})
    module.running("box1")
    result = module.summary("s", errors=["containers filter: no container named 'nope'"])
    assert result["result"] is False
    assert result["comment"] == "1 container(s) processed, 0 failed\ncontainers filter: no container named 'nope'"


# ---------------------------------------------------------------------------------------------
# running: the facts of one apply, compared and worded here (test mode: None where anything
# would change), whatever the action


SETTLED = {"removed": ["box1.ccc-old"]}
WHY = "node2 has not reported it running yet"


@pytest.mark.parametrize("test, given, expected", [
    pytest.param(True, facts(reason="placed on node1"),
                 (True, {}, "box1: would be left as it is (placed on node1)"), id="run-test-nothing-to-do"),
    pytest.param(True, facts(reason="placed on node1", changes=dict(CREATED, overlay={"network": "o"}), notes=["n1"]),
                 (None, dict(CREATED, overlay={"network": "o"}),
                  "box1: would be created, overlay (placed on node1); n1"),
                 id="run-test-changes"),
    pytest.param(False, facts(reason="placed on node1", done="running, unchanged", notes=["n1", "n2"]),
                 (True, {}, "box1: running, unchanged (placed on node1); n1; n2"), id="run-nothing-changed"),
    pytest.param(False, facts(reason="placed on node1", done="created and started", changes=CREATED,
                              notes=["could not join ccc-box1: refused"], problem="could not join ccc-box1: refused",
                              overlay_needed=False, announce=["node2"]),
                 (False, CREATED, "box1: created and started (placed on node1); could not join ccc-box1: refused"),
                 id="run-overlay-failed"),
    pytest.param(True, facts(action="remove", reason="DISABLED by the admins",
                             changes={"removed": {"reason": "DISABLED by the admins"}, "purged": ["~/box1"]}),
                 (None, {"removed": {"reason": "DISABLED by the admins"}, "purged": ["~/box1"]},
                  "box1: would be removed and purged (DISABLED by the admins)"), id="remove-test"),
    pytest.param(False, facts(action="remove", reason="placed on node2",
                              changes={"removed": {"reason": "placed on node2"}}, move_done=True,
                              notes=["moved to node2 (it runs there); the copy on node1 was removed"]),
                 (True, {"removed": {"reason": "placed on node2"}},
                  "box1: was removed (placed on node2); moved to node2 (it runs there); the copy on node1 was removed"),
                 id="remove-moved"),
    pytest.param(False, facts(action="remove", reason="placed on node2"),
                 (True, {}, "box1: not on this node (placed on node2)"), id="remove-nothing-here"),
    pytest.param(True, facts(action="keep", reason="placed on node2",
                             done=f"kept running on node1 until node2 runs it: {WHY}"),
                 (True, {}, f"box1: would be kept running on node1 until node2 runs it: {WHY}"), id="keep-test"),
    pytest.param(False, facts(action="keep", reason="placed on node2",
                              done=f"kept running on node1 until node2 runs it: {WHY}",
                              notes=["max_window is not a number"], recheck_move=30.0),
                 (True, {}, f"box1: is kept running on node1 until node2 runs it: {WHY}; max_window is not a number"),
                 id="keep"),
    pytest.param(True, facts(action="failed", problem="STORAGE_NAME is taken", notes=["image not pulled"]),
                 (False, {}, "STORAGE_NAME is taken; image not pulled"), id="hold-test"),
    pytest.param(False, facts(action="failed", problem="box1: Docker refused the container, nothing was changed: no",
                              changes={"directories": ["/u/box1"]}),
                 (False, {"directories": ["/u/box1"]}, "box1: Docker refused the container, nothing was changed: no"),
                 id="refused-after-making-folders"),
    pytest.param(True, facts(reason="placed on node1", settled=SETTLED),
                 (None, {"swap_settled": SETTLED}, "box1: would be left as it is (placed on node1); "
                                                   f"would settle an interrupted recreate: {SETTLED}"),
                 id="settle-test"),
    pytest.param(False, facts(reason="placed on node1", done="running, unchanged", settled=SETTLED),
                 (True, {"swap_settled": SETTLED}, "box1: running, unchanged (placed on node1); "
                                                   f"settled an interrupted recreate: {SETTLED}"), id="settled"),
    pytest.param(False, facts(action="failed", problem="box1: refusing a user path: not a folder", settled=SETTLED),
                 (False, {"swap_settled": SETTLED}, "box1: refusing a user path: not a folder; "
                                                    f"settled an interrupted recreate: {SETTLED}"),
                 id="settled-then-failed"),
])
def test_running_words_the_facts_of_the_apply_and_owns_test_mode(test, given, expected):
    module = states({"ccc_docker.deploy": lambda name, test: dict(given)}, test=test)
    result = module.running("box1")
    assert (result["result"], result["changes"], result["comment"]) == expected
    assert module.summary("s")["result"] is (expected[0] is not False)


def test_the_facts_are_left_as_the_module_returned_them():
    given = facts(reason="placed on node1", done="created and started", changes=CREATED, settled=SETTLED,
                  announce=["node2"], overlay_needed=True)
    kept = json.loads(json.dumps(given))
    module = states({"ccc_docker.deploy_many": lambda stacks, test: {"box1": given}})
    module.deployed("d", stacks=["box1"])
    assert module.running("box1")["changes"] == dict(CREATED, swap_settled=SETTLED)
    assert given == kept


# ---------------------------------------------------------------------------------------------
# absent


@pytest.mark.parametrize("test, removed, expected", [
    (True, ["box1"], (None, {"removed": "box1"}, "box1 would be removed")),
    (False, ["box1", "box1.ccc-old"], (True, {"removed": "box1, box1.ccc-old"}, "box1, box1.ccc-old was removed")),
    (True, [], (True, {}, "box1 is not on this node")),
    (False, [], (True, {}, "box1 is not on this node")),
])
def test_absent_words_the_removal_the_module_did(test, removed, expected):
    seen = []
    module = states({"ccc_docker.remove": lambda name, test: seen.append((name, test)) or {"removed": list(removed)}},
                    test=test)
    assert module.absent("box1") == {"name": "box1", **dict(zip(("result", "changes", "comment"), expected))}
    assert seen == [("box1", test)]


def test_absent_fails_in_one_line_when_the_module_refuses():
    module = states({"ccc_docker.remove": raises("a container named 'box1' exists but is not managed by ccc-salt; "
                                                 "not touching it")})
    assert module.absent("box1") == {"name": "box1", "result": False, "changes": {},
                                     "comment": "a container named 'box1' exists but is not managed by ccc-salt; "
                                                "not touching it"}


# ---------------------------------------------------------------------------------------------
# orphans_absent


@pytest.mark.parametrize("test, outcome, expected", [
    (False, {"orphans": [], "managed": 3, "refused": None}, (True, {}, "no orphaned containers")),
    (True, {"orphans": ["gone"], "managed": 3, "refused": None}, (None, {"removed": ["gone"]}, "would remove 1 orphaned container(s)")),
    (False, {"orphans": ["gone", "old"], "managed": 5, "refused": None},
     (True, {"removed": ["gone", "old"]}, "removed 2 orphaned container(s)")),
    (True, {"orphans": ["a", "b"], "managed": 2, "refused": "2 of the 2 managed containers ..."},
     (False, {}, "refusing to remove 2 orphaned container(s) (a, b): 2 of the 2 managed containers ...")),
])
def test_orphans_absent(test, outcome, expected):
    module = states({"ccc_docker.remove_orphans": lambda test: dict(outcome)}, test=test)
    result = module.orphans_absent("ccc-containers-orphans")
    assert (result["result"], result["changes"], result["comment"]) == expected


def test_orphan_removal_switched_off_asks_nothing():
    module = states({"ccc_docker.remove_orphans": raises("must not be called")})
    assert module.orphans_absent("o", enabled=False) == {"name": "o", "result": True, "changes": {},
                                                          "comment": "orphan removal is switched off"}


# ---------------------------------------------------------------------------------------------
# private_mounts_managed


@pytest.mark.parametrize("test, changes, expected", [
    (False, {}, (True, {}, "private data mounts are in place")),
    (True, {"mounted": ["/b/box1/s/private/lab"]}, (None, {"mounted": ["/b/box1/s/private/lab"]}, "private data mounts would change")),
    (False, {"unmounted": ["/b/box1/s/private/lab"], "released": ["gone"]},
     (True, {"unmounted": ["/b/box1/s/private/lab"], "released": ["gone"]}, "private data mounts changed")),
    (False, {"mounted": ["/b/x"], "refused": ["box1: private/lab is a symbolic link"]},
     (False, {"mounted": ["/b/x"]}, "private data mounts changed; refused (not a real folder): box1: private/lab is a symbolic link")),
])
def test_private_mounts_managed(test, changes, expected):
    module = states({"ccc_docker.private_mounts": lambda test: dict(changes)}, test=test)
    result = module.private_mounts_managed("ccc-containers-private-mounts")
    assert (result["result"], result["changes"], result["comment"]) == expected


def test_private_mounts_that_cannot_be_made_fail_with_the_reason():
    def failing(test):
        raise OSError(1, "Operation not permitted")
    result = states({"ccc_docker.private_mounts": failing}).private_mounts_managed("m")
    assert result == {"name": "m", "result": False, "changes": {}, "comment": "[Errno 1] Operation not permitted"}


# ---------------------------------------------------------------------------------------------
# The real execution module, the Docker engine down: one clean line per node state


@pytest.fixture
def dead_engine(tmp_path):
    ccc = sample_ccc("node1")
    ccc["node"].update(docker_url=DEAD_ENGINE, state_dir=str(tmp_path / "state"), binds_dir=str(tmp_path / "binds"))
    ccc["cluster"]["mount_points"] = {"nfs": {key: str(tmp_path / key) for key in (
        "user_data", "group_data", "apps_data", "dataset_data", "private_data")},
        "local": {key: str(tmp_path / key) for key in ("hdd_data", "ssd_data", "sshd_data")}}
    module = load_module("_modules/ccc_docker.py", "ccc_docker_module", pillar={"ccc": ccc}, grains={"id": "node1"},
                         context={}, salt={}, opts={"cachedir": str(tmp_path / "cache")})
    salt = {f"ccc_docker.{name}": getattr(module, name)
            for name in ("deploy", "deploy_many", "remove", "remove_orphans", "private_mounts")}
    return module, salt


# network_present moved to the docker role: tests/unit/test_docker_network_state.py
@pytest.mark.parametrize("function, name", [
    ("orphans_absent", "ccc-containers-orphans"),
    ("private_mounts_managed", "ccc-containers-private-mounts"), ("absent", "ana-main"),
])
@pytest.mark.parametrize("test", [True, False])
def test_node_states_fail_in_one_line_when_the_engine_does_not_answer(dead_engine, function, name, test):
    _, salt = dead_engine
    result = getattr(states(salt, test=test), function)(name)
    assert result == {"name": name, "result": False, "changes": {},
                      "comment": f"the Docker engine of this node does not answer ({DEAD_ENGINE})"}


def test_containers_fail_one_by_one_with_the_reason_when_the_engine_does_not_answer(dead_engine):
    _, salt = dead_engine
    module = states(salt, test=True)
    assert module.deployed("ccc-containers-deploy", stacks=["ana-main", "bor-main"])["result"] is True
    for stack in ("ana-main", "bor-main"):
        result = module.running(stack)
        assert result["result"] is False
        assert result["comment"].startswith(f"{stack}: the Docker engine of this node does not answer (the admins were told)")
    assert module.summary("s")["comment"] == "2 container(s) processed, 2 failed\nfailed: ana-main, bor-main"


def test_the_execution_module_raises_command_execution_error_when_the_engine_does_not_answer(dead_engine):
    module, _ = dead_engine
    for call in (module.managed, lambda: module.remove_orphans(test=True)):
        with pytest.raises(CommandExecutionError, match="^the Docker engine of this node does not answer"):
            call()


def test_deploy_many_returns_the_facts_as_data_and_asks_the_master_for_what_they_request(dead_engine, monkeypatch):
    module, _ = dead_engine
    sent, scheduled = [], []
    applied = {
        "box1": ccc_apply.Applied("box1", "run", "placed on node1", done="created and started", changes=CREATED,
                                  announce=["node2"], overlay_needed=True),
        "box2": ccc_apply.Applied("box2", "keep", "placed on node2", done="kept running on node1", recheck_move=30.0),
        "box3": ccc_apply.Applied("box3", "remove", "placed on node2", move_done=True),
    }
    monkeypatch.setattr(ccc_plan, "read_inputs", lambda *args, **kwargs: ccc_plan.Inputs(
        ccc={}, cluster={}, node={}, facts=None, stored={}, notices={}))
    monkeypatch.setattr(ccc_deploy, "deploy", lambda inputs, stacks, clients, test, workers: applied)
    module.__opts__ = dict(module.__opts__, file_client="remote")
    module.__salt__ = {"event.send": lambda tag, data: sent.append((tag, data)),
                       "schedule.delete": lambda name, persist: scheduled.append(("delete", name)),
                       "schedule.add": lambda name, **kwargs: scheduled.append(("add", name)) or {"result": True}}
    outcomes = module.deploy_many(["box1", "box2", "box3"])
    assert outcomes == {stack: dataclasses.asdict(facts) for stack, facts in applied.items()}
    assert json.loads(json.dumps(outcomes)) == outcomes  # the command line's data, every field kept
    assert sent == [("ccc/moved/box1", {"stack": "box1"}), (ccc_swarm.EVENT_OVERLAY_NEEDED, {"stack": "box1"})]
    assert scheduled == [("delete", "ccc-move-window-box2"), ("add", "ccc-move-window-box2"),
                         ("delete", "ccc-move-window-box3")]
