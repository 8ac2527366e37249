"""
Whether a service of a cluster role is healthy, and the summary ``salt-run ccc.status`` prints.

Pure: a unit's ``systemctl show`` properties or a container's inspect data in, ``"ok"`` or one
short reason an admin acts on out ("not running", "unhealthy: <last health check output>",
"restarting (12 restarts)", "missing"). The node side (``ccc_cluster.services``) gathers the
facts, the runner (``ccc.status``) the nodes' answers; both decide through here.
"""

import ccc_service_containers

OK = "ok"
# systemctl show properties read for a unit (``unit_state``).
UNIT_PROPERTIES = ("LoadState", "ActiveState", "SubState", "Result", "NRestarts")
HEALTH_LINE_LIMIT = 120


def parse_show(text):
    """``systemctl show --property=...`` output (``Key=value`` lines) as a dict."""
    props = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


def _restarts(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def unit_state(props):
    """
    ``"ok"`` for an active unit (a oneshot unit with ``RemainAfterExit`` stays active), else why
    not: "missing" (no such unit file), "restarting (n restarts)" (waiting for systemd's automatic
    restart), "failed (<result>)", "starting", "stopping", "not running".
    """
    load, active = props.get("LoadState"), props.get("ActiveState")
    sub, restarts = props.get("SubState") or "", _restarts(props.get("NRestarts"))
    if load == "not-found" or (load is None and active is None):
        return "missing"
    if load in ("masked", "error", "bad-setting"):
        return f"unit {load}"
    if active in ("active", "reloading"):
        return OK
    if sub == "auto-restart":
        return f"restarting ({restarts} restarts)"
    if active == "failed":
        result = props.get("Result") or "failed"
        return f"failed ({result})" + (f", {restarts} restarts" if restarts else "")
    if active == "activating":
        return "starting"
    if active == "deactivating":
        return "stopping"
    return "not running"


def _last_health_line(health):
    """The last non-empty output line of the container's latest health check, shortened."""
    log = (health or {}).get("Log") or []
    output = (log[-1].get("Output") if log and isinstance(log[-1], dict) else "") or ""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    line = lines[-1] if lines else f"exit code {log[-1].get('ExitCode')}" if log else "no check output"
    return line if len(line) <= HEALTH_LINE_LIMIT else line[:HEALTH_LINE_LIMIT - 1] + "…"


def label(service):
    """How a service is named in the status: a unit by its unit name, a container as such."""
    return service["name"] if service["kind"] == "unit" else f"container {service['name']}"


def container_state(attrs, role=None):
    """
    ``"ok"`` for a running container that is healthy or has no health check, else why not:
    "missing", "foreign: ..." (that name is taken by a container the role did not make:
    ``ccc.cluster-role`` label), "restarting (n restarts)", "not running (exit code n)", "not
    running (killed: out of memory)", "unhealthy: <last health check line>", "starting (health
    check not passed yet)".
    """
    if not attrs:
        return "missing"
    owner = ((attrs.get("Config") or {}).get("Labels") or {}).get(ccc_service_containers.ROLE_LABEL)
    if role is not None and owner != role:
        return f"foreign: a container of that name not made by role {role} ({ccc_service_containers.ROLE_LABEL}={owner or '-'})"
    state = attrs.get("State") or {}
    restarts = attrs.get("RestartCount") or 0
    if state.get("Restarting"):
        return f"restarting ({restarts} restarts)"
    if not state.get("Running"):
        if state.get("OOMKilled"):
            return "not running (killed: out of memory)"
        status = state.get("Status") or "stopped"
        return f"not running ({status}, exit code {state.get('ExitCode', '?')})"
    health = state.get("Health") or {}
    if health.get("Status") == "unhealthy":
        return f"unhealthy: {_last_health_line(health)}"
    if health.get("Status") == "starting":
        return "starting (health check not passed yet)"
    return OK


def node_problems(node, answer):
    """``[(node, "role/service", reason)]`` for every service of one node's answer that is not ok."""
    problems = []
    for role, services in sorted((answer or {}).items()):
        for service, state in sorted((services or {}).items()):
            if state != OK:
                problems.append((node, f"{role}/{service}", state))
    return problems


def report(answers, errors, silent):
    """
    The runner's result from the nodes' answers: ``answers`` {node: {role: {service: state}}},
    ``errors`` {node: what its minion said instead}, ``silent`` the nodes that did not answer.
    ``health`` lists the problems first (unhealthy services, failed calls, silent nodes), then one
    line per healthy node; ``retcode`` is 1 when anything is not ok.
    """
    problems = [f"{node}: {service}: {reason}"
                for name in sorted(answers) for node, service, reason in node_problems(name, answers[name])]
    problems += [f"{node}: could not tell: {errors[node]}" for node in sorted(errors)]
    problems += [f"{node}: did not answer" for node in sorted(silent)]
    healthy = []
    for node in sorted(answers):
        if not node_problems(node, answers[node]):
            count = sum(len(services or {}) for services in answers[node].values())
            healthy.append(f"{node}: ok ({count} service{'s' if count != 1 else ''})")
    return {
        "health": problems + healthy,
        "nodes": {node: answers[node] for node in sorted(answers)},
        "not_answering": sorted(silent),
        "retcode": 1 if problems else 0,
    }


def sort_returns(returns, expected):
    """
    The minions' returns of ``ccc_cluster.services`` (``{minion: {"ret", "retcode"}}`` or
    ``{"failed": True}``) split into ``(answers, errors, silent)`` for ``report``: a dict with
    retcode 0 is an answer; anything else (module missing, pillar broken) an error line; an
    expected minion without a return did not answer.
    """
    answers, errors = {}, {}
    for minion, data in (returns or {}).items():
        if not isinstance(data, dict) or data.get("failed") or "ret" not in data:
            continue
        ret = data["ret"]
        if isinstance(ret, dict) and not data.get("retcode"):
            answers[minion] = ret
        else:
            lines = [line for line in str(ret).splitlines() if line.strip()]
            if len(lines) > 1 and "Traceback (most recent call last)" in lines[0] + lines[1]:
                lines = lines[-1:]  # an exception on the minion: its last line says what
            text = " ".join(" ".join(lines).split())
            errors[minion] = text if len(text) <= 200 else text[:199] + "…"
    silent = sorted(set(expected or ()) - set(answers) - set(errors))
    return answers, errors, silent
