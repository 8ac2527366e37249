"""
Execution module ``ccc_docker_host``: the docker cluster role's view of this node (its
networks, their egress rules, daemon.json) and the one network function the states call.
Reads pillar and grains, calls ``_utils/ccc_docker_*``, returns data or raises
``CommandExecutionError``.
"""

from salt.exceptions import CommandExecutionError

import ccc_docker_daemon
import ccc_docker_firewall
import ccc_docker_networks
import ccc_engine
import ccc_pillar
import ccc_role_settings

__virtualname__ = "ccc_docker_host"


def __virtual__():
    if ccc_engine.docker is None:
        return False, "ccc_docker_host needs the docker Python SDK (salt-pip install docker)"
    return __virtualname__


def _ccc():
    return ccc_pillar.pillar_ccc(__pillar__)


def _node():
    return ccc_pillar.node_settings(_ccc(), __grains__["id"])


def _client():
    """The calling thread's Docker client for this node's engine, kept for the run."""
    return ccc_engine.context_clients(__context__, _node())()


def networks():
    """
    The Docker networks this node must have, ``{name: definition}``: ``ccc:cluster:networks``
    plus the networks containers join that have no definition (plain bridges).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker_host.networks
    """
    return ccc_docker_networks.wanted_networks(ccc_pillar.cluster_settings(_ccc()))


def network_present(name, test=False):
    """
    Make Docker network ``name`` match its definition: create it, or recreate it while no
    container is attached. Returns ``{"action", "differences", "users"}``
    (``ccc_docker_networks.ensure``).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker_host.network_present claims test=True
    """
    wanted = networks()
    if name not in wanted:
        raise CommandExecutionError(f"network {name} is neither in ccc:cluster:networks nor joined by containers")
    node = _node()
    with ccc_engine.answering(node["docker_url"], CommandExecutionError):
        return ccc_docker_networks.ensure(_client(), name, wanted[name], test=test)


def firewall_rules():
    """
    The egress rules the restricted networks of ``ccc:cluster:networks`` ask for, in chain order
    (what ``iptables -S CCC-EGRESS`` shows once applied).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker_host.firewall_rules
    """
    try:
        return ccc_docker_firewall.chain_rules(ccc_pillar.cluster_settings(_ccc()).get("networks"))
    except ValueError as exc:
        raise CommandExecutionError(str(exc)) from exc


def daemon_config(nvidia=None):
    """
    The daemon.json this node gets: ``ccc:docker:daemon`` plus the nvidia runtime where the
    toolkit is on (``nvidia`` overrides the role's decision).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker_host.daemon_config
    """
    settings = ccc_role_settings.read("docker", __pillar__, __salt__["cp.get_file_str"])
    if nvidia is None:
        nvidia = toolkit_enabled(settings)
    try:
        return ccc_docker_daemon.config(settings.get("daemon"), nvidia)
    except ValueError as exc:
        raise CommandExecutionError(str(exc)) from exc


def toolkit_enabled(settings=None):
    """
    Whether this node gets the NVIDIA container toolkit: ``ccc:docker:nvidia_toolkit:enabled``,
    where ``auto`` (the default) means "this node lists GPUs in ``ccc:node:compute_devices``".

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker_host.toolkit_enabled
    """
    if settings is None:
        settings = ccc_role_settings.read("docker", __pillar__, __salt__["cp.get_file_str"])
    enabled = (settings.get("nvidia_toolkit") or {}).get("enabled", "auto")
    if enabled == "auto":
        return any(uuids for uuids in (_node().get("compute_devices") or {}).values())
    return enabled is True or str(enabled).lower() in ("true", "yes", "1")


def restricted_networks():
    """
    Names of the networks of ``ccc:cluster:networks`` that ask for egress rules
    (``restricted_access``/``allowed_access``, ``filter_enabled`` not false); their rules are
    checked by the firewall state, not here.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker_host.restricted_networks
    """
    networks = ccc_pillar.cluster_settings(_ccc()).get("networks") or {}
    if not isinstance(networks, dict):
        return []
    return sorted(name for name, definition in networks.items()
                  if isinstance(definition, dict) and ccc_docker_firewall.is_restricted(definition))
