"""
Execution module ``ccc_monitoring``: what the monitoring_agent role runs on this node, read once
per render by ``salt/cluster/monitoring_agent/`` (rules in ``_utils/ccc_monitoring.py``).
"""

import ccc_engine
import ccc_exporter_config
import ccc_monitoring
import ccc_pillar
import ccc_role_settings
from salt.exceptions import CommandExecutionError

__virtualname__ = "ccc_monitoring"

ENGINE_TIMEOUT = 5


def __virtual__():
    return __virtualname__


def _settings(settings):
    if settings is None:
        settings = ccc_role_settings.read("monitoring_agent", __pillar__, __salt__["cp.get_file_str"])
    return ccc_pillar.plain(settings)


def _engine_reachable(docker_url):
    """Whether this node's Docker engine answers (removing a container needs one; none: nothing to remove)."""
    if ccc_engine.docker is None:
        return False
    try:
        client = ccc_engine.docker.DockerClient(base_url=docker_url, version=ccc_engine.API_VERSION,
                                                timeout=ENGINE_TIMEOUT)
    except Exception:  # noqa: BLE001  (a URL the SDK refuses: no engine to talk to)
        return False
    try:
        return bool(client.ping())
    except Exception:  # noqa: BLE001  (down, refused, no socket)
        return False
    finally:
        client.close()


def plan(settings=None):
    """
    Show what the monitoring_agent role runs here: which node_exporter (``package``,
    ``container`` or none), whether the GPU exporter and the FRP forwarder run, the address both
    exporters listen on, the packaged exporter's ``/etc/default`` text and the container specs.
    ``problems`` names a setting that cannot work (the role then changes nothing).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_monitoring.plan
    """
    settings = _settings(settings)
    ccc = ccc_pillar.pillar_ccc(__pillar__)
    node = ccc_pillar.node_settings(ccc, __grains__["id"])
    result = {"problems": [], "engine": _engine_reachable(node["docker_url"]),
              "node_exporter_name": (settings.get("node_exporter") or {}).get("container_name"),
              "forwarder_name": (settings.get("forwarder") or {}).get("name")}
    result["problems"] = ccc_role_settings.problems("monitoring_agent", settings, __salt__["cp.get_file_str"])
    if result["problems"]:
        return result
    try:
        gpu_port = ccc_exporter_config.from_pillar(ccc)["port"]
        result.update(ccc_monitoring.plan(settings, ccc_pillar.cluster_settings(ccc)["networks"],
                                          node["compute_devices"], ccc_monitoring.frp_client_on(ccc), gpu_port))
        if result["node_exporter"] == "package":
            result["package_defaults"] = ccc_monitoring.package_defaults_text(settings, result["address"])
        elif result["node_exporter"] == "container":
            result["node_exporter_spec"] = ccc_monitoring.node_exporter_spec(settings, result["address"], node["name"])
        if result["forwarder"]:
            result["forwarder_spec"] = ccc_monitoring.forwarder_spec(settings, result, node["name"])
    except (ValueError, KeyError, TypeError) as exc:
        result["problems"] = [str(exc)]
    return result


def services(settings=None):
    """
    List the services the monitoring_agent role runs on this node with its settings (units and
    containers, for ``salt-run ccc.status``).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_monitoring.services
    """
    ccc = ccc_pillar.pillar_ccc(__pillar__)
    node = ccc_pillar.node_settings(ccc, __grains__["id"])
    try:
        return ccc_monitoring.services(_settings(settings), node["name"], node["compute_devices"], ccc_monitoring.frp_client_on(ccc))
    except (KeyError, TypeError) as exc:
        raise CommandExecutionError(f"ccc:monitoring: {exc}") from None
