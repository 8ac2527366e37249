"""Make-before-break move markers (ccc_moves) on a real folder, with explicit times."""

import pytest

import ccc_moves


def test_markers_round_trip_and_never_below_a_missing_root(tmp_path):
    state = tmp_path / "user_data" / ".ccc-salt"
    (tmp_path / "user_data").mkdir()
    ccc_moves.write(str(state), "box", "node2", True, now=100.0)
    ccc_moves.write(str(state), "box", "node1", True, kept=True, now=90.0)
    markers = ccc_moves.read(str(state), "box")
    assert markers["node2"] == {"running": True, "error": None, "kept": False, "at": 100.0}
    ccc_moves.clear(str(state), "box", "node2")
    assert set(ccc_moves.read(str(state), "box")) == {"node1"}
    with pytest.raises(FileNotFoundError):
        ccc_moves.write(str(tmp_path / "gone" / ".ccc-salt"), "box", "node1", True)
    assert not (tmp_path / "gone").exists()


@pytest.mark.parametrize("markers, since, expected", [
    ({"node2": {"running": True, "at": 50}}, 40, (True, "running on node2")),
    ({"node2": {"running": True, "at": 30}}, 40, (False, "node2 has not started it yet")),  # before the edit
    ({"node2": {"running": True, "kept": True, "at": 50}}, 40, (False, "node2 has not started it yet")),
    ({"node2": {"running": False, "error": "the Docker engine of this node does not answer", "at": 50}}, 40,
     (False, "it could not be started there (node2: the Docker engine of this node does not answer)")),
    ({}, 0, (False, "node2 has not started it yet")),
])
def test_a_move_is_confirmed_only_by_a_fresh_running_marker_of_the_placement(markers, since, expected):
    assert ccc_moves.confirmed(markers, ["node2"], "node1", since) == expected


def test_this_nodes_own_marker_never_confirms_its_removal():
    assert ccc_moves.confirmed({"node1": {"running": True, "at": 99}}, ["node1", "node2"], "node1", 0)[0] is False


@pytest.mark.parametrize("marker, running, error, since, expected", [
    (None, True, None, 0, True),
    ({"running": True, "error": None, "at": 50}, True, None, 40, False),
    ({"running": True, "error": None, "at": 30}, True, None, 40, True),   # older than the user's edit
    ({"running": True, "error": None, "kept": True, "at": 50}, True, None, 0, True),
    ({"running": True, "error": None, "at": 50}, False, "x", 0, True),
])
def test_marker_rewritten_only_when_it_would_say_something_new(marker, running, error, since, expected):
    assert ccc_moves.needs_note(marker, running, error, since) is expected


def test_nodes_keeping_a_copy_outside_the_placement_are_named():
    markers = {"node1": {"running": True, "kept": True}, "node2": {"running": True}, "node3": {"running": False}}
    assert ccc_moves.kept_elsewhere(markers, ["node2"]) == ["node1"]
