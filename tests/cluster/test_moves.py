"""Make-before-break moves on the live master + two minions harness: a move to a node whose
dockerd is down never loses the container; the user and the admin are told the truth; the move
completes by itself once that dockerd is back. A settings file the user dated in 2100 decides
nothing: the old copy goes as soon as the new node runs it, and at the latest after the move
window (ccc:cluster:moves:max_window)."""

import pathlib
import re
import subprocess
import time

import pytest

from support.nodes import node_dockerd

from .conftest import MOVE_WINDOW, NODES, managed_stacks
from .test_redeploy import apply_returns, redeploy_failure, settings_dir, wait_for

pytestmark = pytest.mark.docker

JUPYTER = "ana-jupyter"


def test_a_move_to_a_node_whose_docker_is_down_keeps_the_container(master, minions, dockerds, event_listener,
                                                                   cluster_storage):
    node1 = dockerds["node1"]
    assert JUPYTER in managed_stacks(node1)
    home = pathlib.Path(cluster_storage) / "shared" / "user_data" / "ana.novak@example.org" / "ana-main"
    (home / "before-move.txt").write_text("kept\n")
    dockerds["node2"].stop()
    try:
        path = settings_dir(cluster_storage, "ana.novak@example.org") / f"{JUPYTER}.yml"
        report = path.parent / f"{JUPYTER}.deploy"
        edited = time.time()
        path.write_text(f"{JUPYTER}:\n  DEPLOYMENT_NODES: [node2]\n")

        # node2's job fails for this container (counted, not "0 processed, 0 failed") ...
        def failed_on_node2():
            for event in apply_returns(event_listener, master, "node2", edited, JUPYTER):
                comment = redeploy_failure(event, JUPYTER)
                if comment:
                    return comment
            return None
        comment = wait_for(failed_on_node2)
        assert comment and "Docker engine" in comment, comment
        # ... node1 keeps it running, and the user reads why.
        assert wait_for(lambda: "still running on node1" in report.read_text())
        assert "node2" in report.read_text()
        for _ in range(5):
            assert JUPYTER in managed_stacks(node1)
            time.sleep(1)
    finally:
        dockerds["node2"] = node_dockerd("node2")
    back = time.monotonic()
    # dockerd back: node2 starts it, then node1 removes its copy.
    assert wait_for(lambda: JUPYTER in managed_stacks(dockerds["node2"]), timeout=60)
    started = time.monotonic() - back
    assert wait_for(lambda: JUPYTER not in managed_stacks(node1), timeout=30)
    print(f"move completed {started:.1f} s after node2's dockerd answered")
    code = dockerds["node2"].client().containers.get(JUPYTER).exec_run(["cat", "/home/ana/before-move.txt"])
    assert code.output == b"kept\n"

    # Back to node1 (make-before-break the other way), so the other tests see the sample site.
    path.write_text(f"{JUPYTER}: {{}}\n")
    assert wait_for(lambda: JUPYTER in managed_stacks(node1) and JUPYTER not in managed_stacks(dockerds["node2"]),
                    timeout=60)


def _date_2100(path):
    """The attack: the user dates their settings file in 2100 (``touch -d``, as in their container)."""
    subprocess.run(["touch", "-d", "2100-01-01", str(path)], check=True)
    assert path.stat().st_mtime > time.time() + 50 * 365 * 86400


def _copies(dockerds):
    return {node for node in NODES if JUPYTER in managed_stacks(dockerds[node])}


def _move(dockerds, path, new, old, timeout=90):
    """Save a move to ``new`` dated 2100, then watch both nodes: returns the seconds both ran the
    stack (the move window) once only ``new`` runs it."""
    path.write_text(f"{JUPYTER}:\n  DEPLOYMENT_NODES: [{new}]\n")
    _date_2100(path)
    deadline, both_since, longest = time.monotonic() + timeout, None, 0.0
    while time.monotonic() < deadline:
        copies, now = _copies(dockerds), time.monotonic()
        if copies == {new, old}:
            both_since = both_since or now
            longest = now - both_since
        elif copies == {new}:
            return longest if both_since is None else now - both_since
        time.sleep(0.2)
    pytest.fail(f"{JUPYTER} still runs on {_copies(dockerds)} {timeout} s after its move to {new}")


def test_a_settings_file_dated_2100_decides_nothing_about_moves(master, minions, dockerds, cluster_storage):
    """Moving back and forth with the settings file dated 2100: each time the old copy goes as soon
    as the new node runs it (root's markers, never the file's times), and .deploy says where it runs."""
    path = settings_dir(cluster_storage, "ana.novak@example.org") / f"{JUPYTER}.yml"
    report = path.parent / f"{JUPYTER}.deploy"
    assert wait_for(lambda: _copies(dockerds) == {"node1"}, timeout=60)
    windows, held = [], []
    for new, old in (("node2", "node1"), ("node1", "node2"), ("node2", "node1")):
        windows.append(_move(dockerds, path, new, old))
        held.append(re.search(r"so this one waited (\d+) s", report.read_text()))
        for _ in range(10):  # it stays moved: no copy comes back on the old node
            assert _copies(dockerds) == {new}
            time.sleep(0.5)
        text = report.read_text()
        assert "has not started it yet" not in text and "still running on" not in text, text
        assert f"moved to {new} (running on {new}); the copy on {old} was removed" in text or \
            (f"node: {new}" in text and "NOT deployed" not in text), text
    print(f"move windows with the settings file dated 2100: {', '.join(f'{w:.1f}' for w in windows)} s; "
          f"held by the user's rate limit: {', '.join(f'{h.group(1)} s' if h else 'no' for h in held)}")
    assert max(windows) < MOVE_WINDOW

    path.write_text(f"{JUPYTER}: {{}}\n")  # back to the sample site's node1 for the other tests
    assert wait_for(lambda: _copies(dockerds) == {"node1"}, timeout=90)


def test_a_copy_is_kept_for_a_move_at_most_the_move_window(master, minions, dockerds, cluster_storage):
    """node2's minion is down, so nothing confirms the move: node1 keeps its copy for
    ccc:cluster:moves:max_window, then removes it and tells the user why (file dated 2100 too)."""
    path = settings_dir(cluster_storage, "ana.novak@example.org") / f"{JUPYTER}.yml"
    report = path.parent / f"{JUPYTER}.deploy"
    assert wait_for(lambda: _copies(dockerds) == {"node1"}, timeout=60)
    minions["node2"].terminate()
    try:
        path.write_text(f"{JUPYTER}:\n  DEPLOYMENT_NODES: [node2]\n")
        _date_2100(path)
        saved = time.monotonic()
        assert wait_for(lambda: "still running on node1: moving to node2" in report.read_text(), timeout=30)
        assert "at the latest" in report.read_text()
        assert wait_for(lambda: not _copies(dockerds), timeout=MOVE_WINDOW + 60, interval=0.5)
        kept = time.monotonic() - saved
        print(f"copy kept {kept:.1f} s for a move nobody confirmed (max_window {MOVE_WINDOW} s)")
        assert MOVE_WINDOW - 2 <= kept <= MOVE_WINDOW + 30
        assert wait_for(lambda: "removed from node1 after" in report.read_text(), timeout=10)
        text = report.read_text()
        assert f"a move keeps the old copy {MOVE_WINDOW} s at most; it runs on node2 once started there" in text
        waited = int(re.search(r"removed from node1 after (\d+) s: node2 has not started it yet", text).group(1))
        print(f"node1 kept its copy {waited} s from its first keep (report), {kept:.1f} s from the save")
        assert MOVE_WINDOW <= waited <= MOVE_WINDOW + 15
    finally:
        minions["node2"].start()
    # node2's minion back: its start-up reconcile starts it there.
    assert wait_for(lambda: _copies(dockerds) == {"node2"}, timeout=120)
    path.write_text(f"{JUPYTER}: {{}}\n")
    assert wait_for(lambda: _copies(dockerds) == {"node1"}, timeout=90)
