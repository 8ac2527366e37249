"""
Execution module ``ccc_gpu``: this node's GPUs as NVML sees them, which container (and so
which user) uses them, and the GPU exporter's configuration from pillar.

The code lives in ``_utils/`` (plain Python, shared with the agents): ``ccc_nvml`` reads NVML,
``ccc_process_owners`` maps a process to its container and user, ``ccc_exporter_config`` holds
the exporter's defaults and checks.
"""

import logging

import ccc_exporter_config
import ccc_nvml
import ccc_pillar
import ccc_process_owners
from salt.exceptions import CommandExecutionError

__virtualname__ = "ccc_gpu"

log = logging.getLogger(__name__)


def __virtual__():
    return __virtualname__


def _read_with_nvml(reader):
    """Run ``reader(nvml)`` on a fresh NVML session; NVML problems become Salt errors."""
    try:
        nvml = ccc_nvml.load_nvml()
    except ccc_nvml.NvmlUnavailable as exc:
        raise CommandExecutionError(str(exc)) from exc
    try:
        return reader(nvml)
    except ccc_nvml.GpuReadError as exc:
        raise CommandExecutionError(str(exc)) from exc
    finally:
        ccc_nvml.shutdown_nvml(nvml)


def devices():
    """
    List this node's GPUs as NVML sees them: index, minor number, UUID, name, temperature,
    utilisation, memory, power, fan, PCI bus id (``None`` for what a GPU does not support).

    Fails with a clear message when NVML cannot be used (no driver, no ``nvidia-ml-py``).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_gpu.devices
    """
    return _read_with_nvml(ccc_nvml.read_gpus)


def _containers(url):
    """Running containers at ``url`` by id, or ``{}`` (logged) when Docker cannot be asked."""
    try:
        client = ccc_process_owners.docker_client(url)
        try:
            return ccc_process_owners.docker_containers(client)
        finally:
            client.close()
    except Exception as exc:  # noqa: BLE001  (any Docker failure: list without attribution)
        log.warning("ccc_gpu.processes: cannot list containers at %s: %s", url, exc)
        return {}


def processes():
    """
    List the processes using this node's GPUs with their GPU memory, and for each the Docker
    container, stack and user (from the container's ``ccc.stack`` / ``ccc-user.*`` labels).

    The Docker endpoint is pillar ``ccc:node:docker_url``. When Docker cannot be asked, the
    processes are listed without attribution and a warning is logged.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_gpu.processes
    """
    found = _read_with_nvml(ccc_nvml.read_processes)
    containers = {}
    if found:
        node = ccc_pillar.node_settings(ccc_pillar.pillar_ccc(__pillar__), None)
        containers = _containers(node["docker_url"])
    return ccc_process_owners.attribute(found, containers)


def container_of_pid(pid):
    """
    Show the full id of the Docker container that runs host process ``pid`` (``None`` when
    it runs in no container or has vanished). Understands cgroup v1 and v2 and the
    containerd, CRI-O and podman scopes.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_gpu.container_of_pid 12345
    """
    return ccc_process_owners.container_of_pid(pid)


def exporter_config():
    """
    Show the GPU exporter's configuration from pillar ``ccc:monitoring:gpu_exporter`` over the
    node's Docker endpoint, the fan controller's state file and the defaults (what
    ``agents/config/gpu-exporter.yaml.jinja`` writes to ``/etc/ccc/gpu-exporter.yaml``). An
    unknown or unusable key fails with every problem named.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_gpu.exporter_config
    """
    try:
        return ccc_exporter_config.from_pillar(ccc_pillar.pillar_ccc(__pillar__))
    except ccc_exporter_config.ConfigError as exc:
        raise CommandExecutionError(f"ccc:monitoring:gpu_exporter: {exc}") from None
