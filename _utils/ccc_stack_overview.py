"""
The per-stack part of ``salt-run ccc.status``: on each node, every compute container ccc-salt
manages there (where it runs, image, GPUs, uptime, the last deploy result and the last problem
its user was told, and its problem now); on the master, one line per node and stack for people
and the same data for scripts (``--out=json``).

Why a module of its own: the admins' question "whose container is broken, and what was the
user told" needs Docker's state, the image's boot status and the node's record of the last
deploy together (``ccc_problems``, ``ccc_feedback.read_deploy_record``: root's copy, never the
user's ``.deploy`` file); the runner only publishes and prints.
"""

import datetime

import ccc_engine
import ccc_feedback
import ccc_node_record
import ccc_pillar
import ccc_problems
import ccc_rules


def _duration(seconds):
    """A short uptime: ``2d 3h``, ``5h 12m``, ``4m 3s``."""
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {secs}s"


def _state(attrs):
    state = attrs.get("State") or {}
    if state.get("Restarting"):
        return "restarting"
    if state.get("Running"):
        return "running"
    if state.get("Status") == "created":
        return "created"
    return f"exited (code {state.get('ExitCode', '?')})"


def entry(attrs, problem, record, now):
    """One container's overview from its inspect data, its problem (``ccc_problems.observe``)
    and the node's record of its last deploy (``ccc_feedback.read_deploy_record``)."""
    state = attrs.get("State") or {}
    started = ccc_problems.docker_time(state.get("StartedAt"))
    running = bool(state.get("Running")) and not state.get("Restarting")
    record = record or {}
    return {
        "state": _state(attrs),
        "image": (attrs.get("Config") or {}).get("Image"),
        "gpus": ccc_engine.spec_of_container(attrs)["device_ids"],
        "started": started.strftime("%Y-%m-%d %H:%M:%S UTC") if started else None,
        "uptime_s": int((now - started).total_seconds()) if running and started else None,
        "restarts": attrs.get("RestartCount") or 0,
        "last_deploy": {"when": record.get("when"), "result": record.get("result")} if record else None,
        "message": record.get("problem"),
        "problem": (problem or {}).get("summary"),
    }


def gather(client, ccc, minion_id, secrets=(), now=None):
    """
    ``{STACK_NAME: entry}`` for the compute containers ccc-salt manages on this node (the node's
    record, ``ccc_node_record``); the status file of each is read as ``ccc_problems`` does. A
    stack still in pillar that the node's last deploy placed here without a container is
    ``missing`` (``missing_entry``).
    """
    now = now or datetime.datetime.now(datetime.timezone.utc)
    cluster = ccc_pillar.cluster_settings(ccc)
    node = ccc_pillar.node_settings(ccc, minion_id)
    found, index = {}, ccc_pillar.entries_by_stack(ccc)
    for stack, summary in sorted(ccc_node_record.managed_containers(client).items()):
        attrs = ccc_engine.inspect(client, summary["Id"])
        if attrs is None or not ccc_rules.is_stack_name(stack):
            continue
        record, _ = ccc_pillar.container_record(ccc, stack, check=False, index=index)
        folder = None
        if record and ccc_rules.is_email(record.get("USER_EMAIL")):
            folder = ccc_pillar.settings_paths(cluster, record)["settings_folder"]
        problem = ccc_problems.observe(client, attrs, folder, stack, secrets, now, with_log=False)
        last = ccc_feedback.read_deploy_record(cluster["state_dir"], stack, node["name"])
        found[stack] = entry(attrs, problem, last, now)
    for stack, last in sorted(ccc_feedback.deploy_records(cluster["state_dir"], node["name"]).items()):
        if stack not in found and last.get("placed") and ccc_pillar.container_record(ccc, stack, check=False, index=index)[0]:
            found[stack] = missing_entry(last)
    return found


def missing_entry(record):
    """A stack the node's last deploy placed here that has no container now (never created,
    refused, or removed by hand): what the user was last told says why."""
    return {"state": "missing", "image": None, "gpus": [], "started": None, "uptime_s": None, "restarts": 0,
            "last_deploy": {"when": record.get("when"), "result": record.get("result")},
            "message": record.get("problem"), "problem": "placed on this node but no container is there"}


# --------------------------------------------------------------------------------------------
# the master's summary


def line(node, stack, item):
    """One line per container for people."""
    parts = [item["state"] + (f" {_duration(item['uptime_s'])}" if item.get("uptime_s") is not None else "")]
    parts.append(f"image {item.get('image') or '?'}")
    parts.append(f"gpus {', '.join(item.get('gpus') or []) or 'none'}")
    last = item.get("last_deploy") or {}
    if last:
        parts.append(f"last deploy {last.get('when')}: {last.get('result')}")
    text = f"{node} {stack}: " + "; ".join(parts)
    if item.get("problem"):
        text += f"; PROBLEM: {item['problem']}"
    elif item.get("message"):
        text += f"; last told: {item['message']}"
    return text


def has_problem(item):
    return bool(item.get("problem")) or item.get("state") != "running"


def merge(result, answers, errors, silent):
    """
    Add the containers to the runner's result (``ccc_service_health.report``): ``containers``,
    the problems first, then one line per healthy container (per node, per stack);
    ``stacks``: ``{STACK_NAME: {node: entry}}``; ``retcode`` 1 when a container has a problem.
    Nodes that could not tell (the module missing, say) or did not answer get a line each; the
    service part of the status already counts silent nodes.
    """
    stacks, problems, healthy = {}, [], []
    for node in sorted(answers):
        for stack, item in sorted((answers[node] or {}).items()):
            if not isinstance(item, dict):
                continue
            stacks.setdefault(stack, {})[node] = item
            (problems if has_problem(item) else healthy).append(line(node, stack, item))
    others = [f"{node}: containers not told: {errors[node]}" for node in sorted(errors)]
    others += [f"{node}: containers: did not answer" for node in sorted(silent)]
    merged = dict(result, containers=problems + others + healthy, stacks=stacks)
    if problems:
        merged["retcode"] = 1
    return merged
