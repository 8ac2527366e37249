"""
Make-before-break moves: a node removes a container that is placed elsewhere only once a node
of the new placement reports it running.

Every node writes a small marker per stack into the shared state dir
(``<state_dir>/running/<STACK_NAME>/<node>.json``: ``{"running", "error", "at"}``) when it runs
the container, fails to run it (with the reason) or keeps it for a move; it deletes its marker
when it removes the container. The node a container leaves checks the markers of the new
placement: a marker saying "running" written after the user's last settings edit confirms the
move; anything else keeps the old copy running and tells the user why (the new node's error, or
that it has not started it yet). When the new node starts a container that another node still
keeps, it announces it (``ccc/moved/<STACK_NAME>``) so the old node's copy goes within seconds.

Plain Python on the shared state dir (never created below a missing storage root).
"""

import json
import os
import time

import ccc_safefs

MARKER_MAX_BYTES = 4096



def _folder(state_dir, stack):
    return os.path.join(state_dir, "running", stack)


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


def write(state_dir, stack, node, running, error=None, kept=False, now=None):
    """Record this node's state of ``stack``; never below a missing storage root."""
    marker = {"running": bool(running), "error": error, "kept": bool(kept), "at": now or time.time()}
    ccc_safefs.replace_file(os.path.join(_folder(state_dir, stack), f"{node}.json"), json.dumps(marker).encode(),
                            0o600, root=os.path.dirname(state_dir.rstrip("/")))


def clear(state_dir, stack, node):
    """Forget this node's marker (the container is no longer here)."""
    try:
        os.unlink(os.path.join(_folder(state_dir, stack), f"{node}.json"))
    except FileNotFoundError:
        pass


def needs_note(marker, running, error, since):
    """Whether this node's marker must be (re)written: missing, different, or older than the
    user's last edit (so the old node can tell it is about the current settings)."""
    if not marker:
        return True
    if bool(marker.get("running")) != bool(running) or marker.get("error") != error or marker.get("kept"):
        return True
    return (marker.get("at") or 0) < since


def confirmed(markers, placement, this_node, since):
    """
    Whether a node of ``placement`` (other than this one) runs the stack for the current
    settings (marker running, written at or after ``since``). Returns ``(ok, why)``.
    """
    others = [node for node in placement if node != this_node]
    for node in others:
        marker = markers.get(node) or {}
        if marker.get("running") and not marker.get("kept") and (marker.get("at") or 0) >= since:
            return True, f"running on {node}"
    errors = [f"{node}: {markers[node]['error']}" for node in others
              if markers.get(node) and not markers[node].get("running") and markers[node].get("error")]
    if errors:
        return False, "it could not be started there (" + "; ".join(errors) + ")"
    return False, f"{', '.join(others)} has not started it yet"


def kept_elsewhere(markers, placement):
    """Nodes outside ``placement`` that still keep a copy for a move (to be told it moved)."""
    return sorted(node for node, marker in markers.items() if node not in placement and marker.get("running"))
