"""A FAKE of the ``pynvml`` module (nvidia-ml-py): the narrowest hardware boundary of the GPU agents.

This is a test double, not a simulation of a GPU. ``ccc_gpu`` (and the fan controller) take the
NVML API as an object; the tests pass a ``FakeNvml`` instead of the real ``pynvml`` module, so
everything above NVML (field handling, error policy, attribution, exposition, fan decisions) is
the real code. It answers the pynvml calls the agents use, with the return types of
nvidia-ml-py 13.x (``str`` for UUID, name and PCI bus id; objects with ``.gpu``/``.memory``,
``.used``/``.total``/``.free``, ``.busId``, ``.pid``/``.usedGpuMemory``; power in milliwatts),
and it raises pynvml's *real* exception classes (``pynvml.NVMLError_NotSupported``,
``pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)`` ...). Constants and exception classes not
defined here (``NVML_TEMPERATURE_GPU``, ``NVMLError``, ``NVMLError_*``) are pynvml's own.

Usage::

    nvml = FakeNvml(gpus=[{"uuid": "GPU-aaaa-1", "temperature": 40}, {"temperature": 55}])
    nvml.nvmlInit()
    nvml.set_temperature(0, 70)           # by index or UUID
    nvml.fail_with = pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)   # every call raises
    nvml.lose_gpu("GPU-aaaa-1")           # calls on that GPU raise NVMLError_GpuIsLost
    nvml.remove_gpu(1)                    # the GPU is gone: the count drops
    nvml.gpus[0]["fail"]["nvmlDeviceGetFanSpeed"] = pynvml.NVMLError_Timeout()

A GPU is a dict; every key is optional (defaults in ``GPU_DEFAULTS``):

* ``uuid``, ``name``, ``minor_number``, ``pci_bus_id``
* ``temperature`` (°C), ``utilization_gpu``, ``utilization_memory`` (%)
* ``memory_used``, ``memory_total`` (bytes)
* ``power_mw``, ``power_limit_mw`` (milliwatts), ``fan`` (%): ``None`` means the GPU does not
  support it, so the call raises ``NVMLError_NotSupported`` (as NVML does for the fan of a
  passively cooled datacenter GPU)
* ``processes`` (compute) and ``graphics_processes``: lists of ``{"pid", "used_memory"}``;
  ``graphics_processes=None`` raises ``NVMLError_NotSupported``
* ``fail``: ``{pynvml function name: exception}`` raised by that call on this GPU only
* ``lost``: ``True`` makes every call on this GPU raise ``NVMLError_GpuIsLost``

``init_error`` makes ``nvmlInit`` raise (e.g. ``pynvml.NVMLError_LibraryNotFound()``);
``fail_with`` makes *every* call raise. ``calls`` records the names of the calls made.
Device calls before ``nvmlInit`` raise ``NVMLError_Uninitialized``, as NVML does.
"""

import copy
import threading
import types

import pynvml

GPU_DEFAULTS = {
    "name": "NVIDIA GeForce RTX 2080 Ti",
    "temperature": 40,
    "utilization_gpu": 0,
    "utilization_memory": 0,
    "memory_used": 0,
    "memory_total": 11 * 1024 ** 3,
    "power_mw": 25000,
    "power_limit_mw": 250000,
    "fan": 30,
    "processes": [],
    "graphics_processes": [],
}


def fake_uuid(index):
    """A well-formed GPU UUID for the fake GPU number ``index``."""
    return f"GPU-{0xFAC0 + index:08x}-0000-4000-8000-{index:012x}"


class FakeHandle:
    """An opaque device handle, bound to one fake GPU (by UUID), as ``c_nvmlDevice_t`` is."""

    def __init__(self, uuid):
        self.uuid = uuid

    def __repr__(self):
        return f"FakeHandle({self.uuid!r})"


class FakeNvml:
    """Fake ``pynvml`` module: see the module docstring. Thread-safe enough for an exporter thread."""

    def __init__(self, gpus=None, count=None):
        if gpus is None:
            gpus = [{} for _ in range(count or 0)]
        self.gpus = []
        for index, spec in enumerate(gpus):
            gpu = copy.deepcopy(GPU_DEFAULTS)
            gpu.update(copy.deepcopy(spec))
            gpu.setdefault("uuid", fake_uuid(index))
            gpu.setdefault("minor_number", index)
            gpu.setdefault("pci_bus_id", "00000000:%02X:00.0" % (0x1A + index))
            gpu.setdefault("fail", {})
            gpu.setdefault("lost", False)
            self.gpus.append(gpu)
        self.init_error = None
        self.fail_with = None
        self.initialized = 0
        self.calls = []
        self.removed = []
        self._lock = threading.Lock()

    # -- configuration helpers ------------------------------------------------------------

    def gpu(self, key):
        """The GPU dict for an index or a UUID."""
        if isinstance(key, int):
            return self.gpus[key]
        for gpu in self.gpus:
            if gpu["uuid"] == key:
                return gpu
        raise KeyError(key)

    def set_temperature(self, key, celsius):
        self.gpu(key)["temperature"] = celsius

    def set_temperatures(self, celsius_by_key):
        for key, celsius in celsius_by_key.items():
            self.set_temperature(key, celsius)

    def remove_gpu(self, key):
        """The GPU leaves the bus: NVML counts one GPU less; its old handles report it lost."""
        gpu = self.gpu(key)
        self.gpus.remove(gpu)
        self.removed.append(gpu)
        return gpu

    def lose_gpu(self, key):
        """The GPU stays counted but every call on it raises ``NVMLError_GpuIsLost``."""
        self.gpu(key)["lost"] = True

    def add_process(self, key, pid, used_memory, graphics=False):
        self.gpu(key)["graphics_processes" if graphics else "processes"].append(
            {"pid": pid, "used_memory": used_memory})

    # -- pynvml constants and exceptions --------------------------------------------------

    def __getattr__(self, name):
        if name.startswith(("NVML", "nvmlExceptionClass")):
            return getattr(pynvml, name)
        raise AttributeError(f"FakeNvml does not fake pynvml.{name}")

    # -- plumbing -------------------------------------------------------------------------

    def _enter(self, name):
        with self._lock:
            self.calls.append(name)
        if self.fail_with is not None:
            raise self.fail_with

    def _device(self, name, handle):
        self._enter(name)
        if not self.initialized:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        if not isinstance(handle, FakeHandle):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        for gpu in self.gpus:
            if gpu["uuid"] == handle.uuid:
                break
        else:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        if gpu["lost"]:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        if name in gpu["fail"]:
            raise gpu["fail"][name]
        return gpu

    @staticmethod
    def _optional(value):
        if value is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return value

    # -- the pynvml API -------------------------------------------------------------------

    def nvmlInit(self):
        self._enter("nvmlInit")
        if self.init_error is not None:
            raise self.init_error
        self.initialized += 1

    def nvmlShutdown(self):
        self._enter("nvmlShutdown")
        if not self.initialized:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        self.initialized -= 1

    def nvmlDeviceGetCount(self):
        self._enter("nvmlDeviceGetCount")
        if not self.initialized:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        self._enter("nvmlDeviceGetHandleByIndex")
        if not self.initialized:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        if not 0 <= index < len(self.gpus):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu = self.gpus[index]
        if gpu["lost"]:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        if "nvmlDeviceGetHandleByIndex" in gpu["fail"]:
            raise gpu["fail"]["nvmlDeviceGetHandleByIndex"]
        return FakeHandle(gpu["uuid"])

    def nvmlDeviceGetUUID(self, handle):
        return self._device("nvmlDeviceGetUUID", handle)["uuid"]

    def nvmlDeviceGetName(self, handle):
        return self._device("nvmlDeviceGetName", handle)["name"]

    def nvmlDeviceGetMinorNumber(self, handle):
        return self._optional(self._device("nvmlDeviceGetMinorNumber", handle)["minor_number"])

    def nvmlDeviceGetIndex(self, handle):
        gpu = self._device("nvmlDeviceGetIndex", handle)
        return self.gpus.index(gpu)

    def nvmlDeviceGetTemperature(self, handle, sensor):
        gpu = self._device("nvmlDeviceGetTemperature", handle)
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self._optional(gpu["temperature"])

    def nvmlDeviceGetUtilizationRates(self, handle):
        gpu = self._device("nvmlDeviceGetUtilizationRates", handle)
        return types.SimpleNamespace(gpu=self._optional(gpu["utilization_gpu"]),
                                     memory=self._optional(gpu["utilization_memory"]))

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        gpu = self._device("nvmlDeviceGetMemoryInfo", handle)
        return types.SimpleNamespace(total=gpu["memory_total"], used=gpu["memory_used"],
                                     free=gpu["memory_total"] - gpu["memory_used"])

    def nvmlDeviceGetPowerUsage(self, handle):
        return self._optional(self._device("nvmlDeviceGetPowerUsage", handle)["power_mw"])

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return self._optional(self._device("nvmlDeviceGetEnforcedPowerLimit", handle)["power_limit_mw"])

    def nvmlDeviceGetFanSpeed(self, handle):
        return self._optional(self._device("nvmlDeviceGetFanSpeed", handle)["fan"])

    def nvmlDeviceGetPciInfo(self, handle):
        gpu = self._device("nvmlDeviceGetPciInfo", handle)
        return types.SimpleNamespace(busId=gpu["pci_bus_id"], busIdLegacy=gpu["pci_bus_id"])

    @staticmethod
    def _process_infos(listed):
        return [types.SimpleNamespace(pid=entry["pid"], usedGpuMemory=entry.get("used_memory"),
                                      gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)
                for entry in listed]

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        gpu = self._device("nvmlDeviceGetComputeRunningProcesses", handle)
        return self._process_infos(self._optional(gpu["processes"]))

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle):
        gpu = self._device("nvmlDeviceGetGraphicsRunningProcesses", handle)
        return self._process_infos(self._optional(gpu["graphics_processes"]))
