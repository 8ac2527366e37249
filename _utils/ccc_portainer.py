"""
The Portainer server (web UI) of the docker role as a role-container spec (``ccc:docker:portainer_ui``,
the original's ``portainer_ui*``). Pure: settings in, a spec for ``ccc_service_container.running``
or a ``ValueError`` naming the setting out.

The server gets no Docker API at all (no ``docker_api``, never docker.sock): it manages nodes only
through their Portainer agents, which the admin adds as "Agent" environments (``<node>:9001``); each
agent reaches its engine through its own filtering proxy (read-only unless the admin chose full).
AGENT_SECRET (``ccc:secrets:portainer:agent_secret``) is the shared secret the agents accept; the
server image has no shell, so it is an inline secret env as the agent's is. Its database (users,
settings, the environments) lives in ``storage_path``, a root-only folder on the node, at /data.
"""

import os

import ccc_frp
import ccc_rules

PORT = 9000  # the server's HTTP port (9443: its HTTPS, 8000: the Edge agents' tunnel)
EXPOSED = [8000, 9000, 9443]


def ui_spec(settings, has_secret):
    """The container spec of the Portainer server; ``has_secret``: the agent secret is in pillar."""
    settings = settings or {}
    storage = settings.get("storage_path")
    if not isinstance(storage, str) or not os.path.isabs(storage) or os.path.normpath(storage) == "/":
        raise ValueError(f"ccc:docker:portainer_ui:storage_path must be an absolute folder other than /, got {storage!r}")
    port = settings.get("publish_port")
    if not ccc_rules.is_whole(port, 1, 65535):
        raise ValueError(f"ccc:docker:portainer_ui:publish_port must be a port number, got {port!r}")
    for key in ("name", "image", "publish_ip"):
        if not isinstance(settings.get(key), str) or not settings[key]:
            raise ValueError(f"ccc:docker:portainer_ui:{key} must be a non-empty string, got {settings.get(key)!r}")
    network = settings.get("network")
    if network is not None and (not isinstance(network, str) or not network):
        raise ValueError(f"ccc:docker:portainer_ui:network must be a network name or null, got {network!r}")
    subdomain = settings.get("frp_subdomain")
    if subdomain is not None and (not isinstance(subdomain, str) or not subdomain):
        raise ValueError(f"ccc:docker:portainer_ui:frp_subdomain must be a subdomain or null, got {subdomain!r}")
    return {
        "name": settings["name"], "image": settings["image"], "role": "docker",
        "ports": {f"{PORT}/tcp": [settings["publish_ip"], port]},
        "exposed_ports": EXPOSED,
        "binds": [{"source": os.path.normpath(storage), "target": "/data", "read_only": False}],
        "networks": [network] if network else [],
        "labels": ccc_frp.service_labels(PORT, subdomain, health_check=True) if subdomain else {},
        "restart": "always",
        "secret_env": {"AGENT_SECRET": ["portainer", "agent_secret"]} if has_secret else {},
        "secret_env_inline": True,
    }
