"""
What ``salt-run ccc.active_users`` prints: who (the container's user, from its ``ccc-user.email``
label) has how many live SSH sessions in which container on which node, from the nodes'
answers to ``ccc_usage.active_sessions`` (their containers' connection tables, read on the host).
The original CCC (``containers-list-active-users.yml``) ran ``netstat`` in the frpc container
and looked peers up by Docker DNS name; this counts established connections to each
container's port 22 instead, whoever opened them. Pure: the returns in, the report out.
"""


def _node_problem(answer):
    """``None`` for a usable answer of ``LocalClient.cmd(..., full_return=True)``, else why not."""
    if answer is False or answer is None:
        return "did not answer"
    if not isinstance(answer, dict):
        return f"unexpected answer {answer!r:.200}"
    ret = answer.get("ret")
    if answer.get("retcode") not in (0, None) or not isinstance(ret, dict):
        return str(ret)[:300] if ret else f"failed (retcode {answer.get('retcode')})"
    return None


def report(returns):
    """
    ``{"users": [{"user", "stack", "node", "sessions"}], "nodes": {node: "ok" | problem},
    "retcode": 0 | 1}``: containers with at least one session, sorted by user, stack, node;
    retcode 1 when a node could not tell. A container whose connection tables were cut at the
    node's read limit is listed even without a session found, with ``sessions_at_least``.
    """
    users, nodes = [], {}
    for node in sorted(returns or {}):
        problem = _node_problem(returns[node])
        nodes[node] = problem or "ok"
        if problem:
            continue
        for stack, entry in sorted(returns[node]["ret"].items()):
            if isinstance(entry, dict) and (entry.get("sessions") or entry.get("truncated")):
                row = {"user": entry.get("user") or "(unknown)", "stack": stack,
                       "node": entry.get("node") or node, "sessions": int(entry.get("sessions") or 0)}
                if entry.get("truncated"):
                    row["sessions_at_least"] = ("its connection tables are longer than a node reads: "
                                                "it may have more sessions")
                users.append(row)
    users.sort(key=lambda row: (row["user"], row["stack"], row["node"]))
    return {"users": users, "nodes": nodes, "retcode": int(any(state != "ok" for state in nodes.values()))}
