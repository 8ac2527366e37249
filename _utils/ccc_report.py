"""
Text for people, from a resolution (``ccc_resolver.resolve_container``): the welcome message,
the default settings file, the ``.deploy`` report the user reads and the plan an admin reads
(``plan_text``). Pure functions: the caller writes or prints what they return.
"""

import json
import os
import re
import textwrap

import ccc_problems
import ccc_quote
import ccc_rules
import ccc_schema

MAX_REPORT_BYTES = 8 * 1024  # the whole .deploy report
_REPORT_HEADER_BYTES = 128  # kept for its first line, "# ccc-salt deploy report, written <when>"
MAX_LINE_CHARS = 400  # a report line that is not a user's value (an outcome, an engine's error)

SETTINGS_STATUS_WORDS = {
    "applied": "your settings file was accepted",
    "missing": "no settings file yet (a commented one was written for you); defaults used",
    "rejected": "your settings file was REJECTED (see messages)",
}
PLAN_STATUS_WORDS = {  # the same, for the admin reading a plan (which writes nothing)
    "applied": "the user's settings file is accepted",
    "missing": "no settings file yet: the admin's values apply",
    "rejected": "the user's settings file is REJECTED (see the messages for the user)",
}


def welcome_message(cluster, stack, user_name):
    """
    The ``CONTAINER_WELCOME_MSG`` shown at SSH login (constant per container: no error text, so a
    message elsewhere never forces a restart).
    """
    names = sorted({
        os.path.splitext(os.path.basename(app.rsplit(",", 1)[-1]))[0] for app in cluster.get("apps") or []
    })
    return "\n".join([
        f" * Pre-installed APPS: '{' '.join(names)}'",
        "",
        "Available shared and local storage:",
        " * /storage/user         * /storage/local/hdd",
        " * /storage/group        * /storage/local/ssd",
        " * /storage/datasets",
        "",
        f"Container config: '/home/{user_name}/.containers/{stack}.yml'"
        f" (last deploy report: '{stack}.deploy')",
        "",
        f"FOR MORE DOCUMENTATION SEE: {cluster.get('docs_url', '')}",
    ])


def default_settings_text(stack, values):
    """
    The commented settings file written for a container that has none, generated from the
    settings schema: every key a user may set (``ccc_schema.USER_SETTABLE_KEYS``), in the
    schema's order, each under its schema ``description``, with ``values[key]``: what applies
    while the user sets none (``ccc_resolver`` fills in the cluster's defaults, such as
    ``shm_size_default``); a key without one shows its type's empty value.

    Every line is commented, so the file changes nothing until the user uncomments a line.
    Values appear as JSON scalars (valid YAML), never raw text; FRP passwords never appear.
    """
    keys = ccc_schema.USER_SETTABLE_KEYS
    said = f"You may set: {', '.join(keys[:-1])} and {keys[-1]}. Values below are your current defaults."
    lines = [
        f"# Settings of your container '{stack}'. Uncomment a line and save to change it;",
        "# the container is redeployed within seconds. What happened is written to",
        f"# '{stack}.deploy' next to this file (errors included).",
        "#",
        *_comment(said),
        f"{stack}:",
    ]
    for key in keys:
        lines += _comment(ccc_schema.user_setting(key)["description"])
        kind = ccc_schema.user_setting(key).get("type")
        if kind == "object":  # FRP_PORTS, the one mapping: a list per line, passwords never shown
            lines += _frp_lines(key, values.get(key) or {})
        elif kind == "boolean":  # as the deployment reads the admin's value
            lines.append(f"#  {key}: {json.dumps(ccc_rules.truthy(values.get(key)))}")
        else:
            lines.append(f"#  {key}: {json.dumps(values.get(key, _EMPTY.get(kind, '')))}")
    return "\n".join(lines) + "\n"


_EMPTY = {"array": []}  # a key's value when neither the admin nor the deployment gives one (else "")


def _comment(text):
    """``text`` as comment lines of the settings file (``# ``, never ``#  ``, which is a key)."""
    return [f"# {line}" for line in textwrap.wrap(text, width=94)]


def _frp_lines(key, frp):
    """The admin's FRP ports (passwords never shown); ``{}`` when there are none."""
    if not frp:
        return [f"#  {key}: {{}}"]
    lines = [f"#  {key}:", f"#    TCP: {json.dumps([int(p) for p in frp.get('TCP') or []])}"]
    if frp.get("HTTP"):
        lines.append("#    HTTP:")
        for http in frp["HTTP"]:
            shown = {k: v for k, v in http.items() if k != "pass"}
            lines.append(f"#      - {json.dumps(shown, sort_keys=True)}")
    return lines


def feedback_report(resolution, outcome, when):
    """
    The plain-language report written to ``~/.containers/<STACK_NAME>.deploy``.

    ``outcome`` is a short sentence about what the node did. Returns ``(text, body)``; the body
    (without the timestamp) decides whether the file needs rewriting. Values the user chose are
    quoted by ``ccc_quote``, every line stays one line, and the whole is at most
    ``MAX_REPORT_BYTES``.
    """
    spec = resolution.get("spec") or {}
    lines = [
        f"container: {resolution['stack']}",
        f"node: {resolution['node']}",
        f"result: {ccc_quote.clip_text(outcome, MAX_LINE_CHARS)}",
        f"placement: {ccc_quote.clip_text(', '.join(resolution.get('placement') or []) or 'none')}",
    ]
    if resolution.get("settings_status"):
        lines.append(f"settings: {SETTINGS_STATUS_WORDS[resolution['settings_status']]}")
    if spec:
        gpus = spec["device_ids"]
        lines.extend([
            f"image: {ccc_quote.clip_text(spec['image'])}",
            f"gpus: {', '.join(gpus) if gpus else 'none'}",
            f"shm_size: {ccc_schema.format_size(spec['shm_size'])}",
            f"packages: {ccc_quote.clip_text(spec['environment']['INSTALL_PACKAGES'] or 'none')}",
            f"ports: {', '.join(str(p) for p in spec['exposed_ports']) or 'none'}",
        ])
    lines.extend(problem_lines(resolution.get("problem")))
    body = _bounded_body(lines, resolution.get("user_messages") or [], MAX_REPORT_BYTES - _REPORT_HEADER_BYTES)
    return f"# ccc-salt deploy report, written {when}\n{body}", body


PROBLEM_LABEL = "problem: "


def problem_lines(problem):
    """
    The report lines of a container's problem (``ccc_problems.observe``): what is wrong, what
    the user can do, the last lines of its log (already bounded and masked; each ``  | ``), with
    the time they were read when that was for an earlier problem (``log_as_of``).
    """
    if not problem:
        return []
    lines = []
    if problem.get("summary"):
        lines.append(PROBLEM_LABEL + ccc_quote.clip_text(problem["summary"], MAX_LINE_CHARS))
        lines.append("what you can do: " + ccc_quote.clip_text(problem.get("advice") or "", MAX_LINE_CHARS))
    if problem.get("note"):
        lines.append("boot status: " + ccc_quote.clip_text(problem["note"], MAX_LINE_CHARS))
    if problem.get("log"):
        if problem.get("log_as_of"):
            lines.append(f"last log lines (as read at {ccc_quote.clip_text(problem['log_as_of'])}; the log is read "
                         f"again for a changed boot status at most every {ccc_problems.BOOT_LOG_INTERVAL_S // 60} "
                         "minutes; newest last):")
        else:
            lines.append("last log lines (newest last):")
        lines.extend(f"  | {ccc_quote.one_line(line)}" for line in problem["log"])
    return lines


def problem_part(text):
    """The problem lines of a report text (from ``problem:`` up to the messages), "" without."""
    start = text.find("\n" + PROBLEM_LABEL)
    if start < 0:
        start = text.find("\nboot status: ")
    if start < 0:
        return ""
    return text[start:].partition("\nmessages:\n")[0]


def _bounded_body(lines, messages, limit):
    """
    The report body: ``lines``, then as many messages as fit in ``limit`` bytes (UTF-8) and a
    note of how many did not. The report lands in the user's home on every change, so neither
    one long message nor many of them may make it large; a message's control characters are
    escaped, so none can start a line of its own (a forged ``result:``).
    """
    body = "\n".join(lines) + "\n" + ("messages:\n" if messages else "")
    used = len(body.encode())
    for index, message in enumerate(messages):
        line = f"  - {ccc_quote.one_line(message)}\n"
        if used + len(line.encode()) > limit - 128:  # 128: room for the note below
            body += (f"  - … {len(messages) - index} more message(s) not shown:"
                     f" this report is limited to {MAX_REPORT_BYTES // 1024} KiB\n")
            break
        body += line
        used += len(line.encode())
    return body.encode()[:limit].decode(errors="ignore")  # even over-long lines above stay within the limit


# --------------------------------------------------------------------------------------------
# The plan, for admins (``salt-call ccc_containers.resolve <STACK>``)


def plan_text(resolution):
    """
    A resolution as an admin reads it, like the ``.deploy`` report: what happens on this node
    and why, where the container is placed and why, and, when it runs here, its image, GPUs,
    mounts (``source -> target (ro)``, pinned folders by their real folder), FRP ports,
    networks, the folders created for it and its hardening; then the messages for the user
    and for the admin. Secrets never appear (FRP passwords, ``EXTRA_ENVS`` values), modes are
    octal. Works on a raw resolution and on a redacted (JSON) copy.
    """
    spec = resolution.get("spec") or {}
    lines = [
        f"container: {resolution['stack']}" + _of_user(resolution.get("record")),
        f"node: {resolution['node']}",
        f"action: {_action(resolution)}",
        f"placement: {_placement(resolution)}",
    ]
    if resolution.get("settings_status"):
        lines.append(f"settings: {PLAN_STATUS_WORDS[resolution['settings_status']]}")
    if resolution.get("action") == "remove" and resolution.get("purge"):
        record = resolution.get("record") or {}
        home = record.get("STORAGE_NAME") or resolution["stack"]
        shared = home in (resolution.get("storage_in_use") or [])
        lines.append("data: PURGE_USER_DATA deletes this stack's data"
                     + (f", but not its home folder {home}: another active container uses it" if shared else ""))
    if spec:
        lines.extend(_spec_lines(resolution, spec))
    lines.extend(_items("messages for the user", resolution.get("user_messages")))
    lines.extend(_items("messages for the admin",
                        list(resolution.get("admin_errors") or []) + list(resolution.get("notes") or [])))
    return "\n".join(lines) + "\n"


def _of_user(record):
    email = (record or {}).get("USER_EMAIL")
    return f" (user {ccc_quote.clip_text(email)})" if email else ""


def _action(resolution):
    """What this node does with the container, and why."""
    action, reason = resolution.get("action"), ccc_quote.clip_text(resolution.get("reason") or "", MAX_LINE_CHARS)
    if action == "run":
        return "run here (created, or recreated when its spec hash changed)"
    if action == "remove":
        return f"remove from this node ({reason})"
    return f"hold: change nothing here ({reason})"


def _placement(resolution):
    """The nodes it runs on, where that list came from and which nodes it may use."""
    placement = ", ".join(resolution.get("placement") or []) or "none"
    why = []
    if resolution.get("placement_source"):
        why.append(f"from {resolution['placement_source']}")
    if resolution.get("allowed_nodes") is not None:
        why.append(f"allowed: {', '.join(resolution['allowed_nodes']) or 'none'}")
    return ccc_quote.clip_text(placement + (f" ({'; '.join(why)})" if why else ""), MAX_LINE_CHARS)


def _spec_lines(resolution, spec):
    environment = spec.get("environment") or {}
    lines = [
        f"image: {ccc_quote.clip_text(spec['image'])}",
        *_gpu_lines(resolution, spec),
        f"shm_size: {ccc_schema.format_size(spec['shm_size'])}",
        f"packages: {ccc_quote.clip_text(environment.get('INSTALL_PACKAGES') or 'none')}",
    ]
    for key, name in (("INSTALL_REPOSITORY_KEYS", "repository keys"), ("INSTALL_REPOSITORY_SOURCES", "repositories")):
        if environment.get(key):
            lines.append(f"{name}: {ccc_quote.clip_text(environment[key])}")
    keys = [line for line in (environment.get("USER_PUBKEY") or "").split("\n") if line.strip()]
    lines.append(f"ssh keys: {len(keys) or 'none'}")
    lines.extend(_items("mounts", [_mount(mount) for mount in spec.get("mounts") or []]))
    lines.extend(_items("ports", _ports(spec)) or ["ports: none"])
    lines.append(f"networks: {', '.join(spec.get('networks') or []) or 'none'}")
    lines.extend(_items("folders created when missing", [_folder(folder) for folder in resolution.get("directories") or []]))
    lines.append(f"security: {_security(spec)}")
    extra = sorted(((resolution.get("record") or {}).get("EXTRA_ENVS") or {}))
    if extra:
        lines.append(f"extra environment: {ccc_quote.clip_text(', '.join(map(str, extra)), MAX_LINE_CHARS)} (values hidden)")
    if environment.get("USER_GROUPS"):
        lines.append(f"docker access: the node's Docker socket, group {environment['USER_GROUPS']}")
    lines.append(f"spec hash: {(spec.get('labels') or {}).get('ccc.spec-hash', 'none')}")
    return lines


def _gpu_lines(resolution, spec):
    """The GPUs handed to the container, by device group (``none on <node>`` for a group this
    node does not have); no GPU means none, never all."""
    ids = spec.get("device_ids") or []
    groups = resolution.get("device_groups") or {}
    lines = [f"gpus: {len(ids) or 'none'}" + (" (NVIDIA_VISIBLE_DEVICES=void)" if not ids else "")]
    for group, uuids in groups.items():
        lines.append(f"  - {group}: {', '.join(uuids) if uuids else 'none on ' + resolution['node']}")
    return lines


def _mount(mount):
    """``source -> target``, the source of a pinned folder being the folder itself (the node
    binds it from a checked descriptor; the pin path is the node's business)."""
    pin = mount.get("pin")
    source = os.path.join(pin["root"], *pin["parts"]) if pin else mount["source"]
    flags = ["ro"] if mount.get("read_only") else []
    flags += [mount["propagation"]] if mount.get("propagation") else []
    return f"{source} -> {mount['target']}" + (f" ({', '.join(flags)})" if flags else "")


_FRP_PORT_LABEL = re.compile(r"^frp\.([0-9]+)$")


def _ports(spec):
    """The FRP proxies of the container, read from its labels (what FRP reads); passwords are
    never shown, only whether one is asked for and the user name."""
    labels = spec.get("labels") or {}
    ports = []
    for key, kind in labels.items():
        found = _FRP_PORT_LABEL.match(key)
        if not found or kind not in ("tcp", "http", "https"):
            continue  # "" voids an frp label an image brought along
        port = found.group(1)
        if kind == "tcp":
            ports.append((int(port), f"{port}: TCP"))
            continue
        user = labels.get(f"frp.{port}.http.username")
        access = f"password for user {user}" if user else "no password"
        subdomain = labels.get(f"frp.{port}.http.subdomain", "")
        ports.append((int(port), f"{port}: {kind.upper()} at subdomain {subdomain} ({access})"))
    return [text for _, text in sorted(ports)]


def _folder(folder):
    owner = ":".join(str(part) for part in folder.get("owner") or ())
    return f"{folder['path']} (owner {owner}, mode {folder['mode']:04o})"


def _security(spec):
    if spec.get("privileged"):
        return "PRIVILEGED (RUN_PRIVILEGED): no hardening, seccomp unconfined"
    parts = [", ".join(spec.get("security_opt") or []) or "new privileges allowed"]
    parts.append(f"drops {', '.join(spec['cap_drop'])}" if spec.get("cap_drop") else "drops no capabilities")
    parts.append(f"at most {spec['pids_limit']} processes" if spec.get("pids_limit") else "no process limit")
    return "; ".join(parts)


def _items(title, items):
    """``title:`` and one ``  - item`` line each (nothing when there are none)."""
    items = list(items or [])
    return [f"{title}:"] + [f"  - {ccc_quote.one_line(item)}" for item in items] if items else []
