"""The ``ccc_swarm`` states' own part: result, comment, changes and test mode around the facts
the execution module returns (``ccc_swarm.member``/``leave``: an action and its reason, whether
the node left). Boundary: ``__salt__`` is a dict of fakes that record their calls (``Fakes``);
the real swarm is in tests/nodes/test_swarm.py."""

import pytest
from salt.exceptions import CommandExecutionError
from support.salt_modules import Fakes, raises
from support.scripts import load_module

SETTINGS = {"leader": "node1", "leader_addr": "10.0.0.1"}


def state(functions, test=False):
    salt = Fakes(functions)
    return load_module("_states/ccc_swarm.py", "ccc_swarm_state", salt=salt, opts={"test": test}), salt


@pytest.mark.parametrize("test", [False, True])
def test_a_join_is_a_change_and_test_mode_says_would(test):
    done = {"action": "join", "reason": "node2 joins the swarm at 10.0.0.1:2377 as a worker", "changed": True}
    module, salt = state({"ccc_swarm.member": lambda settings, test: done}, test=test)
    assert module.member("swarm", SETTINGS) == {
        "name": "swarm", "result": None if test else True, "changes": {"swarm": "joined the swarm"},
        "comment": ("would: " if test else "") + done["reason"]}
    assert salt.called() == [("ccc_swarm.member", (SETTINGS, test))]  # test mode passed down, acted on nowhere else


def test_a_member_is_no_change_and_a_refusal_fails_with_its_reason():
    led = {"action": "none", "reason": "node1 leads its swarm", "changed": False}
    module, _ = state({"ccc_swarm.member": lambda settings, test: led})
    assert module.member("swarm", SETTINGS) == {"name": "swarm", "result": True, "changes": {},
                                               "comment": "node1 leads its swarm"}
    module, _ = state({"ccc_swarm.member": raises(CommandExecutionError("node2 is in a different swarm"))})
    assert module.member("swarm", SETTINGS) == {"name": "swarm", "result": False, "changes": {},
                                               "comment": "node2 is in a different swarm"}


@pytest.mark.parametrize("test", [False, True])
def test_leaving_is_worded_by_the_state(test):
    left = {"left": True, "overlays": {"removed": ["overlay-a"]}}
    module, _ = state({"ccc_swarm.leave": lambda settings, test: left}, test=test)
    assert module.left("swarm", SETTINGS) == {
        "name": "swarm", "result": None if test else True,
        "changes": {"swarm": "left", "overlays_removed": ["overlay-a"]},
        "comment": "would leave the swarm" if test else "left the swarm"}
    module, _ = state({"ccc_swarm.leave": lambda settings, test: {"left": False, "overlays": {}}}, test=test)
    assert module.left("swarm", SETTINGS) == {"name": "swarm", "result": True, "changes": {},
                                             "comment": "this node is in no swarm"}
