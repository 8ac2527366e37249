"""A recreate that a killed run left half done, without Docker: which container is the stack's
(the one named exactly STACK_NAME, never a ``.ccc-new``/``.ccc-old`` leftover), what orphans
removal takes, and the rule ``ccc_swap.plan`` that finishes or undoes the swap. The real kills, at
every step of a recreate, are in tests/integration/test_swap_faults.py."""

import logging

import docker.errors
import pytest

import ccc_node_record
import ccc_orphans
import ccc_rules
import ccc_swap

MANAGED = {"ccc.managed-by": "ccc-salt"}
STARTED, NEVER = "2024-05-01T10:00:00.5Z", ccc_swap.NEVER_STARTED


class FakeApi:
    def __init__(self, containers):
        self.by_id = {c["Id"]: c for c in containers}

    def containers(self, all=False, filters=None):
        return [dict(c) for c in self.by_id.values() if c["Labels"].get("ccc.managed-by") == "ccc-salt"]

    def inspect_container(self, name):
        for c in self.by_id.values():
            if name in (c["Id"], c["Names"][0].lstrip("/")):
                return {"Id": c["Id"], "Name": c["Names"][0], "Config": {"Labels": c["Labels"]},
                        "State": {"Running": c["State"] == "running"}}
        raise docker.errors.NotFound(name)

    def remove_container(self, container_id, v=False, force=False):
        del self.by_id[container_id]


class FakeClient:
    def __init__(self, containers, state_dir):
        self.api = FakeApi(containers)
        self.ccc_state_dir = str(state_dir)


@pytest.fixture(autouse=True)
def ccc_node_record_log(caplog, monkeypatch):
    """ccc_node_record's log goes to caplog only, not to Salt's deferred handler (printed at exit)."""
    logger = logging.getLogger("ccc_node_record")
    monkeypatch.setattr(logger, "propagate", False)
    monkeypatch.setattr(logger, "handlers", [caplog.handler])


def container(number, name, stack, state="exited"):
    return {"Id": f"{number:064x}", "Names": [f"/{name}"], "State": state, "Labels": dict(MANAGED, **{"ccc.stack": stack})}


def client_with(tmp_path, containers):
    client = FakeClient(containers, tmp_path / "state")
    ccc_node_record.recorded_ids(client)  # adopts them: created by ccc-salt
    return client


@pytest.mark.parametrize("order", [1, -1])
def test_a_stack_is_its_container_named_exactly_so_and_a_leftover_never_hides_it(tmp_path, order):
    found = [container(1, "ana-main", "ana-main", "running"), container(2, "ana-main.ccc-old", "ana-main"),
             container(3, "ana-main.ccc-new", "ana-main")][::order]
    client = client_with(tmp_path, found)
    managed = ccc_node_record.managed_containers(client)
    assert managed["ana-main"]["Id"] == f"{1:064x}" and managed["ana-main"]["State"] == "running"


def test_a_stack_with_only_leftovers_shows_the_one_it_rolls_back_to(tmp_path):
    client = client_with(tmp_path, [container(3, "ana-main.ccc-new", "ana-main"),
                                    container(2, "ana-main.ccc-old", "ana-main")])
    assert ccc_node_record.managed_containers(client)["ana-main"]["Id"] == f"{2:064x}"


def test_orphans_take_the_leftovers_of_a_gone_stack_but_not_of_a_known_one(tmp_path):
    client = client_with(tmp_path, [
        container(1, "gone", "gone"), container(2, "gone.ccc-old", "gone"), container(3, "gone.ccc-new", "gone"),
        container(4, "ana-main", "ana-main", "running"), container(5, "ana-main.ccc-old", "ana-main"),
    ])
    outcome = ccc_orphans.remove(client, {"ana-main"}, max_share=1)
    assert outcome == {"orphans": ["gone"], "managed": 2, "refused": None}
    # The known stack's leftover is its own apply's to settle (it may be the one to roll back to).
    assert sorted(c["Names"][0] for c in client.api.by_id.values()) == ["/ana-main", "/ana-main.ccc-old"]


def test_a_container_whose_create_was_cut_short_counts_only_while_its_name_is_marked(tmp_path):
    client = client_with(tmp_path, [])
    cut_short = container(7, "ana-main.ccc-new", "ana-main")
    client.api.by_id[cut_short["Id"]] = cut_short
    attrs = client.api.inspect_container("ana-main.ccc-new")
    assert not ccc_node_record.is_managed(client, attrs)
    ccc_node_record.change(client, add=[ccc_node_record.CREATING + "ana-main.ccc-new"])
    assert ccc_node_record.is_managed(client, attrs)
    assert ccc_node_record.is_managed(client, dict(cut_short))  # a list summary too
    assert not ccc_node_record.is_managed(client, client.api.inspect_container(cut_short["Id"]) | {"Name": "/other"})


def test_a_first_create_cut_short_is_recorded_by_id_and_its_name_no_longer_counts(tmp_path):
    # A first create is made under STACK_NAME itself: killed before its id was recorded, the
    # next apply keeps it (it starts it) and records it by id, dropping the name's marker.
    client = client_with(tmp_path, [])
    ccc_node_record.change(client, add=[ccc_node_record.CREATING + "ana-main"])
    cut_short = container(7, "ana-main", "ana-main", state="created")
    client.api.by_id[cut_short["Id"]] = cut_short
    real, done = ccc_swap.settle(client, "ana-main", True, False, existing={"ana-main"})
    assert real["Id"] == cut_short["Id"] and done == {}
    assert ccc_node_record.recorded_ids(client) == {cut_short["Id"]}
    assert not ccc_node_record.is_managed(client, {"Id": "other", "Names": ["/ana-main"], "Labels": dict(MANAGED)})
    # without a container (killed before Docker made it) only the marker goes
    ccc_node_record.change(client, add=[ccc_node_record.CREATING + "bor-main"])
    assert ccc_swap.settle(client, "bor-main", True, False, existing=set()) == (None, {})
    assert ccc_node_record.recorded_ids(client) == {cut_short["Id"]}


def attrs(name, running=False, started=NEVER):
    return {"Id": name, "Name": f"/{name}", "State": {"Running": running, "StartedAt": started}}


OLD_RUNNING, OLD_STOPPED = attrs("old", True, STARTED), attrs("old", False, STARTED)
NEW, NEW_STARTED = attrs("new"), attrs("new", True, STARTED)
OLD_ASIDE = attrs("old-aside", False, STARTED)


# (state a kill leaves: <stack>, .ccc-new, .ccc-old) -> (removed, renamed back)
@pytest.mark.parametrize("real, new, old, removed, restored", [
    pytest.param(None, NEW, None, ["new"], None, id="first-create-before-rename"),
    pytest.param(OLD_RUNNING, NEW, None, ["new"], None, id="after-create"),
    pytest.param(OLD_STOPPED, NEW, None, ["new"], None, id="after-stop"),
    pytest.param(None, NEW, OLD_ASIDE, ["new"], "old-aside", id="after-rename-old"),
    pytest.param(NEW, None, OLD_ASIDE, ["new"], "old-aside", id="after-rename-new"),
    pytest.param(NEW_STARTED, None, OLD_ASIDE, ["old-aside"], None, id="after-start"),
    pytest.param(attrs("new", False, STARTED), None, OLD_ASIDE, ["old-aside"], None, id="started-then-rebooted"),
    pytest.param(None, None, OLD_ASIDE, [], "old-aside", id="rollback-cut-short"),
    pytest.param(NEW, None, None, [], None, id="first-create-before-start"),
    pytest.param(OLD_RUNNING, None, None, [], None, id="nothing-to-settle"),
])
def test_the_swap_is_finished_once_the_new_container_started_and_undone_before(real, new, old, removed, restored):
    remove, restore = ccc_swap.plan(real, new, old)
    assert [c["Id"] for c in remove] == removed
    assert (restore or {}).get("Id") == restored


HASH = ccc_rules.SPEC_HASH_LABEL


@pytest.mark.parametrize("summary, image_id, expected", [
    pytest.param({"State": "running", "Labels": {HASH: "h1"}, "ImageID": "sha256:a"}, None, True, id="running-same"),
    pytest.param({"State": "running", "Labels": {HASH: "h1"}, "ImageID": "sha256:a"}, "sha256:a", True, id="same-image"),
    pytest.param({"State": "running", "Labels": {HASH: "h1"}, "ImageID": "sha256:a"}, "sha256:b", False, id="new-image"),
    pytest.param({"State": "running", "Labels": {HASH: "h0"}}, None, False, id="other-spec"),
    pytest.param({"State": "exited", "Labels": {HASH: "h1"}}, None, False, id="stopped"),
    pytest.param({"State": "restarting", "Labels": {HASH: "h1"}}, None, False, id="restarting"),
    pytest.param({"State": "running", "Labels": None}, None, False, id="no-labels"),
    pytest.param(None, None, False, id="not-listed"),
])
def test_the_run_list_shows_a_container_running_its_spec_only_with_the_same_hash_image_and_running(
        summary, image_id, expected):
    """The scheduling hint (``ccc_deploy``): only a container that needs nothing but a check."""
    assert ccc_swap.looks_unchanged(summary, {"labels": {HASH: "h1"}}, image_id) is expected
