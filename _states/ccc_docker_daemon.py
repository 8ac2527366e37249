"""
State ``ccc_docker_daemon``: ``/etc/docker/daemon.json`` from pillar, checked by dockerd before
it is installed.

.. code-block:: yaml

    ccc-cluster-docker-daemon-json:
      ccc_docker_daemon.config_managed:
        - name: /etc/docker/daemon.json
        - nvidia: true

    ccc-cluster-docker-service:
      service.running:
        - name: docker
        - watch:
          - ccc_docker_daemon: ccc-cluster-docker-daemon-json

The file is rewritten only when its text changes (sorted keys), so dockerd is restarted (by the
``watch`` above) only then. Where the installed dockerd has ``--validate`` (Docker 23+), the new
text is validated first; a file dockerd rejects is not installed, the state fails with dockerd's
reason, and the failed requisite keeps the running engine from being restarted. dockerd is run by
the execution module (``ccc_docker_host.daemon_config_problem``); this state compares and writes.
"""

import json
import os

from salt.exceptions import CommandExecutionError

import ccc_docker_daemon
import ccc_safefs

__virtualname__ = "ccc_docker_daemon"


def __virtual__():
    return __virtualname__


def _diff(old_text, new):
    """Top-level keys added, changed or removed (the values are the admin's own pillar)."""
    try:
        old = json.loads(old_text) if old_text else {}
    except ValueError:
        return {"replaced": "the old file was not valid JSON"}
    if not isinstance(old, dict):
        old = {}
    changed = {key: {"old": old.get(key), "new": new[key]} for key in sorted(new) if old.get(key) != new[key]}
    removed = sorted(set(old) - set(new))
    return dict(changed, **({"removed keys": removed} if removed else {}))


def config_managed(name="/etc/docker/daemon.json", nvidia=None, dockerd="dockerd"):
    """Write ``name`` from ``ccc:docker:daemon`` (+ the nvidia runtime), validated, 0644."""
    try:
        wanted = __salt__["ccc_docker_host.daemon_config"](nvidia=nvidia)
    except CommandExecutionError as exc:
        return {"name": name, "result": False, "changes": {}, "comment": str(exc)}
    text = ccc_docker_daemon.render(wanted)
    old = ccc_safefs.read_text(name)
    if old == text:
        return {"name": name, "result": True, "changes": {}, "comment": f"{name} is up to date"}
    changes = {"daemon.json": _diff(old, wanted)}
    if __opts__["test"]:
        return {"name": name, "result": None, "changes": changes,
                "comment": f"{name} would be written (dockerd restarted)"}
    try:
        problem = __salt__["ccc_docker_host.daemon_config_problem"](text, dockerd)
    except CommandExecutionError as exc:
        return {"name": name, "result": False, "changes": {},
                "comment": f"{name} not written, dockerd could not check it (the running engine is untouched): {exc}"}
    if problem:
        return {"name": name, "result": False, "changes": {},
                "comment": f"{name} not written, dockerd rejects it (the running engine is untouched): {problem}"}
    os.makedirs(os.path.dirname(name), mode=0o755, exist_ok=True)
    ccc_safefs.replace_file(name, text.encode(), 0o644, root="/")
    return {"name": name, "result": True, "changes": changes, "comment": f"{name} written"}
