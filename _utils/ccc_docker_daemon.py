"""
``/etc/docker/daemon.json`` from pillar: the admin's mapping (``ccc:docker:daemon``) plus, on
nodes with the NVIDIA container toolkit, the ``nvidia`` runtime as the default one. Pure: the
file's text is a function of pillar alone (sorted keys), so an unchanged pillar never rewrites
the file and never restarts dockerd.
"""

import json

NVIDIA_RUNTIME = {"path": "nvidia-container-runtime", "runtimeArgs": []}


def config(daemon, nvidia):
    """The daemon.json mapping; ``ValueError`` when ``daemon`` is not a mapping."""
    if daemon is None:
        daemon = {}
    if not isinstance(daemon, dict):
        raise ValueError(f"ccc:docker:daemon must be a mapping of daemon.json keys, got {type(daemon).__name__}")
    result = json.loads(json.dumps(daemon))
    if nvidia:
        runtimes = result.setdefault("runtimes", {})
        if not isinstance(runtimes, dict):
            raise ValueError("ccc:docker:daemon:runtimes must be a mapping")
        runtimes["nvidia"] = dict(NVIDIA_RUNTIME, **(runtimes.get("nvidia") or {}))
        result["default-runtime"] = "nvidia"
    return result


def render(mapping):
    """daemon.json text: indented, sorted keys, one trailing newline."""
    return json.dumps(mapping, indent=2, sort_keys=True) + "\n"


def supports_validate(help_text):
    """True when ``dockerd --help`` lists ``--validate`` (Docker 23 and later)."""
    return "--validate" in (help_text or "")
