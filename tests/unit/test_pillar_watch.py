"""The master's pillar watch rules (``ccc_pillar_watch``): a cheap fingerprint of the pillar
files, and which minions an admin's edit concerns."""

import os

import support.site  # noqa: F401  (puts _utils on the path)

import ccc_pillar_watch  # noqa: E402


def test_the_fingerprint_moves_when_a_pillar_file_changes_appears_or_goes(tmp_path):
    root = tmp_path / "pillar"
    (root / "site" / "nodes").mkdir(parents=True)
    (root / "site" / "init.sls").write_text("ccc: {}\n")
    first = ccc_pillar_watch.tree_fingerprint([str(root), str(tmp_path / "missing")])
    assert first == ccc_pillar_watch.tree_fingerprint([str(root)])
    node = root / "site" / "nodes" / "node1.sls"
    node.write_text("ccc: {node: {}}\n")
    second = ccc_pillar_watch.tree_fingerprint([str(root)])
    assert second != first
    os.utime(node, ns=(1, 1))  # same size, another mtime (an editor's save)
    assert ccc_pillar_watch.tree_fingerprint([str(root)]) != second
    node.unlink()
    assert ccc_pillar_watch.tree_fingerprint([str(root)]) == first


def test_the_digest_covers_the_ccc_key_and_render_errors_only():
    base = {"ccc": {"containers": [{"STACK_NAME": "a"}]}, "schedule": {"x": 1}}
    digest = ccc_pillar_watch.ccc_digest(base)
    assert ccc_pillar_watch.ccc_digest(dict(base, schedule={"x": 2})) == digest
    assert ccc_pillar_watch.ccc_digest({"ccc": {"containers": []}}) != digest
    assert ccc_pillar_watch.ccc_digest(dict(base, _errors=["bad yaml"])) != digest


def test_only_minions_whose_ccc_pillar_changed_are_concerned():
    recorded = {"node1": "a", "node2": "b"}
    assert ccc_pillar_watch.concerned(recorded, {"node1": "a2", "node2": "b", "node3": "c"}, changed=False) == ["node1"]
    assert ccc_pillar_watch.concerned({}, {"node1": "a"}, changed=False) == []


def test_after_a_change_a_minion_without_a_record_is_concerned():
    """It may hold the old pillar in memory; the watch cannot tell."""
    assert ccc_pillar_watch.concerned({"node1": "a"}, {"node1": "a", "node3": "c"}, changed=True) == ["node3"]


def test_pillar_roots_of_every_environment():
    opts = {"pillar_roots": {"base": ["/a", "/b"], "dev": ["/c"]}}
    assert ccc_pillar_watch.pillar_roots(opts) == ["/a", "/b", "/c"]
