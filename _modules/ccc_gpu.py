"""
GPUs of a node through NVML, and which container (and so which user) uses them.

NVML is reached through the ``pynvml`` API of the ``nvidia-ml-py`` package. Every reader takes
the NVML object as its first argument: the real ``pynvml`` module (``load_nvml()``) on a node,
or any object with the same API (the tests pass a fake). Only ``load_nvml`` imports ``pynvml``,
so this module loads, and says clearly what is missing, on a machine without the NVIDIA driver.

Readers:

* ``read_gpus``: one record per GPU (identity, temperature, utilisation, memory, power, fan,
  PCI bus). Optional fields a GPU does not support are ``None`` (datacenter GPUs have no fan
  NVML can read); one GPU that cannot be read gets an ``error`` and never hides the others.
* ``read_temperatures``: ``{uuid: °C}`` for every GPU, or ``GpuReadError``. This is what the
  fan controller (``ccc_fans``) drives from, so it is strict: no GPU, a GPU that cannot be read,
  or NVML failing is an error, never a partial answer.
* ``read_processes``: GPU processes (compute and graphics, de-duplicated) with their memory.
* ``container_of_pid`` / ``attribute``: host PID -> Docker container (from ``/proc/<pid>/cgroup``,
  cgroup v1 and v2) -> stack and user (from the ``ccc.stack`` and ``ccc-user.*`` labels the
  containers role puts on every container).

Salt wrappers: ``devices`` and ``processes`` (``salt-call ccc_gpu.devices``). The same functions
serve the GPU exporter (``agents/ccc_gpu_exporter.py``), which imports this file as a plain
module outside salt-minion.
"""

import logging
import math
import os
import re
import sys

__virtualname__ = "ccc_gpu"

log = logging.getLogger(__name__)

DEFAULT_DOCKER_URL = "unix:///var/run/docker.sock"

EMAIL_LABEL = "ccc-user.email"
NAME_LABEL = "ccc-user.name"
STACK_LABEL = "ccc.stack"

# NVML errors that mean NVML as a whole is unusable (not one GPU): every reader raises.
_FATAL_NVML_ERRORS = ("NVMLError_Uninitialized", "NVMLError_DriverNotLoaded", "NVMLError_LibraryNotFound",
                      "NVMLError_LibRmVersionMismatch", "NVMLError_FunctionNotFound")
# Optional values a GPU may not offer: read as None, not an error.
_ABSENT_NVML_ERRORS = ("NVMLError_NotSupported", "NVMLError_NoPermission", "NVMLError_NotFound")



class CommandExecutionError(Exception):
    """What the Salt wrappers raise outside Salt (inside Salt: Salt's own CommandExecutionError)."""


def _command_error(message):
    # Never import salt here: importing it installs Salt's deferred logging handler on the root
    # logger, which would swallow the exporter's logs. In salt-minion it is loaded already.
    salt_exceptions = sys.modules.get("salt.exceptions")
    return getattr(salt_exceptions, "CommandExecutionError", CommandExecutionError)(message)


def __virtual__():
    return __virtualname__


class GpuReadError(Exception):
    """GPU data could not be read through NVML (the message says which GPU and why)."""


class NvmlUnavailable(GpuReadError):
    """NVML cannot be used at all on this machine: package, library or driver missing."""


# ---------------------------------------------------------------------------------------------
# NVML


def load_nvml(nvml=None):
    """
    Return an initialised NVML API object: the ``pynvml`` module after ``nvmlInit()``.

    ``nvml`` replaces the ``pynvml`` module (tests). Raises ``NvmlUnavailable`` with a message an
    admin can act on when the package, ``libnvidia-ml.so.1`` or the driver is missing. The caller
    owns the initialisation (``nvml.nvmlShutdown()`` when done; NVML counts init/shutdown pairs).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_gpu.devices   # uses load_nvml()
    """
    if nvml is None:
        try:
            import pynvml as nvml  # pylint: disable=import-outside-toplevel
        except ImportError as exc:
            raise NvmlUnavailable(
                "the Python package nvidia-ml-py (module pynvml) is not installed: "
                "salt-pip install nvidia-ml-py (or pip install nvidia-ml-py for the agents)"
            ) from exc
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        name = type(exc).__name__
        if name == "NVMLError_LibraryNotFound":
            message = "NVML library not found: is the NVIDIA driver installed? (libnvidia-ml.so.1 is missing)"
        elif name == "NVMLError_DriverNotLoaded":
            message = "NVIDIA driver not loaded: NVML found no running kernel driver (nvidia module)"
        elif name == "NVMLError_NoPermission":
            message = "no permission to use NVML: run as root or give access to /dev/nvidia*"
        elif name == "NVMLError_LibRmVersionMismatch":
            message = "NVML library and NVIDIA kernel driver versions differ: reboot or reload the driver"
        else:
            message = f"NVML initialisation failed: {_nvml_message(exc)}"
        raise NvmlUnavailable(message) from exc
    return nvml


def shutdown_nvml(nvml):
    """Release an NVML initialisation from ``load_nvml`` (errors ignored)."""
    try:
        nvml.nvmlShutdown()
    except Exception:  # pylint: disable=broad-except
        log.debug("nvmlShutdown failed", exc_info=True)


def _nvml_message(exc):
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001  (str() of an NVML error may call into NVML)
        text = ""
    return text or type(exc).__name__


def _is(exc, names):
    return type(exc).__name__ in names


def _text(value):
    """NVML strings: pynvml 13.x returns str; older bindings returned bytes."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def _count(nvml):
    try:
        return int(nvml.nvmlDeviceGetCount())
    except nvml.NVMLError as exc:
        raise GpuReadError(f"NVML cannot count GPUs: {_nvml_message(exc)}") from exc


class _GpuLost(Exception):
    pass


def read_gpus(nvml):
    """
    Read every GPU: a list of dicts, in NVML index order, with keys

    ``index``, ``minor_number`` (``/dev/nvidia<N>``), ``uuid``, ``name``, ``temperature_c``,
    ``utilization_gpu_percent``, ``utilization_memory_percent``, ``memory_used_bytes``,
    ``memory_total_bytes``, ``power_watts``, ``power_limit_watts``, ``fan_percent``,
    ``pci_bus_id`` and ``error``.

    A field the GPU does not support (NVML "Not Supported", e.g. the fan of a passively cooled
    datacenter GPU) is ``None``; so is a field that failed, and then ``error`` says what failed
    (``None`` when all went well). A lost GPU keeps its record with ``error`` set. Raises
    ``GpuReadError`` only when NVML itself is unusable (cannot count GPUs, uninitialised,
    driver gone).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_gpu.devices
    """
    gpus = []
    for index in range(_count(nvml)):
        gpus.append(_read_gpu(nvml, index))
    return gpus


def _read_gpu(nvml, index):
    record = {
        "index": index, "minor_number": None, "uuid": None, "name": None, "temperature_c": None,
        "utilization_gpu_percent": None, "utilization_memory_percent": None, "memory_used_bytes": None,
        "memory_total_bytes": None, "power_watts": None, "power_limit_watts": None, "fan_percent": None,
        "pci_bus_id": None, "error": None,
    }
    errors = []

    def field(what, call, *args):
        try:
            return call(*args)
        except nvml.NVMLError as exc:
            if _is(exc, _FATAL_NVML_ERRORS):
                raise GpuReadError(f"GPU {index}: {what}: {_nvml_message(exc)}") from exc
            if _is(exc, _ABSENT_NVML_ERRORS):
                return None
            errors.append(f"{what}: {_nvml_message(exc)}")
            if _is(exc, ("NVMLError_GpuIsLost",)):
                raise _GpuLost() from exc
            return None

    try:
        handle = field("handle", nvml.nvmlDeviceGetHandleByIndex, index)
        if handle is None:
            errors.append("handle: not available")
            raise _GpuLost()
        record["uuid"] = _text(field("uuid", nvml.nvmlDeviceGetUUID, handle))
        record["name"] = _text(field("name", nvml.nvmlDeviceGetName, handle))
        record["minor_number"] = field("minor number", nvml.nvmlDeviceGetMinorNumber, handle)
        record["temperature_c"] = field("temperature", nvml.nvmlDeviceGetTemperature, handle,
                                        nvml.NVML_TEMPERATURE_GPU)
        rates = field("utilization", nvml.nvmlDeviceGetUtilizationRates, handle)
        if rates is not None:
            record["utilization_gpu_percent"] = rates.gpu
            record["utilization_memory_percent"] = rates.memory
        memory = field("memory", nvml.nvmlDeviceGetMemoryInfo, handle)
        if memory is not None:
            record["memory_used_bytes"] = memory.used
            record["memory_total_bytes"] = memory.total
        milliwatts = field("power usage", nvml.nvmlDeviceGetPowerUsage, handle)
        if milliwatts is not None:
            record["power_watts"] = milliwatts / 1000.0
        limit = field("power limit", nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
        if limit is not None:
            record["power_limit_watts"] = limit / 1000.0
        record["fan_percent"] = field("fan speed", nvml.nvmlDeviceGetFanSpeed, handle)
        pci = field("PCI info", nvml.nvmlDeviceGetPciInfo, handle)
        if pci is not None:
            record["pci_bus_id"] = _text(pci.busId)
    except _GpuLost:
        pass
    if errors:
        record["error"] = "; ".join(errors)
    return record


def read_temperatures(nvml):
    """
    Temperature in °C of every GPU: ``{uuid: int}``. The fan controller's input.

    Strict, because fans are driven from it: raises ``GpuReadError`` when NVML fails, when there
    is no GPU, or when any GPU's UUID or temperature cannot be read (including "Not Supported").
    Never returns a partial answer.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_gpu.devices   # temperature_c of each GPU
    """
    count = _count(nvml)
    if count <= 0:
        raise GpuReadError("NVML reports no GPU")
    temperatures = {}
    for index in range(count):
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            uuid = _text(nvml.nvmlDeviceGetUUID(handle))
            celsius = nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)
        except nvml.NVMLError as exc:
            raise GpuReadError(f"GPU {index}: temperature unreadable: {_nvml_message(exc)}") from exc
        if isinstance(celsius, bool) or not isinstance(celsius, (int, float)) or math.isnan(celsius):
            raise GpuReadError(f"GPU {index}: temperature unreadable: NVML returned {celsius!r}")
        celsius = round(celsius)
        if not uuid or uuid in temperatures:
            raise GpuReadError(f"GPU {index}: bad or duplicate UUID {uuid!r}")
        temperatures[uuid] = celsius
    return temperatures


def read_processes(nvml, errors=None):
    """
    Processes using a GPU: a list of dicts ``gpu_uuid``, ``gpu_index``, ``pid``,
    ``used_memory_bytes`` (``None`` when NVML cannot tell), sorted by GPU index and PID.

    Compute and graphics processes are merged; a PID listed in both on one GPU appears once.
    A GPU that does not list graphics processes ("Not Supported") is fine. When ``errors`` is a
    list, a GPU that cannot be read is skipped and a message appended there; otherwise that raises
    ``GpuReadError``. Processes on MIG instances are listed by NVML under the MIG device handles,
    which this does not walk.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_gpu.processes
    """
    found = []
    for index in range(_count(nvml)):
        try:
            found.extend(_read_gpu_processes(nvml, index))
        except nvml.NVMLError as exc:
            message = f"GPU {index}: processes unreadable: {_nvml_message(exc)}"
            if errors is None or _is(exc, _FATAL_NVML_ERRORS):
                raise GpuReadError(message) from exc
            errors.append(message)
    return found


def _read_gpu_processes(nvml, index):
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    uuid = _text(nvml.nvmlDeviceGetUUID(handle))
    by_pid = {}
    for lister in (nvml.nvmlDeviceGetComputeRunningProcesses, nvml.nvmlDeviceGetGraphicsRunningProcesses):
        try:
            listed = lister(handle) or []
        except nvml.NVMLError as exc:
            if _is(exc, ("NVMLError_NotSupported",)):
                continue
            raise
        for proc in listed:
            pid = int(proc.pid)
            used = getattr(proc, "usedGpuMemory", None)
            if pid in by_pid:
                previous = by_pid[pid]["used_memory_bytes"]
                if used is None or (previous is not None and previous >= used):
                    continue
            by_pid[pid] = {"gpu_uuid": uuid, "gpu_index": index, "pid": pid, "used_memory_bytes": used}
    return [by_pid[pid] for pid in sorted(by_pid)]


# ---------------------------------------------------------------------------------------------
# PID -> container -> user

# A cgroup path component naming a container: cgroupfs driver ``/docker/<id>``, systemd driver
# ``docker-<id>.scope`` (cgroup v1 and v2), containerd/CRI ``cri-containerd-<id>.scope``, CRI-O
# ``crio-<id>.scope``, podman ``libpod-<id>.scope``, kubepods cgroupfs ``.../pod<uid>/<id>``.
_CONTAINER_COMPONENT = re.compile(r"^(?:docker-|cri-containerd-|crio-|libpod-)?([0-9a-f]{64})(?:\.scope)?$")


def container_ids_of_pid(pid, proc_root="/proc"):
    """
    Every container id in ``<proc_root>/<pid>/cgroup``, outermost first (a process in a nested
    container lists the host container before the inner one). ``[]`` when the process is in no
    container, has vanished, or cannot be read.
    """
    try:
        pid = int(pid)
    except (TypeError, ValueError):
        return []
    if pid <= 0:
        return []
    try:
        with open(os.path.join(proc_root, str(pid), "cgroup"), encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:  # vanished (ENOENT, ESRCH), hidepid (EACCES), ...
        return []
    ids = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for component in parts[2].split("/"):
            match = _CONTAINER_COMPONENT.match(component)
            if match and match.group(1) not in ids:
                ids.append(match.group(1))
    return ids


def container_of_pid(pid, proc_root="/proc"):
    """
    The full id of the Docker container that runs host process ``pid``, or ``None``.

    Reads ``<proc_root>/<pid>/cgroup``; understands cgroup v1 lines
    (``4:memory:/docker/<id>``), cgroup v2 (``0::/system.slice/docker-<id>.scope``,
    ``0::/docker/<id>``) and containerd/CRI-O/podman scopes. A vanished PID gives ``None``.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_gpu.container_of_pid 12345
    """
    ids = container_ids_of_pid(pid, proc_root)
    return ids[0] if ids else None


def docker_client(url=DEFAULT_DOCKER_URL, timeout=10):
    """A Docker SDK client for ``url`` (the caller closes it)."""
    import docker  # pylint: disable=import-outside-toplevel

    return docker.DockerClient(base_url=url, timeout=timeout)


def docker_containers(client):
    """
    Running containers of a Docker daemon, from one API call: ``{full id: {"name", "labels"}}``.
    """
    containers = {}
    for entry in client.api.containers() or []:
        names = entry.get("Names") or []
        name = names[0].lstrip("/") if names else entry["Id"][:12]
        containers[entry["Id"]] = {"name": name, "labels": dict(entry.get("Labels") or {})}
    return containers


def attribute(processes, containers_by_id, proc_root="/proc"):
    """
    Add to each GPU process its container and user: new dicts with the process keys plus
    ``container_id``, ``container`` (name), ``stack``, ``user_email`` and ``user_name``.

    ``containers_by_id`` maps full container id -> ``{"name": ..., "labels": {...}}``
    (``docker_containers``). Stack and user come from the ``ccc.stack``, ``ccc-user.email`` and
    ``ccc-user.name`` labels. A process in no container has all of them ``None``; one in a
    container the map does not know (another daemon, gone meanwhile) has only ``container_id``.
    """
    attributed = []
    for process in processes:
        ids = container_ids_of_pid(process.get("pid"), proc_root)
        known = [cid for cid in ids if cid in containers_by_id]
        container_id = known[0] if known else (ids[0] if ids else None)
        info = containers_by_id.get(container_id) or {}
        labels = info.get("labels") or {}
        attributed.append(dict(
            process,
            container_id=container_id,
            container=info.get("name"),
            stack=labels.get(STACK_LABEL),
            user_email=labels.get(EMAIL_LABEL),
            user_name=labels.get(NAME_LABEL),
        ))
    return attributed


# ---------------------------------------------------------------------------------------------
# Salt-facing wrappers


def _docker_url(pillar):
    # Salt 3008 wraps pillar containers for display masking; dict.get reads the plain values.
    ccc = dict.get(pillar or {}, "ccc") or {}
    node = dict.get(ccc, "node") or {}
    return dict.get(node, "docker_url") or DEFAULT_DOCKER_URL


def _read_with_nvml(reader):
    """Run ``reader(nvml)`` on a fresh NVML session; NVML problems become Salt errors."""
    try:
        nvml = load_nvml()
    except NvmlUnavailable as exc:
        raise _command_error(str(exc)) from exc
    try:
        return reader(nvml)
    except GpuReadError as exc:
        raise _command_error(str(exc)) from exc
    finally:
        shutdown_nvml(nvml)


def devices():
    """
    List this node's GPUs as NVML sees them: index, minor number, UUID, name, temperature,
    utilisation, memory, power, fan, PCI bus id (``None`` for what a GPU does not support).

    Fails with a clear message when NVML cannot be used (no driver, no ``nvidia-ml-py``).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_gpu.devices
    """
    return _read_with_nvml(read_gpus)


def processes():
    """
    List the processes using this node's GPUs with their GPU memory, and for each the Docker
    container, stack and user (from the container's ``ccc.stack`` / ``ccc-user.*`` labels).

    The Docker endpoint is pillar ``ccc:node:docker_url`` (default
    ``unix:///var/run/docker.sock``). When Docker cannot be asked, the processes are listed
    without attribution and a warning is logged.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_gpu.processes
    """
    found = _read_with_nvml(read_processes)
    containers = {}
    if found:
        url = _docker_url(globals().get("__pillar__"))
        try:
            client = docker_client(url)
            try:
                containers = docker_containers(client)
            finally:
                client.close()
        except Exception as exc:  # noqa: BLE001  (any Docker failure: list without attribution)
            log.warning("ccc_gpu.processes: cannot list containers at %s: %s", url, exc)
    return attribute(found, containers)
