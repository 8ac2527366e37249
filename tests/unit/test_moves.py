"""Make-before-break moves (ccc_moves): markers on a real folder, and the pure decisions with
explicit times. No time a user can set is an argument: only the nodes' own markers and clock."""

import pytest

import ccc_moves


def test_markers_round_trip_and_never_below_a_missing_root(tmp_path):
    state = tmp_path / "user_data" / ".ccc-salt"
    (tmp_path / "user_data").mkdir()
    ccc_moves.write(str(state), "box", "node2", True, now=100.0)
    ccc_moves.write(str(state), "box", "node1", True, kept=True, now=90.0, placed_at=40.0)
    markers = ccc_moves.read(str(state), "box")
    assert markers["node2"] == {"running": True, "error": None, "kept": False, "at": 100.0}
    assert markers["node1"] == {"running": True, "error": None, "kept": True, "at": 90.0, "placed_at": 40.0}
    ccc_moves.clear(str(state), "box", "node2")
    assert set(ccc_moves.read(str(state), "box")) == {"node1"}
    with pytest.raises(FileNotFoundError):
        ccc_moves.write(str(tmp_path / "gone" / ".ccc-salt"), "box", "node1", True)
    assert not (tmp_path / "gone").exists()


@pytest.mark.parametrize("markers, since, expected", [
    ({"node2": {"running": True, "at": 50}}, 40, (True, "running on node2")),
    ({"node2": {"running": True, "at": 30}}, 40, (False, "node2 has not started it yet")),  # stale: before
    ({"node2": {"running": True, "kept": True, "at": 50}}, 40, (False, "node2 has not started it yet")),
    ({"node2": {"running": False, "error": "the Docker engine of this node does not answer", "at": 50}}, 40,
     (False, "it could not be started there (node2: the Docker engine of this node does not answer)")),
    ({"node2": {"running": False, "error": "old failure", "at": 30}}, 40, (False, "node2 has not started it yet")),
    ({"node2": {"running": True, "at": "2100-01-01"}}, 40, (False, "node2 has not started it yet")),
    ({}, 0, (False, "node2 has not started it yet")),
])
def test_a_move_is_confirmed_only_by_a_running_marker_newer_than_the_copy_it_replaces(markers, since, expected):
    assert ccc_moves.confirmed(markers, ["node2"], "node1", since) == expected


def test_this_nodes_own_marker_never_confirms_its_removal():
    assert ccc_moves.confirmed({"node1": {"running": True, "at": 99}}, ["node1", "node2"], "node1", 0)[0] is False


@pytest.mark.parametrize("markers, running, error, expected", [
    ({}, True, None, True),
    ({"node2": {"running": True, "error": None, "at": 50}}, True, None, False),
    ({"node2": {"running": True, "error": None, "kept": True, "at": 50}}, True, None, True),
    ({"node2": {"running": True, "error": None, "at": 50}}, False, "x", True),
    # a copy kept on node1, placed there after node2's marker: node2 writes a newer one
    ({"node2": {"running": True, "error": None, "at": 50},
      "node1": {"running": True, "kept": True, "at": 70, "placed_at": 60}}, True, None, True),
    ({"node2": {"running": True, "error": None, "at": 50},
      "node1": {"running": True, "kept": True, "at": 70, "placed_at": 40}}, True, None, False),
    # another node of a multi-node placement running: no rewrite ping-pong
    ({"node2": {"running": True, "error": None, "at": 50}, "node1": {"running": True, "at": 60}}, True, None, False),
])
def test_marker_rewritten_only_when_it_would_say_something_new(markers, running, error, expected):
    assert ccc_moves.needs_note(markers, "node2", running, error) is expected


def test_nodes_keeping_a_copy_outside_the_placement_are_named():
    markers = {"node1": {"running": True, "kept": True}, "node2": {"running": True}, "node3": {"running": False}}
    assert ccc_moves.kept_elsewhere(markers, ["node2"]) == ["node1"]


# keep_or_remove: node1's copy, the stack now placed on node2; node1's clock is ``now``.

def test_the_old_copy_goes_as_soon_as_the_new_node_runs_it_whatever_the_settings_file_says():
    # node1 ran it since 100 (its marker); the user moved it at 200 and dated the file 2100: not an input.
    markers = {"node1": {"running": True, "error": None, "kept": False, "at": 100.0},
               "node2": {"running": True, "error": None, "kept": False, "at": 201.0}}
    step = ccc_moves.keep_or_remove(markers, ["node2"], "node1", 202.0, 300)
    assert step["action"] == "remove" and step["why"] == "running on node2"


def test_first_keep_records_when_it_started_and_when_the_copy_was_placed():
    markers = {"node1": {"running": True, "error": None, "kept": False, "at": 100.0}}
    step = ccc_moves.keep_or_remove(markers, ["node2"], "node1", 200.0, 300)
    assert step == {"action": "keep", "why": "node2 has not started it yet", "waited": 0.0,
                    "marker": {"running": True, "error": None, "kept": True, "at": 200.0, "placed_at": 100.0},
                    "recheck": 300.0}
    markers["node1"] = step["marker"]
    again = ccc_moves.keep_or_remove(markers, ["node2"], "node1", 260.0, 300)
    assert again["action"] == "keep" and again["marker"] is None and again["recheck"] == 240.0
    # node2 starts it (a marker newer than node1's placement): the next look removes node1's copy
    markers["node2"] = {"running": True, "error": None, "kept": False, "at": 250.0}
    assert ccc_moves.keep_or_remove(markers, ["node2"], "node1", 261.0, 300)["action"] == "remove"


def test_a_stale_running_marker_of_the_new_node_does_not_confirm():
    # node2 ran it long ago and lost it without clearing its marker (its minion was down)
    markers = {"node1": {"running": True, "error": None, "kept": True, "at": 200.0, "placed_at": 100.0},
               "node2": {"running": True, "error": None, "kept": False, "at": 90.0}}
    step = ccc_moves.keep_or_remove(markers, ["node2"], "node1", 210.0, 300)
    assert step["action"] == "keep" and step["why"] == "node2 has not started it yet"


def test_the_move_window_ends_the_old_copy_when_the_new_node_says_nothing():
    markers = {"node1": {"running": True, "error": None, "kept": True, "at": 200.0, "placed_at": 100.0}}
    assert ccc_moves.keep_or_remove(markers, ["node2"], "node1", 499.0, 300)["action"] == "keep"
    step = ccc_moves.keep_or_remove(markers, ["node2"], "node1", 500.0, 300)
    assert step["action"] == "expire" and step["waited"] == 300.0 and step["why"] == "node2 has not started it yet"


def test_a_failure_reported_for_this_move_keeps_the_only_running_copy_past_the_window():
    markers = {"node1": {"running": True, "error": None, "kept": True, "at": 200.0, "placed_at": 100.0},
               "node2": {"running": False, "error": "the Docker engine of this node does not answer", "at": 201.0}}
    step = ccc_moves.keep_or_remove(markers, ["node2"], "node1", 900.0, 300)
    assert step["action"] == "keep" and step["recheck"] is None
    assert step["why"] == "it could not be started there (node2: the Docker engine of this node does not answer)"
    # a failure from before this copy was placed is not about this move
    markers["node2"]["at"] = 99.0
    assert ccc_moves.keep_or_remove(markers, ["node2"], "node1", 900.0, 300)["action"] == "expire"


def test_a_kept_marker_from_the_future_counts_from_now():
    markers = {"node1": {"running": True, "error": None, "kept": True, "at": 9e9, "placed_at": 100.0}}
    step = ccc_moves.keep_or_remove(markers, ["node2"], "node1", 200.0, 300)
    assert step["action"] == "keep" and step["marker"]["at"] == 200.0 and step["recheck"] == 300.0


def test_moving_back_and_forth_never_leaves_two_copies_once_each_new_node_runs_it():
    """The attack's sequence on the markers alone: node1 -> node2 -> node1 -> node2, each new node
    running it a second after the move; the old copy goes at its next look every time."""
    markers, now = {"node1": {"running": True, "error": None, "kept": False, "at": 100.0}}, 100.0
    here, there = "node1", "node2"
    for _ in range(3):
        now += 10
        step = ccc_moves.keep_or_remove(markers, [there], here, now, 300)  # the old node looks first
        assert step["action"] == "keep"
        markers[here] = step["marker"]
        now += 1
        assert ccc_moves.needs_note(markers, there, True, None)
        markers[there] = {"running": True, "error": None, "kept": False, "at": now}
        now += 1
        assert ccc_moves.keep_or_remove(markers, [there], here, now, 300)["action"] == "remove"
        del markers[here]
        here, there = there, here


@pytest.mark.parametrize("cluster, expected", [
    ({}, (300.0, None)),
    ({"moves": {"max_window": 60}}, (60.0, None)),
    ({"moves": {"max_window": 0}}, (300.0, "ccc:cluster:moves:max_window must be a number of seconds above 0, "
                                           "got 0; using 300")),
    ({"moves": {"max_window": True}}, (300.0, "ccc:cluster:moves:max_window must be a number of seconds above 0, "
                                              "got True; using 300")),
])
def test_max_window_from_pillar(cluster, expected):
    assert ccc_moves.max_window(cluster) == expected
