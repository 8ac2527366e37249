"""
Execution module ``ccc_docker_host``: the docker cluster role's view of this node (its
networks, their egress rules, daemon.json) and what its states ask of the engine and of
dockerd (a network made to match, a daemon.json checked, a registry login checked). Reads
pillar and grains, calls ``_utils/ccc_docker_*``, returns data or raises
``CommandExecutionError``; the egress chains themselves are ``ccc_docker_firewall``'s.
"""

import subprocess
import tempfile

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
    """The node's engine and networks are all this module reads of ``ccc``."""
    return ccc_pillar.pillar_ccc(__pillar__, keys=("cluster", "node"))


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


def daemon_config_problem(text, dockerd="dockerd"):
    """
    Why ``dockerd --validate`` rejects daemon.json ``text``, or ``None`` when it accepts it or
    cannot check it (no dockerd, or one older than Docker 23 without ``--validate``): the state
    installs only a file the engine will start with.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker_host.daemon_config_problem '{"log-driver": "json-file"}'
    """
    try:
        help_text = subprocess.run([dockerd, "--help"], capture_output=True, text=True, timeout=60, check=False).stdout
    except OSError:
        return None
    except subprocess.TimeoutExpired as exc:
        raise CommandExecutionError(f"{dockerd} --help did not answer in 60 s") from exc
    if not ccc_docker_daemon.supports_validate(help_text):
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="ccc-daemon-") as handle:
        handle.write(text)
        handle.flush()
        try:
            proc = subprocess.run([dockerd, "--validate", "--config-file", handle.name],
                                  capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CommandExecutionError(f"{dockerd} --validate could not check it: {exc}") from exc
    if proc.returncode == 0:
        return None
    said = proc.stderr.strip() or proc.stdout.strip() or f"exit status {proc.returncode}"
    return said.replace(handle.name, "daemon.json")


def registry_login(registry, username, password):
    """
    Log this node's engine in to ``registry`` (the registry checks the credentials); ``True``,
    or ``CommandExecutionError`` with the engine's or the registry's reason. Nothing is written:
    the state keeps root's config file. The caller masks the credentials in what it shows.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker_host.registry_login registry.example.org robot s3cret
    """
    node = _node()
    try:
        _client().login(username=username, password=password, registry=registry, reauth=True)
    except Exception as exc:  # the engine's and the registry's errors alike are the reason
        raise CommandExecutionError(ccc_engine.engine_problem(exc, node["docker_url"]) or str(exc)) from exc
    return True


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
