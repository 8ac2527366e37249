"""GPU reading (``_utils/ccc_nvml.py``), PID -> container -> user (``_utils/ccc_process_owners.py``)
and the ``ccc_gpu`` execution module: against a fake NVML, on real and crafted cgroup files.

NVML is replaced by ``fake_nvml.FakeNvml``, a FAKE of the pynvml module at the narrowest hardware
boundary (see its docstring): everything above the pynvml calls is the real code. The container
mapping is tested on the cgroup file of a real container of this test's private dockerd
(simulated node ``agents``) and, for the cgroup layouts this host does not use (v2, systemd and
CRI scopes), on crafted ``<proc>/<pid>/cgroup`` files.
"""

import os
import pathlib
import shutil
import subprocess
import sys
import uuid as uuidlib

import ccc_exporter_config
import ccc_gpu
import ccc_nvml
import ccc_process_owners
import pynvml
import pytest
from fake_nvml import FakeNvml, fake_uuid

REPO = pathlib.Path(__file__).resolve().parents[2]
HEX_A = "a" * 63 + "1"
HEX_B = "0123456789abcdef" * 4
HEX_C = "fedcba9876543210" * 4


def started(nvml):
    ccc_nvml.load_nvml(nvml)
    return nvml


# ---------------------------------------------------------------------------------------------
# read_gpus


def test_read_gpus_reads_every_field_with_pynvml_types():
    nvml = started(FakeNvml(gpus=[
        {"temperature": 51, "utilization_gpu": 87, "utilization_memory": 40, "memory_used": 3 << 30,
         "memory_total": 24 << 30, "power_mw": 215500, "power_limit_mw": 300000, "fan": 55,
         "name": "NVIDIA RTX A5000", "minor_number": 3, "pci_bus_id": "00000000:3D:00.0"},
        {},
    ]))
    gpus = ccc_nvml.read_gpus(nvml)
    assert [gpu["index"] for gpu in gpus] == [0, 1]
    assert gpus[0] == {
        "index": 0, "minor_number": 3, "uuid": fake_uuid(0), "name": "NVIDIA RTX A5000", "temperature_c": 51,
        "utilization_gpu_percent": 87, "utilization_memory_percent": 40, "memory_used_bytes": 3 << 30,
        "memory_total_bytes": 24 << 30, "power_watts": 215.5, "power_limit_watts": 300.0, "fan_percent": 55,
        "pci_bus_id": "00000000:3D:00.0", "error": None,
    }
    assert gpus[1]["uuid"] == fake_uuid(1) and gpus[1]["error"] is None


def test_unsupported_fan_and_power_are_none_not_errors():
    nvml = started(FakeNvml(gpus=[{"fan": None, "power_mw": None, "power_limit_mw": None}, {}]))
    gpus = ccc_nvml.read_gpus(nvml)
    assert gpus[0]["fan_percent"] is None and gpus[0]["power_watts"] is None
    assert gpus[0]["power_limit_watts"] is None
    assert gpus[0]["error"] is None and gpus[0]["temperature_c"] == 40
    assert gpus[1]["fan_percent"] == 30


def test_a_failing_optional_field_is_reported_and_the_rest_is_read():
    nvml = started(FakeNvml(count=2))
    nvml.gpus[1]["fail"]["nvmlDeviceGetFanSpeed"] = pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
    gpus = ccc_nvml.read_gpus(nvml)
    assert gpus[1]["fan_percent"] is None
    assert gpus[1]["error"] == "fan speed: Timeout"
    assert gpus[1]["temperature_c"] == 40 and gpus[1]["pci_bus_id"]
    assert gpus[0]["error"] is None


def test_a_lost_gpu_keeps_its_record_with_an_error_and_hides_no_other():
    nvml = started(FakeNvml(count=3))
    nvml.lose_gpu(1)
    gpus = ccc_nvml.read_gpus(nvml)
    assert len(gpus) == 3
    assert gpus[1]["error"] == "handle: GPU is lost" and gpus[1]["temperature_c"] is None
    assert [gpus[0]["error"], gpus[2]["error"]] == [None, None]
    # Lost after the handle was taken: stops at the first failing call, says which.
    nvml = started(FakeNvml(count=1))
    nvml.gpus[0]["fail"]["nvmlDeviceGetTemperature"] = pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
    gpu = ccc_nvml.read_gpus(nvml)[0]
    assert gpu["error"] == "temperature: GPU is lost"
    assert gpu["uuid"] == fake_uuid(0) and gpu["memory_total_bytes"] is None


@pytest.mark.parametrize("error", [
    pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED),
    pynvml.NVMLError_DriverNotLoaded(),
    pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN),
])
def test_nvml_failing_as_a_whole_raises(error):
    nvml = started(FakeNvml(count=2))
    nvml.fail_with = error
    with pytest.raises(ccc_nvml.GpuReadError, match="NVML cannot count GPUs"):
        ccc_nvml.read_gpus(nvml)


def test_a_driver_gone_midway_raises_instead_of_a_partial_list():
    nvml = started(FakeNvml(count=2))
    nvml.gpus[1]["fail"]["nvmlDeviceGetMemoryInfo"] = pynvml.NVMLError_DriverNotLoaded()
    with pytest.raises(ccc_nvml.GpuReadError, match="GPU 1: memory: Driver Not Loaded"):
        ccc_nvml.read_gpus(nvml)


def test_uninitialised_nvml_is_an_error():
    with pytest.raises(ccc_nvml.GpuReadError, match="Uninitialized"):
        ccc_nvml.read_gpus(FakeNvml(count=1))


# ---------------------------------------------------------------------------------------------
# read_temperatures (the fan controller's input)


def test_read_temperatures_maps_uuid_to_celsius():
    nvml = started(FakeNvml(gpus=[{"temperature": 35}, {"temperature": 81}]))
    assert ccc_nvml.read_temperatures(nvml) == {fake_uuid(0): 35, fake_uuid(1): 81}
    nvml.set_temperature(fake_uuid(0), 66)
    assert ccc_nvml.read_temperatures(nvml)[fake_uuid(0)] == 66


def test_read_temperatures_without_gpus_raises():
    with pytest.raises(ccc_nvml.GpuReadError, match="no GPU"):
        ccc_nvml.read_temperatures(started(FakeNvml(count=0)))


@pytest.mark.parametrize("break_it", ["lost", "unsupported", "timeout", "fail_with", "removed_handle"])
def test_read_temperatures_never_answers_partially(break_it):
    nvml = started(FakeNvml(count=4))
    if break_it == "lost":
        nvml.lose_gpu(2)
    elif break_it == "unsupported":
        nvml.set_temperature(2, None)
    elif break_it == "timeout":
        nvml.gpus[2]["fail"]["nvmlDeviceGetUUID"] = pynvml.NVMLError_Timeout()
    elif break_it == "fail_with":
        nvml.fail_with = pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
    elif break_it == "removed_handle":
        nvml.gpus[2]["fail"]["nvmlDeviceGetHandleByIndex"] = pynvml.NVMLError_InvalidArgument()
    with pytest.raises(ccc_nvml.GpuReadError):
        ccc_nvml.read_temperatures(nvml)


def test_a_removed_gpu_drops_out_of_the_temperatures():
    nvml = started(FakeNvml(count=3))
    nvml.remove_gpu(fake_uuid(1))
    assert sorted(ccc_nvml.read_temperatures(nvml)) == [fake_uuid(0), fake_uuid(2)]


# ---------------------------------------------------------------------------------------------
# read_processes


def test_read_processes_merges_compute_and_graphics():
    nvml = started(FakeNvml(count=2))
    nvml.add_process(0, 4321, 2 << 30)
    nvml.add_process(0, 1234, 1 << 30)
    nvml.add_process(0, 1234, 1 << 30, graphics=True)   # the same context listed twice
    nvml.add_process(1, 999, None)                       # memory unknown to NVML
    nvml.add_process(1, 77, 5 << 20, graphics=True)
    assert ccc_nvml.read_processes(nvml) == [
        {"gpu_uuid": fake_uuid(0), "gpu_index": 0, "pid": 1234, "used_memory_bytes": 1 << 30},
        {"gpu_uuid": fake_uuid(0), "gpu_index": 0, "pid": 4321, "used_memory_bytes": 2 << 30},
        {"gpu_uuid": fake_uuid(1), "gpu_index": 1, "pid": 77, "used_memory_bytes": 5 << 20},
        {"gpu_uuid": fake_uuid(1), "gpu_index": 1, "pid": 999, "used_memory_bytes": None},
    ]


def test_graphics_processes_not_supported_is_fine():
    nvml = started(FakeNvml(gpus=[{"graphics_processes": None, "processes": [{"pid": 5, "used_memory": 10}]}]))
    assert [p["pid"] for p in ccc_nvml.read_processes(nvml)] == [5]


def test_read_processes_of_a_lost_gpu_raise_or_are_collected_as_errors():
    nvml = started(FakeNvml(count=2))
    nvml.add_process(0, 10, 1)
    nvml.add_process(1, 11, 1)
    nvml.lose_gpu(0)
    with pytest.raises(ccc_nvml.GpuReadError, match="GPU 0: processes unreadable: GPU is lost"):
        ccc_nvml.read_processes(nvml)
    errors = []
    assert [p["pid"] for p in ccc_nvml.read_processes(nvml, errors)] == [11]
    assert errors == ["GPU 0: processes unreadable: GPU is lost"]


# ---------------------------------------------------------------------------------------------
# load_nvml


@pytest.mark.parametrize("error, message", [
    (pynvml.NVMLError_LibraryNotFound(), "NVML library not found: is the NVIDIA driver installed?"),
    (pynvml.NVMLError_DriverNotLoaded(), "NVIDIA driver not loaded"),
    (pynvml.NVMLError_NoPermission(), "no permission to use NVML"),
    (pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN), "NVML initialisation failed: Unknown Error"),
])
def test_load_nvml_init_failures_are_clear(error, message):
    nvml = FakeNvml(count=1)
    nvml.init_error = error
    with pytest.raises(ccc_nvml.NvmlUnavailable, match=message):
        ccc_nvml.load_nvml(nvml)
    assert issubclass(ccc_nvml.NvmlUnavailable, ccc_nvml.GpuReadError)


def test_load_nvml_without_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(ccc_nvml.NvmlUnavailable, match="nvidia-ml-py"):
        ccc_nvml.load_nvml()


def _host_has_nvml():
    return subprocess.run(["sh", "-c", "ldconfig -p | grep -q libnvidia-ml.so.1"], check=False).returncode == 0


@pytest.mark.skipif(_host_has_nvml(), reason="this host has libnvidia-ml")
def test_load_nvml_on_this_gpu_less_host_says_the_driver_is_missing():
    with pytest.raises(ccc_nvml.NvmlUnavailable, match=r"NVML library not found: is the NVIDIA driver installed\?"):
        ccc_nvml.load_nvml()


@pytest.mark.skipif(_host_has_nvml(), reason="this host has libnvidia-ml")
def test_salt_call_devices_reports_missing_nvml(tmp_path):
    from support.site import SALT_CALL, SaltNode

    salt = SaltNode(tmp_path, "node3", "unix:///nonexistent.sock", tmp_path / "storage")
    proc = subprocess.run(SALT_CALL + ["--local", "-c", str(salt.config_dir), "--retcode-passthrough",
                                       "ccc_gpu.devices"], check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "NVML library not found: is the NVIDIA driver installed?" in proc.stdout + proc.stderr
    doc, _ = salt.salt_call("sys.doc", "ccc_gpu")
    assert "salt-call ccc_gpu.devices" in doc["ccc_gpu.devices"]
    assert "salt-call ccc_gpu.processes" in doc["ccc_gpu.processes"]


_REAL_LOAD = ccc_nvml.load_nvml


def _load(nvml):
    return _REAL_LOAD(nvml)


def test_salt_wrappers_turn_missing_nvml_into_a_command_error(monkeypatch):
    broken = FakeNvml(count=1)
    broken.init_error = pynvml.NVMLError_LibraryNotFound()
    monkeypatch.setattr(ccc_nvml, "load_nvml", lambda: _load(broken))
    for wrapper in (ccc_gpu.devices, ccc_gpu.processes):
        # Salt's CommandExecutionError when Salt is loaded (in salt-minion), else the module's own.
        with pytest.raises(Exception, match="NVML library not found") as caught:
            wrapper()
        assert type(caught.value).__name__ == "CommandExecutionError"


def test_devices_wrapper_reads_and_releases_nvml(monkeypatch):
    nvml = FakeNvml(count=2)
    monkeypatch.setattr(ccc_nvml, "load_nvml", lambda: _load(nvml))
    assert [gpu["uuid"] for gpu in ccc_gpu.devices()] == [fake_uuid(0), fake_uuid(1)]
    assert nvml.initialized == 0, "devices() must shut NVML down again"


def test_processes_wrapper_uses_the_pillar_docker_url(monkeypatch, tmp_path):
    nvml = FakeNvml(count=1)
    nvml.add_process(0, 4242, 1 << 20)
    write_cgroup(tmp_path, 4242, f"0::/system.slice/docker-{HEX_B}.scope\n")
    monkeypatch.setattr(ccc_nvml, "load_nvml", lambda: _load(nvml))
    asked = []

    def fake_client(url):
        asked.append(url)
        return FakeDockerClient([{"Id": HEX_B, "Names": ["/ana-main"], "Labels": {"ccc.stack": "ana-main"}}])

    monkeypatch.setattr(ccc_process_owners, "docker_client", fake_client)
    monkeypatch.setattr(ccc_gpu, "__pillar__", {"ccc": {"node": {"docker_url": "unix:///srv/d.sock"}}}, raising=False)
    real_attribute = ccc_process_owners.attribute
    monkeypatch.setattr(ccc_process_owners, "attribute", lambda p, c: real_attribute(p, c, proc_root=str(tmp_path)))
    result = ccc_gpu.processes()
    assert asked == ["unix:///srv/d.sock"]
    assert result[0]["container"] == "ana-main" and result[0]["stack"] == "ana-main"
    assert nvml.initialized == 0


# ---------------------------------------------------------------------------------------------
# PID -> container: crafted cgroup files


class FakeDockerClient:
    """A FAKE Docker SDK client: ``api.containers()`` answers a fixed list, counting calls."""

    def __init__(self, entries):
        self.entries = entries
        self.calls = 0
        self.api = self

    def containers(self):
        self.calls += 1
        return list(self.entries)

    def close(self):
        pass


def write_cgroup(proc_root, pid, text):
    path = pathlib.Path(proc_root) / str(pid)
    path.mkdir(parents=True, exist_ok=True)
    (path / "cgroup").write_text(text)


@pytest.mark.parametrize("text, expected", [
    # cgroup v2, systemd cgroup driver
    (f"0::/system.slice/docker-{HEX_B}.scope\n", HEX_B),
    # cgroup v2, cgroupfs driver
    (f"0::/docker/{HEX_B}\n", HEX_B),
    # cgroup v1 (as on this host), several controllers
    ("".join(f"{n}:{c}:/docker/{HEX_B}\n" for n, c in ((9, "name=systemd"), (4, "memory"), (1, "cpu,cpuacct")))
     + f"0::/docker/{HEX_B}\n", HEX_B),
    # cgroup v1 with the systemd driver, hybrid unified line empty
    (f"12:pids:/system.slice/docker-{HEX_B}.scope\n0::/\n", HEX_B),
    # dockerd itself in a service cgroup: docker.service/docker/<id>
    (f"0::/system.slice/docker.service/docker/{HEX_B}\n", HEX_B),
    # process in a nested container: the outermost (host) container first
    (f"0::/docker/{HEX_B}/docker/{HEX_C}\n", HEX_B),
    # containerd / CRI and kubepods
    (f"0::/kubepods.slice/kubepods-burstable.slice/cri-containerd-{HEX_B}.scope\n", HEX_B),
    (f"4:memory:/kubepods/burstable/pod1f2e3d4c-aaaa-bbbb-cccc-123456789abc/{HEX_B}\n", HEX_B),
    (f"0::/machine.slice/libpod-{HEX_B}.scope/container\n", HEX_B),
    # not in a container
    ("0::/user.slice/user-1000.slice/session-3.scope\n", None),
    ("0::/system.slice/docker.service\n", None),
    (f"0::/system.slice/crio-conmon-{HEX_B}.scope\n", None),
    # malformed
    ("", None),
    ("garbage\n", None),
    (f"0::/docker/{HEX_B[:-1]}\n", None),
    (f"0::/docker/{HEX_B}x\n", None),
])
def test_container_of_pid_on_crafted_cgroup_files(tmp_path, text, expected):
    write_cgroup(tmp_path, 4242, text)
    assert ccc_process_owners.container_of_pid(4242, proc_root=str(tmp_path)) == expected


def test_container_of_a_vanished_or_bogus_pid_is_none(tmp_path):
    assert ccc_process_owners.container_of_pid(4242, proc_root=str(tmp_path)) is None
    assert ccc_process_owners.container_of_pid("x", proc_root=str(tmp_path)) is None
    assert ccc_process_owners.container_of_pid(0) is None
    assert ccc_process_owners.container_of_pid(-1) is None


def test_attribute_adds_container_stack_and_user(tmp_path):
    write_cgroup(tmp_path, 1, f"0::/docker/{HEX_A}\n")
    write_cgroup(tmp_path, 2, f"0::/docker/{HEX_C}\n")        # a container Docker does not list
    write_cgroup(tmp_path, 3, "0::/user.slice/user-0.slice\n")
    write_cgroup(tmp_path, 5, f"0::/docker/{HEX_B}/docker/{HEX_A}\n")  # nested: inner one is known
    containers = ccc_process_owners.docker_containers(FakeDockerClient([
        {"Id": HEX_A, "Names": ["/ana-main"], "Labels": {
            "ccc.stack": "ana-main", "ccc-user.email": "ana@example.org", "ccc-user.name": "ana",
            "frp.22.http.password": "s3cret"}},
        {"Id": HEX_B, "Names": [], "Labels": None},
    ]))
    assert containers[HEX_B] == {"name": HEX_B[:12], "labels": {}}
    processes = [{"pid": pid, "gpu_uuid": "GPU-1", "gpu_index": 0, "used_memory_bytes": 1} for pid in (1, 2, 3, 4, 5)]
    got = ccc_process_owners.attribute(processes, containers, proc_root=str(tmp_path))
    summary = [(p["pid"], p["container_id"], p["container"], p["stack"], p["user_email"], p["user_name"]) for p in got]
    assert summary == [
        (1, HEX_A, "ana-main", "ana-main", "ana@example.org", "ana"),
        (2, HEX_C, None, None, None, None),
        (3, None, None, None, None, None),
        (4, None, None, None, None, None),
        (5, HEX_B, HEX_B[:12], None, None, None),
    ]
    assert "s3cret" not in repr(got)
    assert processes[0] == {"pid": 1, "gpu_uuid": "GPU-1", "gpu_index": 0, "used_memory_bytes": 1}


# ---------------------------------------------------------------------------------------------
# PID -> container -> user on a real container of the test's private dockerd


@pytest.fixture(scope="module")
def agents_dockerd():
    """The private dockerd of simulated node ``agents`` (no fake NVIDIA hook), with ccc-test/tiny:1."""
    if os.geteuid() != 0 or not shutil.which("dockerd"):
        pytest.skip("needs root and dockerd (run .ci/run)")
    from support.dockerd import start_dockerd
    from support.nodes import TEST_BASE, bridge_cidr

    daemon = start_dockerd("agents", TEST_BASE, bridge_cidr("agents"), fake_nvidia=False)
    subprocess.run(["bash", str(REPO / "tests" / "images" / "build.sh"), daemon.url], check=True, capture_output=True)
    return daemon


@pytest.fixture
def labelled_container(agents_dockerd):
    """A running container with the labels ccc-salt puts on its containers; removed afterwards."""
    client = agents_dockerd.client()
    name = "ccc-agents-gpu-" + uuidlib.uuid4().hex[:8]
    container = client.containers.run("ccc-test/tiny:1", detach=True, name=name, labels={
        "ccc.managed-by": "ccc-salt", "ccc.stack": "ana-main", "ccc-user.email": "ana.novak@example.org",
        "ccc-user.name": "ana", "ccc-user.mentor": "mentor@example.org",
        "frp.22.http.password": "not-for-metrics"})
    try:
        container.reload()
        yield agents_dockerd, client, container
    finally:
        container.remove(force=True)
        client.close()


@pytest.mark.docker
def test_real_container_pid_resolves_to_its_user(labelled_container):
    _daemon, client, container = labelled_container
    pid = container.attrs["State"]["Pid"]
    assert pid > 0
    assert ccc_gpu.container_of_pid(pid) == container.id
    # A second process started in the container (as a CUDA job would be) maps the same way.
    exec_id = client.api.exec_create(container.id, ["sleep", "30"])["Id"]
    client.api.exec_start(exec_id, detach=True)
    exec_pid = 0
    for _ in range(50):
        exec_pid = client.api.exec_inspect(exec_id)["Pid"]
        if exec_pid:
            break
    assert exec_pid and ccc_process_owners.container_of_pid(exec_pid) == container.id

    containers = ccc_process_owners.docker_containers(client)
    assert containers[container.id]["name"] == container.name
    processes = [{"gpu_uuid": fake_uuid(0), "gpu_index": 0, "pid": pid, "used_memory_bytes": 1 << 30},
                 {"gpu_uuid": fake_uuid(0), "gpu_index": 0, "pid": exec_pid, "used_memory_bytes": 2 << 30},
                 {"gpu_uuid": fake_uuid(1), "gpu_index": 1, "pid": os.getpid(), "used_memory_bytes": 3 << 30}]
    got = ccc_process_owners.attribute(processes, containers)
    for entry in got[:2]:
        assert (entry["container_id"], entry["container"], entry["stack"], entry["user_email"], entry["user_name"]) == (
            container.id, container.name, "ana-main", "ana.novak@example.org", "ana")
    assert got[2]["container"] is None and got[2]["user_email"] is None
    assert "not-for-metrics" not in repr(got)


@pytest.mark.docker
def test_pid_of_a_removed_container_resolves_to_nothing(agents_dockerd):
    client = agents_dockerd.client()
    try:
        container = client.containers.run("ccc-test/tiny:1", detach=True, labels={"ccc.managed-by": "ccc-salt"},
                                          name="ccc-agents-gone-" + uuidlib.uuid4().hex[:8])
        container.reload()
        pid = container.attrs["State"]["Pid"]
        assert ccc_process_owners.container_of_pid(pid) == container.id
        container.remove(force=True)
        assert ccc_process_owners.container_of_pid(pid) is None
        assert container.id not in ccc_process_owners.docker_containers(client)
    finally:
        for leftover in client.containers.list(all=True, filters={"name": "ccc-agents-gone-"}):
            leftover.remove(force=True)
        client.close()


@pytest.mark.docker
def test_exporter_attributes_gpu_memory_of_a_real_container(labelled_container, tmp_path):
    """End to end: fake NVML reports the real container's PID; the exporter asks the real dockerd."""
    import importlib.util
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    daemon, _client, container = labelled_container
    pid = container.attrs["State"]["Pid"]
    spec = importlib.util.spec_from_file_location("ccc_gpu_exporter_e2e", REPO / "agents" / "ccc_gpu_exporter.py")
    exporter = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(exporter)
    nvml = FakeNvml(count=2)
    nvml.add_process(1, pid, 7 << 30)
    # user_labels: the opt-in that adds the e-mail, read here from the real container's label.
    config = ccc_exporter_config.check(dict(ccc_exporter_config.DEFAULTS, docker_url=daemon.url, fan_state_file=None,
                                            user_labels=True))
    registry, _collector = exporter.build(config, nvml_loader=lambda: ccc_nvml.load_nvml(nvml))
    server = exporter.serve(registry, "127.0.0.1", 0)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10) as response:
            text = response.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = families["ccc_gpu_process_memory_used_bytes"].samples
    assert [s.labels for s in samples] == [{
        "uuid": fake_uuid(1), "minor_number": "1", "pid": str(pid), "container": container.name,
        "stack": "ana-main", "user_email": "ana.novak@example.org"}]
    assert samples[0].value == 7 << 30
    assert "not-for-metrics" not in text
    assert families["ccc_gpu_exporter_collection_success"].samples[0].value == 1

