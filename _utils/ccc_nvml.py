"""
GPUs of a node through NVML: the reading library of the GPU exporter, the fan controller and
``salt-call ccc_gpu.devices``.

NVML is reached through the ``pynvml`` API of the ``nvidia-ml-py`` package. Every reader takes
the NVML object as its first argument: the real ``pynvml`` module (``load_nvml()``) on a node,
or any object with the same API (the tests pass a fake). Only ``load_nvml`` imports ``pynvml``,
so this module loads, and says clearly what is missing, on a machine without the NVIDIA driver.

* ``read_gpus``: one record per GPU (identity, temperature, utilisation, memory, power, fan,
  PCI bus). Optional fields a GPU does not support are ``None`` (datacenter GPUs have no fan
  NVML can read); one GPU that cannot be read gets an ``error`` and never hides the others.
* ``read_temperatures``: ``{uuid: °C}`` for every GPU, or ``GpuReadError``. This is what the
  fan controller drives from, so it is strict: no GPU, a GPU that cannot be read, or NVML
  failing is an error, never a partial answer.
* ``read_processes``: GPU processes (compute and graphics, de-duplicated) with their memory.
"""

import logging
import math

import ccc_rules

log = logging.getLogger(__name__)

# NVML errors that mean NVML as a whole is unusable (not one GPU): every reader raises.
_FATAL_NVML_ERRORS = ("NVMLError_Uninitialized", "NVMLError_DriverNotLoaded", "NVMLError_LibraryNotFound",
                      "NVMLError_LibRmVersionMismatch", "NVMLError_FunctionNotFound")
# Optional values a GPU may not offer: read as None, not an error.
_ABSENT_NVML_ERRORS = ("NVMLError_NotSupported", "NVMLError_NoPermission", "NVMLError_NotFound")
# What an admin can do when nvmlInit fails with one of these.
_INIT_PROBLEMS = {
    "NVMLError_LibraryNotFound": "NVML library not found: is the NVIDIA driver installed? (libnvidia-ml.so.1 is missing)",
    "NVMLError_DriverNotLoaded": "NVIDIA driver not loaded: NVML found no running kernel driver (nvidia module)",
    "NVMLError_NoPermission": "no permission to use NVML: run as root or give access to /dev/nvidia*",
    "NVMLError_LibRmVersionMismatch": "NVML library and NVIDIA kernel driver versions differ: reboot or reload the driver",
}


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
        message = _INIT_PROBLEMS.get(type(exc).__name__) or f"NVML initialisation failed: {_nvml_message(exc)}"
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
        if not ccc_rules.is_number(celsius) or math.isnan(celsius):
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
