"""The redeploy index (``ccc_redeploy_index``) gives every stack the same targets and user as
reading every minion's pillar (``ccc_redeploy.placement_from``), after a rebuild and after any
fold of changed minions; and it answers ``None`` (the runner then reads every pillar) whenever
it cannot be trusted."""

import copy
import json
import os
import time

import pytest

from support.site import sample_ccc

import ccc_redeploy  # noqa: E402  (support.site puts _utils on the path)
import ccc_redeploy_index as index  # noqa: E402


def _site():
    """Three minions whose pillars are the sample site's, with a pinned stack, a stack defined
    twice, a renamed node and a minion-specific stack."""
    cccs = {minion: copy.deepcopy(sample_ccc(node)) for minion, node in
            (("node1", "node1"), ("node2", "node2"), ("node3.lab", "node3"))}
    for ccc in cccs.values():
        ccc["containers"].append({"STACK_NAME": "pinned", "USER_EMAIL": "cene.zupan@example.org",
                                  "CONTAINER_IMAGE": "x", "ALLOWED_NODES": ["node2"]})
        ccc["containers"] += [{"STACK_NAME": "twice", "USER_EMAIL": "ana.novak@example.org"}] * 2
    cccs["node3.lab"]["node"] = dict(cccs["node3.lab"].get("node") or {}, name="node3")
    cccs["node1"]["containers"].append({"STACK_NAME": "only-here", "USER_EMAIL": "cene.zupan@example.org",
                                        "ALLOWED_NODES": ["node1"]})
    return cccs


def _stacks(cccs):
    names = {entry.get("STACK_NAME") for ccc in cccs.values() for entry in ccc.get("containers") or []}
    return sorted(name for name in names if isinstance(name, str)) + ["no-such-stack"]


@pytest.fixture
def keys(tmp_path):
    """A pki dir whose accepted-keys folder was last changed a minute ago; its stamp."""
    folder = tmp_path / "pki" / "minions"
    folder.mkdir(parents=True)
    past = time.time() - 60
    os.utime(folder, (past, past))
    return str(tmp_path / "pki")


def _build(root, cccs, stamp, every=True, removed=()):
    summaries = {minion: index.summary(ccc, minion) for minion, ccc in cccs.items()}
    return index.write(str(root), summaries, removed, stamp, every=every)


def _expected(cccs, stack):
    """What the runner computes without the index; ``None`` for a stack without targets (the index
    does not know it: the runner computes that it goes nowhere)."""
    targets, user = ccc_redeploy.placement_from(cccs, stack)
    return (targets, user) if targets else None


def test_the_index_gives_every_stack_what_reading_every_pillar_gives(tmp_path, keys):
    cccs = _site()
    stamp = index.keys_stamp(keys)
    assert _build(tmp_path / "index", cccs, stamp)
    for stack in _stacks(cccs):
        assert index.lookup(str(tmp_path / "index"), stack, stamp) == _expected(cccs, stack), stack
    assert index.lookup(str(tmp_path / "index"), "pinned", stamp) == (["node2", "node3.lab"], "cene.zupan@example.org")
    assert index.lookup(str(tmp_path / "index"), "only-here", stamp) == (["node1"], "cene.zupan@example.org")  # only node1's pillar has it
    assert index.lookup(str(tmp_path / "index"), "twice", stamp) is None  # defined twice: nowhere


@pytest.mark.parametrize("change", ["move", "pin elsewhere", "remove stack", "rename node", "new minion",
                                    "remove minion", "new user"])
def test_folding_the_changed_minions_in_gives_what_a_rebuild_gives(tmp_path, keys, change):
    """The watch folds in only the minions it compiled: the result must be what reading every
    pillar now gives, and the same files as an index built from scratch."""
    cccs = _site()
    stamp = index.keys_stamp(keys)
    root = tmp_path / "index"
    _build(root, cccs, stamp)
    after, changed, removed = copy.deepcopy(cccs), set(), set()
    if change == "move":  # the student type may now run on node1 too, on node1's pillar only
        after["node1"]["user_types"]["student"]["allowed_nodes"].append("node1")
        changed = {"node1"}
    elif change == "pin elsewhere":
        for minion in after:
            next(e for e in after[minion]["containers"] if e["STACK_NAME"] == "pinned")["ALLOWED_NODES"] = ["node1"]
        changed = set(after)
    elif change == "remove stack":
        for minion in after:
            after[minion]["containers"] = [e for e in after[minion]["containers"] if e["STACK_NAME"] != "ana-main"]
        changed = set(after)
    elif change == "rename node":
        after["node2"]["node"] = dict(after["node2"].get("node") or {}, name="node9")
        changed = {"node2"}
    elif change == "new minion":
        after["node4"] = copy.deepcopy(sample_ccc("node3"))
        after["node4"]["node"] = {"name": "node3"}
        changed = {"node4"}
    elif change == "remove minion":
        del after["node2"]
        removed = {"node2"}
    elif change == "new user":
        for minion in after:
            next(e for e in after[minion]["containers"] if e["STACK_NAME"] == "pinned")["USER_EMAIL"] = "x@example.org"
        changed = set(after)
    assert index.write(str(root), {minion: index.summary(after[minion], minion) for minion in changed},
                       removed, stamp)
    for stack in _stacks(after):
        assert index.lookup(str(root), stack, stamp) == _expected(after, stack), (change, stack)
    _build(tmp_path / "fresh", after, stamp)
    assert _files(root) == _files(tmp_path / "fresh")


def _files(root):
    return {str(path.relative_to(root)): json.loads(path.read_text())
            for path in sorted(root.rglob("*.json")) if path.name != "state.json"}


def test_every_minion_compiled_drops_the_minions_the_index_knows_beyond_them(tmp_path, keys):
    cccs = _site()
    stamp = index.keys_stamp(keys)
    _build(tmp_path, cccs, stamp)
    del cccs["node1"]
    _build(tmp_path, cccs, stamp)
    assert index.known_minions(str(tmp_path)) == {"node2", "node3.lab"}
    assert index.lookup(str(tmp_path), "only-here", stamp) is None
    assert index.lookup(str(tmp_path), "ana-main", stamp)[0] == ["node2", "node3.lab"]


def test_a_key_accepted_or_deleted_since_the_index_was_written_makes_it_distrusted(tmp_path, keys):
    cccs = _site()
    stamp = index.keys_stamp(keys)
    _build(tmp_path / "index", cccs, stamp)
    (tmp_path / "pki" / "minions" / "node4").write_text("key\n")
    assert index.keys_stamp(keys) is None  # changed this instant: not told apart yet
    past = time.time() - 30
    os.utime(tmp_path / "pki" / "minions", (past, past))
    later = index.keys_stamp(keys)
    assert later not in (None, stamp)
    assert index.lookup(str(tmp_path / "index"), "ana-main", later) is None
    assert index.lookup(str(tmp_path / "index"), "ana-main", None) is None


def test_a_half_written_or_foreign_index_is_distrusted(tmp_path, keys):
    cccs = _site()
    stamp = index.keys_stamp(keys)
    root = tmp_path / "index"
    assert index.lookup(str(root), "ana-main", stamp) is None  # none yet
    _build(root, cccs, stamp)
    good = (root / "state.json").read_text()
    for state in ({"version": index.VERSION, "complete": False, "keys": stamp},  # a crash mid-write
                  {"version": index.VERSION + 1, "complete": True, "keys": stamp},
                  {"version": index.VERSION, "complete": True, "keys": None}, "not json"):
        (root / "state.json").write_text(json.dumps(state) if isinstance(state, dict) else state)
        assert index.lookup(str(root), "ana-main", stamp) is None, state
    (root / "state.json").write_text(good)
    for broken in ('{"targets": ["node1"]}', '{"minions": ["node1", 3], "user": null}', '{"minions": [], "user": null}',
                   '{"minions": ["node1"], "user": 7}', "[]"):
        (root / "stacks" / "ana-main.json").write_text(broken)
        assert index.lookup(str(root), "ana-main", stamp) is None, broken
    assert index.lookup(str(root), "../state", stamp) is None  # not a STACK_NAME


def test_a_partial_fold_into_an_index_that_is_not_whole_leaves_it_distrusted(tmp_path, keys):
    cccs = _site()
    stamp = index.keys_stamp(keys)
    root = tmp_path / "index"
    assert not index.write(str(root), {"node1": index.summary(cccs["node1"], "node1")}, (), stamp)
    assert not index.usable(str(root))
    assert index.lookup(str(root), "ana-main", stamp) is None
    assert _build(root, cccs, stamp)  # every minion: rebuilt
    assert index.lookup(str(root), "ana-main", stamp) == _expected(cccs, "ana-main")


def test_a_minion_id_that_cannot_name_a_file_is_refused(tmp_path, keys):
    with pytest.raises(ValueError):
        index.write(str(tmp_path), {"../x": {}}, (), index.keys_stamp(keys), every=True)
    assert index.lookup(str(tmp_path), "ana-main", index.keys_stamp(keys)) is None
