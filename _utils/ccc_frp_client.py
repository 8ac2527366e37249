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

import ccc_frp
import ccc_role_schema

ROLE = "frp_client"
LOG_TARGET = "/var/log/frpc"


def check(settings, schema):
    """What is wrong with ``ccc:frp_client`` by the role's ``schema``, and then what the schema
    cannot say: a container name used by two entries."""
    problems = ccc_role_schema.problems(ROLE, settings, schema)
    if problems:
        return problems
    names = [entry["container_name"] for entry in settings.get("networks") or []]
    return [f"ccc:frp_client:networks[{index}]: container_name {name} is used twice"
            for index, name in enumerate(names) if name in names[:index]]


def watched(settings):
    """The ``networks`` entries as ``{network, container_name, log_name}`` (``log_name``
    defaults to ``<container_name>.log``); entries that are no mapping are left out."""
    return [{"network": item.get("network"), "container_name": item.get("container_name"),
             "log_name": str(item.get("log_name") or f"{item.get('container_name')}.log")}
            for item in (settings or {}).get("networks") or [] if isinstance(item, dict)]


def container_specs(settings, node_id, present):
    """
    The spec of each frpc container on node ``node_id`` for settings that passed ``check``:
    server, prefix (= the node name), log file and network in env; the token and every
    ``ccc_frp.AUTH`` credential ``present`` finds as secret env; the log folder bound, the Docker
    API through the ``frpc`` allowlist; restart always.
    """
    extra = {str(key): str(value) for key, value in (settings.get("env") or {}).items()}
    secret_env = ccc_frp.frpc_secret_env(present)
    specs = []
    for entry in watched(settings):
        env = {**extra,
               "FRPC_SERVER_ADDRESS": settings["server_address"], "FRPC_SERVER_PORT": str(int(settings["server_port"])),
               "FRPC_PREFIX": str(node_id), "FRPC_LOGFILE": f"{LOG_TARGET}/{entry['log_name']}",
               "FRPC_LOG_LEVEL": settings["log_level"], "FRPC_NETWORK": entry["network"]}
        specs.append({
            "name": entry["container_name"], "image": settings["image"], "role": ROLE,
            "env": env, "secret_env": dict(secret_env),
            "networks": [{"name": entry["network"], "aliases": []}],
            "binds": [{"source": settings["log_dir"], "target": LOG_TARGET, "read_only": False}],
            "docker_api": "frpc",
            "restart": "always",
        })
    return specs


def services(settings, node_id):
    """The containers the role runs on a node with these settings (for ``salt-run ccc.status``)."""
    return [{"kind": "container", "name": entry["container_name"], "role": ROLE} for entry in watched(settings)]
