"""
The one registry of what each cluster role runs on a node: its systemd units and its containers.

``salt-run ccc.status`` (through ``ccc_cluster.services`` on each node) checks exactly these, so
a role that starts a service lists it here or in its own util module's ``services(settings,
node_id)``. Pure: a role's settings (``ccc_cluster.role_settings``), the node's minion id and the
node's ``ccc`` pillar in; ``[{"kind": "unit" | "container", "name": ..., "role": ...}]`` out
(empty for a role that runs no service). Units are named with their ``.service`` suffix.
"""

import ccc_cachefilesd
import ccc_docker_firewall
import ccc_frp_client
import ccc_monitoring
import ccc_patroller
import ccc_pillar
import ccc_rules
import ccc_superfan_gpu
import ccc_swarm


def unit(role, name):
    return {"kind": "unit", "name": name if "." in name else f"{name}.service", "role": role}


def container(role, name):
    return {"kind": "container", "name": name, "role": role}


def _docker(settings, node_id, ccc):
    """The engine; the egress firewall unit where a network of ``ccc:cluster:networks`` is
    restricted (firewall.sls installs it only then); the Portainer agent when switched on."""
    found = [unit("docker", "docker")]
    networks = ccc_pillar.cluster_settings(ccc or {}).get("networks") or {}
    if isinstance(networks, dict) and any(isinstance(definition, dict) and ccc_docker_firewall.is_restricted(definition)
                                          for definition in networks.values()):
        found.append(unit("docker", "ccc-docker-firewall"))
    agent = (settings or {}).get("portainer_agent") or {}
    if ccc_rules.truthy(agent.get("enabled")):
        found.append(container("docker", agent.get("name") or "portainer-agent"))
    return found


def _fail2ban(settings, node_id, ccc):
    return [unit("fail2ban", "fail2ban")]


def _nvidia(settings, node_id, ccc):
    return [unit("nvidia", "nvidia-persistenced")]


def _mellanox(settings, node_id, ccc):
    """The OFED driver service the role restarts (``ccc:mellanox:service``, none when null)."""
    service = (settings or {}).get("service")
    return [unit("mellanox", service)] if isinstance(service, str) and service else []


def _monitoring_agent(settings, node_id, ccc):
    """Its ``auto`` switches follow the node's GPUs and whether frp_client runs there."""
    devices = ccc_pillar.node_settings(ccc, node_id)["compute_devices"]
    return ccc_monitoring.services(settings, node_id, devices, ccc_monitoring.frp_client_on(ccc))


def _own(module):
    """A role whose util module answers ``services(settings, node_id)`` itself."""
    return lambda settings, node_id, ccc: module.services(settings, node_id)


# role -> services(settings, node_id, ccc). Roles not named here run no service of their own.
REGISTRY = {
    "docker": _docker,
    "fail2ban": _fail2ban,
    "nvidia": _nvidia,
    "swarm": _own(ccc_swarm),
    "frp_client": _own(ccc_frp_client),
    "superfan_gpu": _own(ccc_superfan_gpu),
    "monitoring_agent": _monitoring_agent,
    "patroller": _own(ccc_patroller),
    "cachefilesd": _own(ccc_cachefilesd),
    "mellanox": _mellanox,
}


def has_services(role):
    """Whether ``role`` may run services (so its settings are worth reading)."""
    return role in REGISTRY


def services(role, settings, node_id, ccc=None):
    """The services ``role`` runs on node ``node_id`` with ``settings``, in a stable order."""
    found = REGISTRY.get(role)
    listed = found(settings or {}, node_id, ccc or {}) if found else []
    return [unit(role, item["name"]) if item["kind"] == "unit" else container(role, item["name"]) for item in listed]
