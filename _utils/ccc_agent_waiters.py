"""
The Portainer agents waiting for their swarm overlay (``ccc:docker:portainer_agent:swarm``), as
the master keeps track of them (runner ``ccc_agent_overlay``). Pure: a record and a node in, a
decision out; the runner reads and writes the record and publishes the applies.

Why: only the swarm leader's agent creates the agents' overlay. A node whose agent applies first
finds it missing and says pending; without a word from the master it would stay so until some
unrelated apply. So a node that finds it missing reports it (``EVENT_PENDING``), the leader
reports each overlay it creates (``EVENT_CREATED``), and the master then applies the agent's
overlay state (``AGENT_STATE``) once on each node that waits. Bounded by construction: a node
is applied only after it reported pending itself, at most once per overlay the leader created
(``woken``), so neither a node nor a flood of events makes more applies than the leader's
creations and the nodes' own reports; a ``created`` from any other node than the leader is
ignored (the runner checks).
"""

import contextlib
import fcntl
import json
import os

import ccc_rules
import ccc_safefs

# Sent by a node whose agent finds the agents' overlay missing (it is not the leader).
EVENT_PENDING = "ccc/swarm/agent_overlay/pending"
# Sent by the swarm leader once its agent has created the agents' overlay.
EVENT_CREATED = "ccc/swarm/agent_overlay/created"
# What the master applies on a waiting node: the swarm role's state that attaches the agent
# (salt/cluster/swarm/init.sls; state.sls_id runs the swarm membership it requires first).
AGENT_STATE = ("ccc-cluster-swarm-portainer-agent", "cluster.swarm")
RECORD_NAME = "ccc-agent-overlay.json"


def empty():
    """A record with no overlay reported and no node waiting."""
    return {"created": 0, "waiting": [], "woken": {}}


def normalised(record):
    """``record`` as read from disk, anything malformed replaced (the worst is one extra apply)."""
    record = record if isinstance(record, dict) else {}
    created = record.get("created")
    waiting = record.get("waiting")
    woken = record.get("woken")
    return {"created": created if ccc_rules.is_whole(created, 1) else 0,
            "waiting": sorted({n for n in waiting if isinstance(n, str)}) if isinstance(waiting, list) else [],
            "woken": {n: s for n, s in woken.items() if isinstance(n, str) and isinstance(s, int)}
            if isinstance(woken, dict) else {}}


def pending(record, node):
    """
    ``node`` (a checked, accepted minion id) says its agent's overlay is missing. Returns
    ``(record, wake)``: ``wake`` when the leader has reported an overlay since this node was last
    applied for one (its report crossed the leader's on the way), else the node waits for the
    next ``created``.
    """
    record = normalised(record)
    if record["created"] and record["woken"].get(node) != record["created"]:
        record["woken"][node] = record["created"]
        record["waiting"] = [n for n in record["waiting"] if n != node]
        return record, True
    record["waiting"] = sorted(set(record["waiting"]) | {node})
    return record, False


def created(record, accepted=None):
    """
    The leader reported an overlay it created. Returns ``(record, nodes to apply)``: every node
    waiting (``accepted``: a predicate, a node whose key is gone is forgotten), each marked woken
    for this overlay.
    """
    record = normalised(record)
    record["created"] += 1
    nodes = [node for node in record["waiting"] if accepted is None or accepted(node)]
    record["waiting"] = []
    record["woken"] = {n: s for n, s in record["woken"].items() if accepted is None or accepted(n)}
    record["woken"].update({node: record["created"] for node in nodes})
    return record, nodes


@contextlib.contextmanager
def open_record(cachedir):
    """The master's record (``RECORD_NAME`` in its cache dir), locked while the caller decides;
    written back atomically when changed."""
    os.makedirs(cachedir, mode=0o700, exist_ok=True)
    path = os.path.join(cachedir, RECORD_NAME)
    with open(path + ".lock", "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(path, encoding="utf-8") as handle:
                record = normalised(json.load(handle))
        except (OSError, ValueError):
            record = empty()
        holder = {"record": record}
        yield holder
        if holder["record"] != record:
            ccc_safefs.replace_file(path, json.dumps(holder["record"], sort_keys=True).encode("utf-8"), 0o600,
                                    root=cachedir)
