"""
User-facing text: the welcome message, the default settings file and the ``.deploy`` report.
"""

import json
import os

import ccc_schema


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


def default_settings_text(record):
    """
    The commented settings file written for a container that has none.

    Every line is commented, so the file changes nothing until the user uncomments a line.
    Admin values appear as JSON scalars (valid YAML), never raw text.
    """
    stack = record["STACK_NAME"]

    def show(key, default):
        return json.dumps(record.get(key, default))

    lines = [
        f"# Settings of your container '{stack}'. Uncomment a line and save to change it;",
        "# the container is redeployed within seconds. What happened is written to",
        f"# '{stack}.deploy' next to this file (errors included).",
        "#",
        "# You may set: CONTAINER_IMAGE, DEPLOYMENT_NODES, INSTALL_PACKAGES, INSTALL_REPOSITORY_KEYS,",
        "# INSTALL_REPOSITORY_SOURCES, SHM_SIZE, USER_NAME, USER_PUBKEY, USER_PUBKEY_FROM_GITHUB,",
        "# FRP_PORTS and USE_HOST_TIMEDATE. Values below are your current defaults.",
        f"{stack}:",
        f"#  CONTAINER_IMAGE: {show('CONTAINER_IMAGE', '')}",
        f"#  DEPLOYMENT_NODES: {show('DEPLOYMENT_NODES', [])}",
        f"#  INSTALL_PACKAGES: {show('INSTALL_PACKAGES', '')}",
        f"#  INSTALL_REPOSITORY_KEYS: {show('INSTALL_REPOSITORY_KEYS', '')}",
        f"#  INSTALL_REPOSITORY_SOURCES: {show('INSTALL_REPOSITORY_SOURCES', '')}",
        f"#  SHM_SIZE: {show('SHM_SIZE', '2g')}",
        f"#  USER_NAME: {show('USER_NAME', '')}",
        f"#  USER_PUBKEY: {show('USER_PUBKEY', '')}",
        f"#  USER_PUBKEY_FROM_GITHUB: {show('USER_PUBKEY_FROM_GITHUB', '')}",
        "#  USE_HOST_TIMEDATE: false",
    ]
    frp = record.get("FRP_PORTS") or {}
    if frp:
        lines.append("#  FRP_PORTS:")
        lines.append(f"#    TCP: {json.dumps([int(p) for p in frp.get('TCP') or []])}")
        if frp.get("HTTP"):
            lines.append("#    HTTP:")
            for http in frp["HTTP"]:
                shown = {k: v for k, v in http.items() if k != "pass"}
                lines.append(f"#      - {json.dumps(shown, sort_keys=True)}")
    return "\n".join(lines) + "\n"


def feedback_report(resolution, outcome, when):
    """
    The plain-language report written to ``~/.containers/<STACK_NAME>.deploy``.

    ``outcome`` is a short sentence about what the node did. Returns ``(text, body)``; the body
    (without the timestamp) decides whether the file needs rewriting.
    """
    spec = resolution.get("spec") or {}
    lines = [
        f"container: {resolution['stack']}",
        f"node: {resolution['node']}",
        f"result: {outcome}",
        f"placement: {', '.join(resolution.get('placement') or []) or 'none'}",
    ]
    status_words = {
        "applied": "your settings file was accepted",
        "missing": "no settings file yet (a commented one was written for you); defaults used",
        "rejected": "your settings file was REJECTED (see messages)",
    }
    if resolution.get("settings_status"):
        lines.append(f"settings: {status_words[resolution['settings_status']]}")
    if spec:
        gpus = spec["device_ids"]
        lines.extend([
            f"image: {spec['image']}",
            f"gpus: {', '.join(gpus) if gpus else 'none'}",
            f"shm_size: {ccc_schema.format_size(spec['shm_size'])}",
            f"packages: {spec['environment']['INSTALL_PACKAGES'] or 'none'}",
            f"ports: {', '.join(str(p) for p in spec['exposed_ports']) or 'none'}",
        ])
    body = _bounded_body(lines, resolution.get("user_messages") or [], MAX_REPORT_BYTES - _REPORT_HEADER_BYTES)
    return f"# ccc-salt deploy report, written {when}\n{body}", body
MAX_REPORT_BYTES = 8 * 1024  # the whole .deploy report
_REPORT_HEADER_BYTES = 128  # kept for its first line, "# ccc-salt deploy report, written <when>"


def _bounded_body(lines, messages, limit):
    """
    The report body: ``lines``, then as many messages as fit in ``limit`` bytes (UTF-8) and a
    note of how many did not. The report lands in the user's home on every change, so neither
    one long message nor many of them may make it large.
    """
    body = "\n".join(lines) + "\n" + ("messages:\n" if messages else "")
    used = len(body.encode())
    for index, message in enumerate(messages):
        line = f"  - {message}\n"
        if used + len(line.encode()) > limit - 128:  # 128: room for the note below
            body += (f"  - … {len(messages) - index} more message(s) not shown:"
                     f" this report is limited to {MAX_REPORT_BYTES // 1024} KiB\n")
            break
        body += line
        used += len(line.encode())
    return body.encode()[:limit].decode(errors="ignore")  # even over-long lines above stay within the limit
