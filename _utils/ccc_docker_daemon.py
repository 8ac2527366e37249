"""
``/etc/docker/daemon.json`` from pillar: the admin's mapping (``ccc:docker:daemon``) plus, on
nodes with the NVIDIA container toolkit, the ``nvidia`` runtime as the default one. Pure: the
file's text is a function of pillar alone (sorted keys), so an unchanged pillar never rewrites
the file and never restarts dockerd. ``daemon`` a mapping (or null) is the docker role's
schema.yaml's rule, which the role scaffold checks before any of the role's states; the shape of
its ``runtimes`` is checked here (the schema declares only its defaults' keys, and daemon's is {}).
"""

import json

NVIDIA_RUNTIME = {"path": "nvidia-container-runtime", "runtimeArgs": []}


def config(daemon, nvidia):
    """The daemon.json mapping of ``daemon`` (``ccc:docker:daemon``, null for none), a copy;
    ``ValueError`` when the nvidia runtime cannot be added to its ``runtimes``."""
    result = json.loads(json.dumps(daemon or {}))
    if nvidia:
        runtimes = result.setdefault("runtimes", {})
        if not isinstance(runtimes, dict) or not isinstance(runtimes.get("nvidia", {}), dict):
            raise ValueError(f"ccc:docker:daemon:runtimes must be a mapping of runtime name -> {{path, runtimeArgs}}, "
                             f"got {runtimes!r}")
        runtimes["nvidia"] = dict(NVIDIA_RUNTIME, **runtimes.get("nvidia", {}))
        result["default-runtime"] = "nvidia"
    return result


def render(mapping):
    """daemon.json text: indented, sorted keys, one trailing newline."""
    return json.dumps(mapping, indent=2, sort_keys=True) + "\n"


def supports_validate(help_text):
    """True when ``dockerd --help`` lists ``--validate`` (Docker 23 and later)."""
    return "--validate" in (help_text or "")
