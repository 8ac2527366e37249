"""
Role containers (frpc, patroller, portainer agent, exporters...) as plain data: one spec shape for
every cluster role, turned into what the container must look like, compared with what Docker
reports, and into ``create_container`` arguments. Pure: no Salt, no Docker calls; the state
``_states/ccc_service_container.py`` compares with these, and the execution module
``_modules/ccc_service_container.py`` does the talking.

The spec (``normalize`` checks it and fills the defaults)::

    name, image, role          role -> label ccc.cluster-role=<role>; other labels are foreign
    former_roles [str]         older label values still counted as ours (a container is migrated)
    hostname, command (list|null), env {K: str}, labels {k: str}
    secret_env {ENV: [path below ccc:secrets]}   values read by the state, never rendered
    secret_env_inline (bool)   put secret_env straight into the env (only for images without a
                               shell, e.g. the portainer agent: then ``docker inspect`` shows it)
    networks [{name, aliases}] exactly these networks, the first one is given at create
                               (none: Docker's default bridge, not compared)
    binds [{source, target, read_only}], pid_mode (null|"host"), privileged (bool),
    device_requests [{driver, device_ids, count, capabilities}], exposed_ports [int],
    ports {"9001/tcp": [ip, port]}, restart ("always"|"unless-stopped"),
    log_config {type, config}, extra_hosts {name: ip}
    docker_api (null|profile)  the Docker API through its own filtering proxy socket, bound at
                               /var/run/docker.sock (``ccc_docker_api``); the engine's socket
                               itself is never a bind source of a role container

Secret env without ``secret_env_inline`` reaches the process through a root-only env file bound
read-only at ``ENV_TARGET``, sourced by a ``/bin/sh`` wrapper around the image's entrypoint, so
``docker inspect`` never shows a value. Messages name what differs, never a value of the env.
"""

import re
import shlex

import ccc_docker_api

ROLE_LABEL = "ccc.cluster-role"
SECRET_DIR = "/etc/ccc-salt/secrets/containers"
ENV_MODE = 0o600  # the secret env file: root only
ENV_TARGET = "/run/ccc-secrets/env"
WRAPPER = ["/bin/sh", "-c", 'set -a; . /run/ccc-secrets/env; set +a; exec "$@"', "ccc-secret-env"]
RESTART_POLICIES = ("always", "unless-stopped")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PORT_KEY = re.compile(r"^[0-9]{1,5}/(tcp|udp|sctp)$")
DEFAULTS = {
    "former_roles": [], "hostname": None, "command": None, "env": {}, "labels": {}, "secret_env": {},
    "secret_env_inline": False, "networks": [], "binds": [], "pid_mode": None, "privileged": False,
    "device_requests": [], "exposed_ports": [], "ports": {}, "restart": "always", "log_config": None,
    "extra_hosts": {}, "docker_api": None,
}


class BadSpec(ValueError):
    """A role's container spec cannot be used (a mistake in the SLS or the role's settings)."""


def normalize(spec):
    """The spec with defaults filled and every key checked (``BadSpec`` naming the key)."""
    unknown = set(spec) - set(DEFAULTS) - {"name", "image", "role"}
    if unknown:
        raise BadSpec(f"unknown container spec keys: {', '.join(sorted(unknown))}")
    out = {**DEFAULTS, **{key: value for key, value in spec.items() if value is not None}}
    for key in ("name", "image", "role"):
        if not isinstance(out.get(key), str) or not out[key]:
            raise BadSpec(f"container spec needs a non-empty string {key}")
    name = out["name"]
    out["env"] = _str_map(out["env"], f"{name}: env", keys=ENV_NAME)
    out["labels"] = _str_map(out["labels"], f"{name}: labels")
    out["extra_hosts"] = _str_map(out["extra_hosts"], f"{name}: extra_hosts")
    out["secret_env"] = _secret_env(out["secret_env"], name)
    clash = set(out["env"]) & set(out["secret_env"])
    if clash:
        raise BadSpec(f"{name}: {', '.join(sorted(clash))} in both env and secret_env")
    if out["command"] is not None and not (isinstance(out["command"], list) and all(isinstance(a, str) for a in out["command"])):
        raise BadSpec(f"{name}: command must be a list of strings or null")
    if out["restart"] not in RESTART_POLICIES:
        raise BadSpec(f"{name}: restart must be one of {', '.join(RESTART_POLICIES)}")
    if out["pid_mode"] not in (None, "host"):
        raise BadSpec(f"{name}: pid_mode must be null or host")
    out["networks"] = [_network(item, name) for item in out["networks"]]
    out["binds"] = [_bind(item, name) for item in out["binds"]]
    _docker_api(out)
    out["device_requests"] = [_device_request(item, name) for item in out["device_requests"]]
    out["exposed_ports"] = sorted({int(port) for port in out["exposed_ports"]})
    out["ports"] = {_port_key(key, name): [str(ip), int(port)] for key, (ip, port) in out["ports"].items()}
    out["privileged"], out["secret_env_inline"] = bool(out["privileged"]), bool(out["secret_env_inline"])
    out["former_roles"] = [str(role) for role in out["former_roles"]]
    if out["log_config"] is not None:
        out["log_config"] = {"type": str(out["log_config"]["type"]),
                             "config": _str_map(out["log_config"].get("config") or {}, f"{name}: log_config")}
    return out


def _str_map(value, what, keys=None):
    if not isinstance(value, dict):
        raise BadSpec(f"{what} must be a mapping")
    for key, item in value.items():
        if not isinstance(key, str) or (keys and not keys.match(key)):
            raise BadSpec(f"{what}: bad name {key!r}")
        if not isinstance(item, str):
            raise BadSpec(f"{what}: value of {key} must be a string, not {type(item).__name__}")
    return dict(value)


def _secret_env(value, name):
    if not isinstance(value, dict):
        raise BadSpec(f"{name}: secret_env must be a mapping")
    for key, path in value.items():
        if not ENV_NAME.match(str(key)):
            raise BadSpec(f"{name}: secret_env: bad name {key!r}")
        if not isinstance(path, list) or not path or not all(isinstance(p, str) and p for p in path):
            raise BadSpec(f"{name}: secret_env {key} must be a list of pillar keys below ccc:secrets")
    return {key: list(path) for key, path in value.items()}


def _network(item, name):
    if isinstance(item, str):
        item = {"name": item}
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
        raise BadSpec(f"{name}: each network needs a name")
    return {"name": item["name"], "aliases": [str(alias) for alias in item.get("aliases") or []]}


def _bind(item, name):
    if not (isinstance(item, dict) and str(item.get("source", "")).startswith("/")
            and str(item.get("target", "")).startswith("/")):
        raise BadSpec(f"{name}: each bind needs absolute source and target paths")
    return {"source": item["source"], "target": item["target"], "read_only": bool(item.get("read_only"))}


def _docker_api(spec):
    """The engine's socket is never bound (only a filtering proxy's, through ``docker_api``)."""
    name = spec["name"]
    for item in spec["binds"]:
        source = item["source"]
        if source in ccc_docker_api.ENGINE_SOCKETS or source.startswith(ccc_docker_api.SOCKET_DIR + "/"):
            raise BadSpec(f"{name}: bind {source} is the Docker engine's socket or a proxy's: ask for "
                          "docker_api: <profile> instead (a role container never gets the whole API)")
        if spec["docker_api"] is not None and item["target"] == ccc_docker_api.TARGET:
            raise BadSpec(f"{name}: {ccc_docker_api.TARGET} is where docker_api's socket goes")
    if spec["docker_api"] is not None:
        try:
            ccc_docker_api.check(name, spec["docker_api"])
        except ccc_docker_api.BadProfile as exc:
            raise BadSpec(str(exc)) from None


def _device_request(item, name):
    if not isinstance(item, dict):
        raise BadSpec(f"{name}: each device request must be a mapping")
    ids = [str(device) for device in item.get("device_ids") or []]
    count = int(item.get("count") or 0)
    if ids and count:
        raise BadSpec(f"{name}: a device request takes device_ids or a count, not both")
    capabilities = item.get("capabilities") or [["gpu"]]
    if capabilities and isinstance(capabilities[0], str):
        capabilities = [capabilities]
    return {"driver": str(item.get("driver") or "nvidia"), "device_ids": ids, "count": count,
            "capabilities": [sorted(str(c) for c in group) for group in capabilities]}


def _port_key(key, name):
    key = str(key) if "/" in str(key) else f"{key}/tcp"
    if not PORT_KEY.match(key):
        raise BadSpec(f"{name}: bad port {key!r} (want e.g. 9001/tcp)")
    return key


def env_file_path(name):
    """Where the secret env file of container ``name`` lives on the node."""
    return f"{SECRET_DIR}/{name}.env"


def env_file_text(values):
    """The secret env file: one ``K='v'`` line per variable, quoted for ``/bin/sh``."""
    return "".join(f"{key}='{value.replace(chr(39), chr(39) + chr(92) + chr(39) + chr(39))}'\n"
                   for key, value in sorted(values.items()))


def env_file_values(text):
    """The variables of an env file ``env_file_text`` wrote (``{}`` for none or unreadable text)."""
    try:
        tokens = shlex.split(text or "", posix=True)
    except ValueError:
        return {}
    return dict(token.split("=", 1) for token in tokens if "=" in token)


def changed_keys(old, new):
    """Names of the variables that differ between two env mappings (no values)."""
    return sorted(key for key in set(old) | set(new) if old.get(key) != new.get(key))


def uses_env_file(spec):
    return bool(spec["secret_env"]) and not spec["secret_env_inline"]


def entrypoint_and_cmd(spec, image_config):
    """
    ``(Entrypoint, Cmd)`` the container gets: with an env file, the ``WRAPPER`` as entrypoint and
    the image's entrypoint plus the command (the spec's, else the image's) as its arguments;
    otherwise the image's entrypoint and the spec's command (``None``: the image's).
    """
    image_entry = list(image_config.get("Entrypoint") or [])
    command = spec["command"] if spec["command"] is not None else list(image_config.get("Cmd") or [])
    if uses_env_file(spec):
        if not image_entry + command:
            raise BadSpec(f"{spec['name']}: image {spec['image']} has no entrypoint or command to run")
        return list(WRAPPER), image_entry + command
    return image_entry or None, command or None


def wanted(spec, image_config, inline_secrets=None):
    """
    What the created container will look like in ``docker inspect``: Docker merges the image's
    env, labels and exposed ports into the container's, so they are merged here too.
    ``inline_secrets`` are the secret values of a ``secret_env_inline`` spec.
    """
    entrypoint, cmd = entrypoint_and_cmd(spec, image_config)
    env = dict(item.split("=", 1) for item in image_config.get("Env") or [] if "=" in item)
    env.update(spec["env"])
    env.update(inline_secrets or {})
    binds = list(spec["binds"])
    if uses_env_file(spec):
        binds.append({"source": env_file_path(spec["name"]), "target": ENV_TARGET, "read_only": True})
    if spec["docker_api"] is not None:
        binds.append(ccc_docker_api.bind(spec["name"]))
    exposed = {f"{port}/tcp" for port in spec["exposed_ports"]} | set(spec["ports"])
    exposed |= set(image_config.get("ExposedPorts") or {})
    return {
        **spec, "entrypoint": entrypoint, "cmd": cmd, "env": env, "binds": binds,
        "labels": {**(image_config.get("Labels") or {}), **spec["labels"], ROLE_LABEL: spec["role"]},
        "exposed": sorted(exposed),
    }


def bind_strings(binds):
    return sorted(f"{b['source']}:{b['target']}:{'ro' if b['read_only'] else 'rw'}" for b in binds)


def _device_key(request):
    return (request.get("Driver") or "", request.get("Count") or 0, sorted(request.get("DeviceIDs") or []),
            sorted(sorted(group) for group in request.get("Capabilities") or []))


def _docker_aliases(attrs):
    """The aliases Docker gives a container itself (short id, name, hostname)."""
    return {attrs.get("Id", "")[:12], attrs.get("Name", "").lstrip("/"), (attrs.get("Config") or {}).get("Hostname")}


def _aliases(attrs, network):
    """User aliases on a network, without the ones Docker adds (``_docker_aliases``)."""
    endpoint = ((attrs.get("NetworkSettings") or {}).get("Networks") or {}).get(network) or {}
    return sorted(set(endpoint.get("Aliases") or []) - _docker_aliases(attrs))


def differences(attrs, want, image_id=None, secret_keys=()):
    """
    What differs between an inspected container and ``wanted(...)``: a list of short phrases that
    name settings and env/label keys, never their values (``secret_keys`` are named as changed
    secrets). ``image_id``: the id the wanted tag points to now (a re-pulled tag recreates).
    """
    config, host = attrs.get("Config") or {}, attrs.get("HostConfig") or {}
    found = []
    if config.get("Image") != want["image"] or (image_id and attrs.get("Image") != image_id):
        found.append(f"image {config.get('Image')} -> {want['image']}")
    env = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
    for key in changed_keys(env, want["env"]):
        found.append(f"secret {key} changed" if key in secret_keys else f"env {key}")
    for key in changed_keys(config.get("Labels") or {}, want["labels"]):
        found.append(f"label {key}")
    if (config.get("Entrypoint") or None) != want["entrypoint"] or (config.get("Cmd") or None) != want["cmd"]:
        found.append("command")
    if want["hostname"] and config.get("Hostname") != want["hostname"]:
        found.append(f"hostname {config.get('Hostname')} -> {want['hostname']}")
    if sorted(config.get("ExposedPorts") or {}) != want["exposed"]:
        found.append("exposed ports")
    found += _host_differences(host, want)
    found += _network_differences(attrs, want)
    return found


def _host_differences(host, want):
    found = []
    if sorted(host.get("Binds") or []) != bind_strings(want["binds"]):
        found.append("binds")
    ports = {key: [(b.get("HostIp") or "", str(b.get("HostPort") or "")) for b in value or []]
             for key, value in (host.get("PortBindings") or {}).items()}
    if ports != {key: [(ip, str(port))] for key, (ip, port) in want["ports"].items()}:
        found.append("published ports")
    if (host.get("PidMode") or None) != want["pid_mode"]:
        found.append(f"pid mode {host.get('PidMode') or 'private'} -> {want['pid_mode'] or 'private'}")
    if bool(host.get("Privileged")) != want["privileged"]:
        found.append("privileged")
    have = sorted(_device_key(r) for r in host.get("DeviceRequests") or [])
    if have != sorted(_device_key(r) for r in device_requests(want)):
        found.append("devices")
    if (host.get("RestartPolicy") or {}).get("Name") != want["restart"]:
        found.append(f"restart policy -> {want['restart']}")
    log = host.get("LogConfig") or {}
    if want["log_config"] and (log.get("Type"), log.get("Config") or {}) != (want["log_config"]["type"], want["log_config"]["config"]):
        found.append("log config")
    if sorted(host.get("ExtraHosts") or []) != extra_host_strings(want):
        found.append("extra hosts")
    return found


def _network_differences(attrs, want):
    if not want["networks"]:
        return []  # the engine's default network, as Docker chose it
    have = sorted(((attrs.get("NetworkSettings") or {}).get("Networks") or {}))
    names = [net["name"] for net in want["networks"]]
    if sorted(have) != sorted(names):
        return [f"networks {', '.join(have) or '-'} -> {', '.join(names) or '-'}"]
    added = _docker_aliases(attrs)
    return [f"aliases on {net['name']}" for net in want["networks"]
            if _aliases(attrs, net["name"]) != sorted(set(net["aliases"]) - added)]


def device_requests(want):
    return [{"Driver": r["driver"], "Count": r["count"], "DeviceIDs": r["device_ids"] or None,
             "Capabilities": r["capabilities"], "Options": {}} for r in want["device_requests"]]


def extra_host_strings(want):
    return sorted(f"{host}:{ip}" for host, ip in want["extra_hosts"].items())


def create_kwargs(want):
    """``APIClient.create_container`` keyword arguments (plain dicts) for ``wanted(...)``; the
    networks after the first are connected afterwards (``later_networks``)."""
    host_config = {
        "Binds": bind_strings(want["binds"]),
        "PortBindings": {key: [{"HostIp": ip, "HostPort": str(port)}] for key, (ip, port) in want["ports"].items()},
        "RestartPolicy": {"Name": want["restart"], "MaximumRetryCount": 0},
        "Privileged": want["privileged"],
        "ExtraHosts": extra_host_strings(want) or None,
        "DeviceRequests": device_requests(want) or None,
    }
    if want["pid_mode"]:
        host_config["PidMode"] = want["pid_mode"]
    if want["log_config"]:
        host_config["LogConfig"] = {"Type": want["log_config"]["type"], "Config": want["log_config"]["config"]}
    first = want["networks"][0] if want["networks"] else None
    if first:
        host_config["NetworkMode"] = first["name"]
    return {
        "image": want["image"], "name": want["name"], "hostname": want["hostname"],
        "entrypoint": want["entrypoint"], "command": want["cmd"],
        "environment": [f"{key}={value}" for key, value in sorted(want["env"].items())],
        "labels": want["labels"], "ports": [_port_tuple(key) for key in want["exposed"]],
        "host_config": host_config,
        "networking_config": {"EndpointsConfig": {first["name"]: {"Aliases": first["aliases"] or None}}} if first else None,
    }


def _port_tuple(key):
    port, proto = key.split("/")
    return (int(port), proto) if proto != "tcp" else int(port)


def later_networks(want):
    """The networks (with aliases) connected after create: all but the first."""
    return want["networks"][1:]


def is_ours(attrs, spec):
    """True when the container carries this role's label (or a former one of it)."""
    label = ((attrs.get("Config") or {}).get("Labels") or {}).get(ROLE_LABEL)
    return label == spec["role"] or label in spec.get("former_roles", [])
