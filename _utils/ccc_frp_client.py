"""
The frp_client role's rules: one frpc container per watched Docker network (``ccc:frp_client``),
as CCC's frpc image expects it (``ccc-companions.md`` C.3), turned into role-container specs
(``ccc_service_containers``). Pure: the role's settings, the node's minion id and a
``present(path)`` test for secrets in; specs and service lists out.

Fixed against the original: frpc never gets docker.sock (a read-only bind of a socket limits
nothing) but its own filtering proxy (``docker_api: frpc``: the calls docker-gen makes, all
reads, ``ccc_docker_api``); the token and the basic-auth credentials reach frpc as secret env
(never in ``docker inspect``).
"""

import re

import ccc_frp

ROLE = "frp_client"
LOG_TARGET = "/var/log/frpc"
LOG_LEVELS = ("trace", "debug", "info", "warn", "error")
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def watched(settings):
    """The checked ``networks`` entries: ``{network, container_name, log_name}`` each
    (``ValueError`` naming the entry for a missing or clashing name)."""
    entries, names = [], set()
    for index, item in enumerate((settings or {}).get("networks") or []):
        where = f"ccc:frp_client:networks[{index}]"
        if not isinstance(item, dict):
            raise ValueError(f"{where} must be a mapping with network and container_name")
        network, name = item.get("network"), item.get("container_name")
        for key, value in (("network", network), ("container_name", name)):
            if not isinstance(value, str) or not SAFE_NAME.match(value):
                raise ValueError(f"{where}: {key} must be a Docker name (letters, digits, _ . -)")
        log_name = item.get("log_name") or f"{name}.log"
        if not SAFE_NAME.match(str(log_name)):
            raise ValueError(f"{where}: log_name must be a plain file name")
        if name in names:
            raise ValueError(f"{where}: container_name {name} is used twice")
        names.add(name)
        entries.append({"network": network, "container_name": name, "log_name": str(log_name)})
    return entries


def container_specs(settings, node_id, present):
    """
    The spec of each frpc container on node ``node_id``: server, prefix (= the node name), log
    file and network in env; the token and every ``ccc_frp.AUTH`` credential ``present`` finds as
    secret env; the log folder bound, the Docker API through the ``frpc`` allowlist; restart always.
    """
    settings = settings or {}
    server, port = settings.get("server_address"), settings.get("server_port")
    if not isinstance(server, str) or not server:
        raise ValueError("ccc:frp_client:server_address must be set (the frps host)")
    if isinstance(port, bool) or not str(port).isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"ccc:frp_client:server_port must be a port number, not {port!r}")
    level = settings.get("log_level") or "info"
    if level not in LOG_LEVELS:
        raise ValueError(f"ccc:frp_client:log_level must be one of {', '.join(LOG_LEVELS)}")
    extra = {str(key): str(value) for key, value in (settings.get("env") or {}).items()}
    secret_env = ccc_frp.frpc_secret_env(present)
    specs = []
    for entry in watched(settings):
        env = {**extra,
               "FRPC_SERVER_ADDRESS": server, "FRPC_SERVER_PORT": str(int(port)), "FRPC_PREFIX": str(node_id),
               "FRPC_LOGFILE": f"{LOG_TARGET}/{entry['log_name']}", "FRPC_LOG_LEVEL": level,
               "FRPC_NETWORK": entry["network"]}
        specs.append({
            "name": entry["container_name"], "image": settings.get("image") or "lukacu/frpc:latest", "role": ROLE,
            "env": env, "secret_env": dict(secret_env),
            "networks": [{"name": entry["network"], "aliases": []}],
            "binds": [{"source": settings.get("log_dir") or LOG_TARGET, "target": LOG_TARGET, "read_only": False}],
            "docker_api": "frpc",
            "restart": "always",
        })
    return specs


def services(settings, node_id):
    """The containers the role runs on a node with these settings (for ``salt-run ccc.status``)."""
    try:
        entries = watched(settings)
    except ValueError:
        return []
    return [{"kind": "container", "name": entry["container_name"], "role": ROLE} for entry in entries]
