"""
The monitoring_agent role's rules (pillar ``ccc:monitoring``): where the exporters listen, which of
them run on a node, the node_exporter's arguments, and the forwarder container that publishes
them through FRP. Pure: settings and pillar data in, values or ``ValueError`` out; the role's SLS
(``salt/cluster/monitoring_agent/``) and ``_modules/ccc_monitoring.py`` call it.

Why a forwarder: the original ran both exporters as containers on an frpc-watched network, so
node_exporter reported the container's network, not the host's NICs. Here the exporters run on
the host (node_exporter from Debian's package or in a host-network container, the GPU exporter as
a systemd service) and listen only on the host side of the monitoring Docker network (its gateway),
never on the whole LAN. frpc proxies only containers on its network, so one small container on
that network carries the FRP labels of both (``<node>-metrics`` at ``/`` and ``/nvidia``, the
original's scrape surface) and forwards each port to the host address.
"""

import ipaddress
import shlex

import ccc_frp
import ccc_roles

ROLE = "monitoring_agent"
LOOPBACK = "127.0.0.1"
NODE_EXPORTER_UNIT = "prometheus-node-exporter"
GPU_EXPORTER_UNIT = "ccc-gpu-exporter"
SUBDOMAIN = "{node}-metrics"
NODE_LOCATION, GPU_LOCATION = "/", "/nvidia"
AUTH = "metrics"


def _switch(value, auto, what):
    """``auto`` → ``auto`` (the node's fact); booleans and their usual spellings as they say."""
    if value == "auto" or value is None:
        return bool(auto)
    if isinstance(value, bool):
        return value
    if str(value).strip().lower() in ("true", "yes", "1", "on"):
        return True
    if str(value).strip().lower() in ("false", "no", "0", "off"):
        return False
    raise ValueError(f"ccc:monitoring:{what} must be auto, true or false, got {value!r}")


def _ip(value, what):
    try:
        return str(ipaddress.ip_address(str(value)))
    except ValueError:
        raise ValueError(f"{what} must be an IP address, got {value!r}") from None


def host_address(monitoring, networks):
    """
    The address the exporters listen on: ``ccc:monitoring:listen_address`` when set, else the
    gateway (the host side) of ``ccc:monitoring:network`` as ``ccc:cluster:networks`` defines it,
    else ``None`` (no monitoring network: nothing is published; the exporters keep their local
    defaults, ``LOOPBACK``).
    """
    monitoring = monitoring or {}
    if monitoring.get("listen_address"):
        return _ip(monitoring["listen_address"], "ccc:monitoring:listen_address")
    network = monitoring.get("network")
    if not network:
        return None
    definition = (networks or {}).get(network)
    if not isinstance(definition, dict):
        raise ValueError(f"ccc:monitoring:network {network!r} is not in ccc:cluster:networks "
                         "(the docker role creates the networks listed there)")
    if not definition.get("gateway"):
        raise ValueError(f"ccc:cluster:networks:{network} has no gateway: set it (the exporters listen "
                         "on the network's host side) or set ccc:monitoring:listen_address")
    return _ip(definition["gateway"], f"ccc:cluster:networks:{network}:gateway")


def pillar_host_address(ccc):
    """``host_address`` from the ``ccc`` pillar (plain data): what the GPU exporter binds unless
    ``ccc:monitoring:gpu_exporter:listen_address`` says otherwise (``None``: its own default)."""
    ccc = ccc or {}
    return host_address(ccc.get("monitoring"), (ccc.get("cluster") or {}).get("networks"))


def frp_client_on(ccc):
    """Whether the node's switches (``ccc:roles``) run the frp_client role: the ``auto`` forwarder
    follows the node's setup, not one run's ``only_roles`` selection (a run limited to
    monitoring_agent must not remove the forwarder)."""
    try:
        return ccc_roles.switches(ccc.get("roles"))["frp_client"] is True
    except ValueError:
        return False


def switches(settings, compute_devices, frp_client_on):
    """
    Which parts run: ``{"node_exporter": "package" | "container" | None, "gpu": bool, "forwarder":
    bool}``. ``gpu: auto`` means the node lists GPUs (``compute_devices``, its GPU groups);
    ``forwarder:enabled: auto`` means the frp_client role runs here (nothing to publish to
    otherwise), and a forwarder with no exporter behind it does not run.
    """
    node = settings.get("node_exporter") or {}
    mode = node.get("mode") if _switch(node.get("enabled", True), True, "node_exporter:enabled") else None
    gpus = any(uuids for uuids in (compute_devices or {}).values())
    gpu = _switch(settings.get("gpu", "auto"), gpus, "gpu")
    forwarder = _switch((settings.get("forwarder") or {}).get("enabled", "auto"), frp_client_on, "forwarder:enabled")
    return {"node_exporter": mode, "gpu": gpu, "forwarder": forwarder and bool(mode or gpu)}


def plan(settings, networks, compute_devices, frp_client_on, gpu_port):
    """
    What the role runs on a node and where: ``switches`` plus ``address`` (``host_address``),
    ``network``, ``node_port`` and ``gpu_port``. ``settings`` are the role's (``ccc:monitoring``
    over defaults.yaml), ``networks`` ``ccc:cluster:networks``, ``gpu_port`` the GPU exporter's
    port; ``settings`` passed the role's schema (node_exporter's mode, port and args, the
    forwarder's command: ``salt/cluster/monitoring_agent/schema.yaml``). ``ValueError`` names the
    setting that cannot work with another (the network, the switches, the forwarder's address).
    """
    result = switches(settings, compute_devices, frp_client_on)
    result.update(address=host_address(settings, networks) or LOOPBACK, network=settings.get("network") or None,
                  node_port=settings["node_exporter"]["port"], gpu_port=gpu_port)
    if result["forwarder"]:
        if not result["network"]:
            raise ValueError("the metrics forwarder needs ccc:monitoring:network (an frpc-watched Docker network)")
        if ipaddress.ip_address(result["address"]).is_loopback:
            raise ValueError(f"the metrics forwarder cannot reach exporters on {result['address']} (loopback): "
                             "leave ccc:monitoring:listen_address unset or give a host address its network reaches")
    return result


def listen(address, port):
    """``address:port`` as exporters take it (IPv6 in brackets)."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def package_args(settings, address):
    """The packaged node_exporter's argument list: listen address first, then ``node_exporter:args``
    (the schema let through only ``--flag[=value]`` without white space, quotes or ``$``: systemd
    splits ``$ARGS`` on white space and reads those itself)."""
    node = settings.get("node_exporter") or {}
    return [f"--web.listen-address={listen(address, node['port'])}"] + list(node.get("args") or [])


def package_defaults_text(settings, address):
    """``/etc/default/prometheus-node-exporter`` (read by Debian's unit as ``$ARGS``)."""
    args = " ".join(package_args(settings, address))
    return ("# Managed by Salt (ccc-salt cluster role monitoring_agent, pillar ccc:monitoring:node_exporter).\n"
            "# Local edits are overwritten.\n"
            f'ARGS="{args}"\n')


def node_exporter_spec(settings, address, node_name):
    """
    The container of ``node_exporter:mode: container``: host network (so ``node_network_*`` are
    the host's NICs, not a container's, the original's defect), host PID namespace, ``/`` read-only
    at ``/host``, listening on the host address only.
    """
    node = settings["node_exporter"]
    return {
        "name": node["container_name"], "image": node["image"], "role": ROLE,
        "command": ["--path.rootfs=/host"] + package_args(settings, address),
        "networks": [{"name": "host"}], "pid_mode": "host",
        "binds": [{"source": "/", "target": "/host", "read_only": True}],
        "restart": "unless-stopped", "log_config": _log_config(settings),
        "labels": {"ccc.node": str(node_name)},
    }


def _log_config(settings):
    log = settings.get("container_log") or {}
    return {"type": str(log.get("type") or "json-file"),
            "config": {str(key): str(value) for key, value in (log.get("config") or {}).items()}}


def forwards(result):
    """``[(container port, host port)]`` the forwarder carries: 9100 and the GPU exporter's 9445
    (the original's container ports, which the FRP labels name)."""
    found = []
    if result["node_exporter"]:
        found.append((9100, result["node_port"]))
    if result["gpu"]:
        found.append((9445, result["gpu_port"]))
    return found


def forward_script(template, address, pairs):
    """
    The forwarder's ``sh -c`` script: per port, ``template`` (``{port}`` = the container port,
    ``{address}``/``{target_port}`` = where the exporter listens) restarted a second after it ends,
    all in the background; the shell waits and exits on SIGTERM (the schema made sure ``template``
    has ``{port}``).
    """
    loops = []
    for port, target in pairs:
        try:
            command = template.format(port=port, address=shlex.quote(address), target_port=target)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"ccc:monitoring:forwarder:forward_command: bad placeholder {exc}") from None
        loops.append(f"while :; do {command}; sleep 1; done &")
    return "trap 'exit 0' TERM INT; " + " ".join(loops) + " wait"


def forwarder_labels(node_name, pairs):
    """The FRP labels of the forwarder: ``<node>-metrics`` at ``/`` (9100) and ``/nvidia`` (9445)."""
    subdomain = SUBDOMAIN.format(node=node_name)
    labels = {}
    for port, _ in pairs:
        location = NODE_LOCATION if port == 9100 else GPU_LOCATION
        labels.update(ccc_frp.service_labels(port, subdomain, location, auth=AUTH))
    return labels


def forwarder_spec(settings, result, node_name):
    """The forwarder container (``ccc_service_container.running`` spec) for plan ``result``."""
    forwarder = settings["forwarder"]
    pairs = forwards(result)
    return {
        "name": forwarder["name"], "image": forwarder["image"], "role": ROLE, "hostname": str(node_name),
        "command": ["sh", "-c", forward_script(forwarder["forward_command"], result["address"], pairs)],
        "networks": [{"name": result["network"]}], "exposed_ports": [port for port, _ in pairs],
        "labels": forwarder_labels(node_name, pairs), "restart": "unless-stopped",
        "log_config": _log_config(settings),
    }


def services(settings, node_id, compute_devices=None, frp_client_on=False):
    """
    The services the role runs on node ``node_id`` with ``settings`` (the role's, ``[]`` when they
    switch everything off or cannot be read), for ``salt-run ccc.status``: ``[{"kind", "name",
    "role"}]``. The ``auto`` switches need the node's ``compute_devices`` (GPU exporter) and
    whether the frp_client role runs there (forwarder).
    """
    settings = settings or {}
    try:
        on = switches(settings, compute_devices, frp_client_on)
    except ValueError:
        return []
    found = []
    if on["node_exporter"] == "package":
        found.append({"kind": "unit", "name": NODE_EXPORTER_UNIT, "role": ROLE})
    elif on["node_exporter"] == "container":
        found.append({"kind": "container", "name": settings["node_exporter"]["container_name"], "role": ROLE})
    if on["gpu"]:
        found.append({"kind": "unit", "name": GPU_EXPORTER_UNIT, "role": ROLE})
    if on["forwarder"]:
        found.append({"kind": "container", "name": settings["forwarder"]["name"], "role": ROLE})
    return found
