"""The swarm role's rules (_utils/ccc_swarm.py): who inits, who joins with which token and where,
when a node is left alone or refused, which stacks get an overlay, what a container joins, and
the master's answer to a worker that lacks an overlay. Real swarms: tests/nodes/test_swarm.py."""

import pytest

from support import role_files

import ccc_role_schema
import ccc_swarm

LEADER = {"leader": "node1", "leader_addr": "10.0.0.1", "advertise_addr": None, "listen_addr": "0.0.0.0:2377",
          "manager": False, "nodes": []}
SCHEMA = role_files.schema("swarm")
ACTIVE_WORKER = {"LocalNodeState": "active", "ControlAvailable": False,
                 "RemoteManagers": [{"NodeID": "x", "Addr": "10.0.0.1:2377"}]}


def test_the_leader_initialises_an_engine_in_no_swarm_and_then_leaves_it_alone():
    assert ccc_swarm.membership(LEADER, "node1", {"LocalNodeState": "inactive"})["action"] == "init"
    manager = {"LocalNodeState": "active", "ControlAvailable": True, "RemoteManagers": [{"Addr": "10.0.0.1:2377"}]}
    assert ccc_swarm.membership(LEADER, "node1", manager)["action"] == "none"


def test_a_leader_that_is_a_worker_somewhere_fails_and_is_never_made_to_leave():
    decision = ccc_swarm.membership(LEADER, "node1", dict(ACTIVE_WORKER, RemoteManagers=[{"Addr": "192.168.5.5:2377"}]))
    assert decision["action"] == "fail"
    assert "192.168.5.5" in decision["reason"] and "by hand" in decision["reason"]


@pytest.mark.parametrize("manager", [False, True])
def test_other_nodes_join_the_leader_with_the_token_of_their_kind(manager):
    decision = ccc_swarm.membership(dict(LEADER, manager=manager), "node2", {"LocalNodeState": "inactive"})
    assert decision == {"action": "join", "manager": manager, "remote": "10.0.0.1:2377",
                        "reason": f"node2 joins the swarm at 10.0.0.1:2377 as a {'manager' if manager else 'worker'}"}
    assert ccc_swarm.TOKEN_SECRETS[manager] == ("swarm", "manager_token" if manager else "worker_token")


def test_a_node_without_the_leaders_address_cannot_join():
    decision = ccc_swarm.membership(dict(LEADER, leader_addr=None), "node2", {"LocalNodeState": "inactive"})
    assert decision["action"] == "fail" and "ccc:swarm:leader_addr" in decision["reason"]


def test_a_member_of_the_swarm_is_left_alone_and_told_how_to_change_its_kind():
    assert ccc_swarm.membership(LEADER, "node2", ACTIVE_WORKER) == {"action": "none", "reason": "node2 is in the swarm"}
    decision = ccc_swarm.membership(dict(LEADER, manager=True), "node2", ACTIVE_WORKER)
    assert decision["action"] == "none" and "docker node promote node2" in decision["reason"]


def test_a_node_in_a_different_swarm_fails_and_is_not_forced_out():
    other = dict(ACTIVE_WORKER, RemoteManagers=[{"Addr": "172.16.0.9:2377"}])
    decision = ccc_swarm.membership(LEADER, "node2", other)
    assert decision["action"] == "fail"
    assert "different swarm" in decision["reason"] and "172.16.0.9" in decision["reason"]


@pytest.mark.parametrize("state", ["pending", "error", "locked"])
def test_an_engine_between_states_is_not_touched(state):
    decision = ccc_swarm.membership(LEADER, "node2", {"LocalNodeState": state})
    assert decision["action"] == "fail" and repr(state) in decision["reason"]


@pytest.mark.parametrize("given, joined", [("10.0.0.1", "10.0.0.1:2377"), ("10.0.0.1:4000", "10.0.0.1:4000"),
                                           ("lead.example.org", "lead.example.org:2377"), ("fd00::1", "[fd00::1]:2377"),
                                           ("[fd00::1]:2377", "[fd00::1]:2377")])
def test_the_join_address_gets_swarms_port_when_it_names_none(given, joined):
    assert ccc_swarm.join_address({"leader_addr": given}) == joined


def swarm_problems(settings):
    """What the role's schema says about ``settings`` (the swarm role has no rule beyond it)."""
    return ccc_role_schema.problems("swarm", settings, SCHEMA)


def test_settings_mistakes_are_named_one_per_key():
    errors = swarm_problems({"leader": None, "manager": "yes", "leader_addr": "a b", "nodes": "node1",
                             "advertise_addr": None, "listen_addr": "0.0.0.0:2377"})
    assert [error.split(" ")[0] for error in errors] == ["ccc:swarm:leader", "ccc:swarm:manager",
                                                         "ccc:swarm:leader_addr", "ccc:swarm:nodes"]
    assert swarm_problems(LEADER) == []


def test_a_stacks_overlay_is_internal_attachable_labelled_and_encrypted():
    definition = ccc_swarm.overlay_definition("ana-main")
    assert definition == {"name": "overlay-ana-main", "driver": "overlay", "attachable": True, "internal": True,
                          "check_duplicate": True, "labels": {"ccc.swarm-overlay": "ana-main"},
                          "options": {"encrypted": ""}}
    assert ccc_swarm.is_encrypted({"Options": {"encrypted": ""}})
    assert not ccc_swarm.is_encrypted({"Options": {}}) and not ccc_swarm.is_encrypted({"Options": None})
    assert ccc_swarm.stack_of_overlay("overlay-ana-main", definition["labels"]) == "ana-main"
    assert ccc_swarm.stack_of_overlay("overlay-ana-main", {}) is None  # not ours: never removed
    assert ccc_swarm.stack_of_overlay("overlay-other", definition["labels"]) is None


CCC = {
    "user_types": {"lab": {"access": "unrestricted", "default_nodes": ["node1"], "allowed_nodes": ["node1", "node2"]},
                   "course": {"access": "restricted", "default_nodes": ["node3"], "allowed_nodes": ["node3"]}},
    "users": {"a@x.org": {"USER_NAME": "a", "USER_TYPE": "lab"}, "c@x.org": {"USER_NAME": "c", "USER_TYPE": "course"}},
    "containers": [{"STACK_NAME": "a-main", "USER_EMAIL": "a@x.org"},
                   {"STACK_NAME": "a-old", "USER_EMAIL": "a@x.org", "DISABLED": True},
                   {"STACK_NAME": "c-course", "USER_EMAIL": "c@x.org"},
                   {"STACK_NAME": "../bad", "USER_EMAIL": "a@x.org"}],
}


def test_every_active_stack_that_may_run_on_a_swarm_node_gets_an_overlay():
    assert ccc_swarm.wanted_stacks(CCC, {"nodes": []}) == ["a-main", "c-course"]
    assert ccc_swarm.wanted_stacks(CCC, {"nodes": ["node2"]}) == ["a-main"]  # node2 is allowed, not default
    assert ccc_swarm.wanted_stacks(CCC, {"nodes": ["node9"]}) == []


def test_a_container_joins_its_overlay_only_on_an_active_swarm_member():
    assert ccc_swarm.attachment("a-main", "node2", None) is None  # the role is off
    assert ccc_swarm.attachment("a-main", "node2", {"active": False, "creator": False}) is None
    assert ccc_swarm.attachment("a-main", "node2", {"active": True, "creator": False}) == {
        "stack": "a-main", "network": "overlay-a-main", "alias": "node2", "creator": False, "encrypted": True}
    assert ccc_swarm.attachment("a-main", "node1", {"active": True, "creator": True})["creator"] is True
    assert ccc_swarm.attachment("a-main", "node1", {"active": True, "encrypted": False})["encrypted"] is False


def test_overlays_are_encrypted_unless_the_admin_says_the_kernels_cannot():
    assert ccc_swarm.encrypted({}) and ccc_swarm.encrypted({"encrypted": True})
    assert not ccc_swarm.encrypted({"encrypted": False})
    assert ccc_swarm.overlay_definition("a", encrypted=False)["options"] == {}
    errors = swarm_problems({"leader": "node1", "manager": False, "nodes": [], "encrypted": "yes"})
    assert errors == ["ccc:swarm:encrypted must be true or false, got 'yes'"]


def test_the_role_switch_is_ccc_roles():
    assert ccc_swarm.role_on({}) is False  # off by default
    assert ccc_swarm.role_on({"roles": {"swarm": True}}) is True
    assert ccc_swarm.role_on({"roles": {"docker-swarm": True}}) is True
    assert ccc_swarm.role_on({"roles": {"swarm": "absent"}}) is False
    assert ccc_swarm.role_on({"roles": {"swarm": "maybe"}}) is False


def test_the_master_has_the_leader_create_the_overlay_then_redeploys_the_stack():
    calls = []
    result = ccc_swarm.overlay_needed("a-main", "node1", lambda leader, stack: calls.append((leader, stack)) or "created",
                                      lambda stack: calls.append(("redeploy", stack)) or {"jid": "1"})
    assert calls == [("node1", "a-main"), ("redeploy", "a-main")]
    assert result == {"stack": "a-main", "leader": "node1", "overlay": "created", "redeploy": {"jid": "1"}}


def test_the_master_refuses_bad_requests_and_does_not_redeploy_when_the_leader_fails():
    never = pytest.fail
    assert ccc_swarm.overlay_needed("../x", "node1", never, never)["error"] == "not a STACK_NAME"
    assert "no ccc:swarm:leader" in ccc_swarm.overlay_needed("a-main", None, never, never)["error"]

    def refuse(leader, stack):
        raise RuntimeError("node1 did not answer")
    result = ccc_swarm.overlay_needed("a-main", "node1", refuse, never)
    assert result["error"] == "the leader could not create overlay-a-main: node1 did not answer"


def test_the_leader_is_read_from_the_cached_pillars_and_its_answer_checked():
    assert ccc_swarm.leader_of({"n2": {}, "n1": {"swarm": {"leader": "n1"}}}) == "n1"
    assert ccc_swarm.leader_of({"n2": {"swarm": {}}}) is None
    assert ccc_swarm.leader_answer("n1", {"n1": {"ret": "created", "retcode": 0}}) == "created"
    with pytest.raises(RuntimeError, match="did not answer"):
        ccc_swarm.leader_answer("n1", {})
    with pytest.raises(RuntimeError, match="only the swarm leader"):
        ccc_swarm.leader_answer("n1", {"n1": {"ret": "ERROR: only the swarm leader (n0) creates overlays", "retcode": 1}})


def test_the_role_runs_no_service_of_its_own():
    assert ccc_swarm.services(LEADER, "node1") == []
