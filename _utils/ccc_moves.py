"""
Make-before-break moves: a node removes a container that is placed elsewhere only once a node
of the new placement reports it running, and at the latest when the move window ends.

Every node writes a small marker per stack into the shared state dir
(``<state_dir>/running/<STACK_NAME>/<node>.json``, root's) when it runs the container, fails to
run it (with the reason) or keeps it for a move; it deletes its marker when it removes the
container. Every time in a marker is the writing node's clock, never a time a user can set: the
settings file's mtime, ctime and contents decide nothing here (a user could date the file in
2100 and keep a copy, with its GPUs, on every node they move through).

A node whose copy is no longer placed there keeps it (``keep_or_remove``) until a node of the new
placement has a running marker written after this copy was last placed here (``placed_at``: the
time of this node's own last running marker; a marker from before that is a stale one, say of a
node that lost the container while its minion was down). A running node rewrites its marker
when a kept copy elsewhere was placed after it (``needs_note``), so the two always meet; when it
starts a container another node still keeps, it announces it (``ccc/moved/<STACK_NAME>``) so the
old copy goes within seconds. The old copy is kept at most ``ccc:cluster:moves:max_window``
seconds (from its first keep, by its own node's clock): then it is removed and the user told
why, unless the new placement reported for this move that it could not start it (then the old
copy is the only one running).

Plain Python on the shared state dir (never created below a missing storage root).
"""

import json
import os
import time

import ccc_pillar
import ccc_rules
import ccc_safefs

MARKER_MAX_BYTES = 4096


def _folder(state_dir, stack):
    return os.path.join(state_dir, "running", stack)


def _time(value):
    """A marker's time as a number (0 when missing or not a number)."""
    return float(value) if ccc_rules.is_number(value) else 0.0


def read(state_dir, stack):
    """``{node: marker}`` of one stack (empty when none or the storage is away)."""
    folder = _folder(state_dir, stack)
    try:
        names = os.listdir(folder)
    except OSError:
        return {}
    markers = {}
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(folder, name), "rb") as handle:
                marker = json.loads(handle.read(MARKER_MAX_BYTES))
        except (OSError, ValueError):
            continue
        if isinstance(marker, dict):
            markers[name[:-5]] = marker
    return markers


def write(state_dir, stack, node, running, error=None, kept=False, now=None, placed_at=None):
    """Record this node's state of ``stack``; never below a missing storage root. ``placed_at``
    (kept markers): when this copy was last placed here."""
    marker = {"running": bool(running), "error": error, "kept": bool(kept), "at": now or time.time()}
    if kept:
        marker["placed_at"] = marker["at"] if placed_at is None else placed_at
    ccc_safefs.replace_file(os.path.join(_folder(state_dir, stack), f"{node}.json"), json.dumps(marker).encode(),
                            0o600, root=os.path.dirname(state_dir.rstrip("/")))


def clear(state_dir, stack, node):
    """Forget this node's marker (the container is no longer here)."""
    try:
        os.unlink(os.path.join(_folder(state_dir, stack), f"{node}.json"))
    except FileNotFoundError:
        pass


def max_window(cluster):
    """``(seconds, problem)``: ``ccc:cluster:moves:max_window`` (``ccc_pillar.cluster_seconds``)."""
    return ccc_pillar.cluster_seconds(cluster, ("moves", "max_window"))


def _placed_at(marker):
    """When a kept copy was last placed on its node (older kept markers: their time)."""
    return _time(marker.get("placed_at", marker.get("at")))


def needs_note(markers, node, running, error):
    """
    Whether ``node``'s marker must be (re)written: missing, saying something else, or (running)
    not newer than when a copy kept elsewhere was last placed there, so that copy can tell this
    marker is about the move it waits for.
    """
    marker = markers.get(node)
    if not marker:
        return True
    if bool(marker.get("running")) != bool(running) or marker.get("error") != error or marker.get("kept"):
        return True
    return bool(running) and any(
        other.get("kept") and _placed_at(other) >= _time(marker.get("at"))
        for name, other in markers.items() if name != node)


def confirmed(markers, placement, this_node, since):
    """
    Whether a node of ``placement`` (other than this one) runs the stack since ``since`` (its
    marker running, not kept, written after it). Returns ``(ok, why)``; ``why`` names the nodes'
    errors reported since then, or that they have not started it.
    """
    others = [node for node in placement if node != this_node]
    for node in others:
        marker = markers.get(node) or {}
        if marker.get("running") and not marker.get("kept") and _time(marker.get("at")) > since:
            return True, f"running on {node}"
    errors = failures(markers, others, since)
    if errors:
        return False, "it could not be started there (" + "; ".join(errors) + ")"
    return False, f"{', '.join(others)} has not started it yet"


def failures(markers, nodes, since):
    """``node: error`` of the ``nodes`` that reported since ``since`` that they could not run it."""
    return [f"{node}: {markers[node]['error']}" for node in nodes
            if markers.get(node) and not markers[node].get("running") and markers[node].get("error")
            and _time(markers[node].get("at")) > since]


def keep_or_remove(markers, placement, here, now, window):
    """
    What the node ``here`` does with its copy of a stack placed on ``placement`` (not here):
    pure, on the markers and this node's clock ``now``. Returns a dict: ``action`` ``remove``
    (a node of the placement runs it since this copy was placed here), ``expire`` (kept
    ``window`` s and nobody reported a failure: it goes all the same), or ``keep``; ``why`` in
    words; ``waited`` s kept so far; ``marker`` the kept marker to write (None: unchanged);
    ``recheck`` s until the window ends (None when it does not: the new nodes could not start it,
    so this is the only running copy).
    """
    own = markers.get(here) or {}
    if own.get("kept"):  # a clock set back counts from now
        since, placed = min(_time(own.get("at")), now), _placed_at(own)
    elif own.get("running") and not own.get("kept") and not own.get("error"):
        since, placed = now, min(_time(own.get("at")), now)
    else:  # no marker of this copy (written before markers, or the storage was away): from now
        since = placed = now
    ok, why = confirmed(markers, placement, here, placed)
    waited = max(0.0, now - since)
    if ok:
        return {"action": "remove", "why": why, "waited": waited, "marker": None, "recheck": None}
    failed = bool(failures(markers, [node for node in placement if node != here], placed))
    if not failed and waited >= window:
        return {"action": "expire", "why": why, "waited": waited, "marker": None, "recheck": None}
    marker = {"running": True, "error": None, "kept": True, "at": since, "placed_at": placed}
    unchanged = all(own.get(key) == value for key, value in marker.items())
    return {"action": "keep", "why": why, "waited": waited, "marker": None if unchanged else marker,
            "recheck": None if failed else window - waited}


def kept_elsewhere(markers, placement):
    """Nodes outside ``placement`` that still keep a copy for a move (to be told it moved)."""
    return sorted(node for node, marker in markers.items() if node not in placement and marker.get("running"))
