"""The GPU exporter, scraped over real HTTP on 127.0.0.1 and its exposition parsed.

NVML is ``fake_nvml.FakeNvml``, a FAKE of the pynvml module at the narrowest hardware boundary
(see its docstring). Docker is ``FakeDockerClient``, a FAKE of the one Docker SDK call the exporter
makes (``client.api.containers()``); the processes' cgroup files are crafted under a temporary
``proc_root``. (The same path against a real dockerd and real cgroup files is tested in
``test_gpu.py``.) Everything else (collector, HTTP server, exposition) is the real exporter, and
one test runs the real script as a subprocess with the real pynvml on this GPU-less host. The
script imports its library from ``PYTHONPATH`` (``_utils/``), as its unit does.
"""

import errno
import json
import logging
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from unittest import mock

import ccc_exporter_config
import ccc_gpu
import ccc_nvml
import pynvml
import pytest
import yaml
from support.logs import kept
from support.scripts import load_agent
from agent_run import free_port
from fake_nvml import FakeNvml, fake_uuid
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from prometheus_client.parser import text_string_to_metric_families

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "agents" / "ccc_gpu_exporter.py"
AGENT_ENV = dict(os.environ, PYTHONPATH=str(REPO / "_utils"))  # what the unit's PYTHONPATH gives
GIB = 1 << 30


exporter = load_agent("ccc_gpu_exporter.py")


class FakeDockerClient:
    """A FAKE Docker SDK client: ``api.containers()`` returns fixed entries (or raises), counting calls."""

    def __init__(self, entries, error=None):
        self.entries = entries
        self.error = error
        self.calls = 0
        self.api = self

    def containers(self):
        self.calls += 1
        if self.error is not None:
            raise self.error
        return [dict(entry) for entry in self.entries]

    def close(self):
        pass


def container_id(n):
    return f"{n:02x}" * 32


CONTAINERS = [
    {"Id": container_id(1), "Names": ["/ana-main"], "Labels": {
        "ccc.managed-by": "ccc-salt", "ccc.stack": "ana-main", "ccc-user.email": "ana@example.org",
        "ccc-user.name": "ana", "frp.8888.http.password": "hunter2-secret"}},
    {"Id": container_id(2), "Names": ["/bor-main"], "Labels": {
        "ccc.managed-by": "ccc-salt", "ccc.stack": "bor-main", "ccc-user.email": "bor@example.org"}},
]


class Exporter:
    """An exporter built from the real code, served on 127.0.0.1:<free port>, with fakes below it."""

    def __init__(self, tmp_path, nvml, docker=None, now=None, user_labels=False):
        self.nvml = nvml
        self.docker = docker if docker is not None else FakeDockerClient(CONTAINERS)
        self.proc_root = tmp_path / "proc"
        self.proc_root.mkdir()
        self.fan_state_file = tmp_path / "fan-state.json"
        self.now = now or [1_800_000_000.0]
        config = ccc_exporter_config.check(dict(ccc_exporter_config.DEFAULTS, proc_root=str(self.proc_root),
                                                fan_state_file=str(self.fan_state_file), user_labels=user_labels))
        self.registry, self.collector = exporter.build(
            config, nvml_loader=lambda: ccc_nvml.load_nvml(self.nvml),
            docker_factory=lambda: self.docker, clock=lambda: self.now[0])
        self.server = exporter.serve(self.registry, "127.0.0.1", 0)
        self.port = self.server.server_port

    def process_in(self, pid, cgroup_line):
        path = self.proc_root / str(pid)
        path.mkdir()
        (path / "cgroup").write_text(cgroup_line + "\n")

    def scrape_text(self, path="/metrics"):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as response:
            assert response.status == 200
            return response.read().decode()

    def scrape(self, path="/metrics"):
        return parse(self.scrape_text(path))

    def close(self):
        stop_server(self.server)


def stop_server(server):
    """shutdown() waits for the server loop's 0.5 s poll; a connection wakes it at once."""
    stopper = threading.Thread(target=server.shutdown)
    stopper.start()
    while stopper.is_alive():
        try:
            socket.create_connection(("127.0.0.1", server.server_port), timeout=1).close()
        except OSError:
            pass
        stopper.join(0.02)
    server.server_close()


def parse(text):
    """{family name: {tuple(sorted label items): value}} from an exposition."""
    families = {}
    for family in text_string_to_metric_families(text):
        samples = families.setdefault(family.name, {})
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            samples[tuple(sorted(sample.labels.items()))] = sample.value
    return families


def labels(**items):
    return tuple(sorted(items.items()))


def eight_gpus():
    gpus = []
    for i in range(8):
        gpus.append({"temperature": 40 + i, "utilization_gpu": 10 * i, "utilization_memory": i,
                     "memory_used": i * GIB, "memory_total": 24 * GIB, "power_mw": 100000 + i * 1500,
                     "power_limit_mw": 300000, "fan": 30 + i, "minor_number": 7 - i,
                     "name": "NVIDIA RTX A5000"})
    return FakeNvml(gpus=gpus)


@pytest.fixture
def exporter_log():
    """The exporter's log records (``support.logs.kept``)."""
    with kept("ccc_gpu_exporter") as records:
        yield records


@pytest.fixture
def served(tmp_path, exporter_log):
    made = []

    def make(nvml, **kwargs):
        made.append(Exporter(tmp_path, nvml, **kwargs))
        return made[-1]

    yield make
    for item in made:
        item.close()


# ---------------------------------------------------------------------------------------------
# GPU metrics with the CCC (mindprince) names and labels


def test_eight_gpus_with_the_ccc_metric_names_and_labels(served):
    exp = served(eight_gpus())
    metrics = exp.scrape()
    assert metrics["nvidia_gpu_num_devices"] == {(): 8}
    expected = {
        "nvidia_gpu_temperature_celsius": lambda i: 40 + i,
        "nvidia_gpu_duty_cycle": lambda i: 10 * i,
        "nvidia_gpu_memory_used_bytes": lambda i: i * GIB,
        "nvidia_gpu_memory_total_bytes": lambda i: 24 * GIB,
        "nvidia_gpu_power_usage_milliwatts": lambda i: 100000 + i * 1500,
        "nvidia_gpu_fanspeed_percent": lambda i: 30 + i,
        "ccc_gpu_memory_duty_cycle": lambda i: i,
        "ccc_gpu_power_limit_milliwatts": lambda i: 300000,
        "ccc_gpu_up": lambda i: 1,
    }
    for name, value in expected.items():
        assert metrics[name] == {
            labels(minor_number=str(7 - i), uuid=fake_uuid(i), name="NVIDIA RTX A5000"): value(i) for i in range(8)
        }, name
    info = metrics["ccc_gpu_info"]
    assert labels(minor_number="7", uuid=fake_uuid(0), name="NVIDIA RTX A5000", index="0",
                  pci_bus_id="00000000:1A:00.0") in info
    assert metrics["ccc_gpu_exporter_collection_success"] == {(): 1}
    assert metrics["ccc_gpu_exporter_last_success_timestamp_seconds"] == {(): 1_800_000_000.0}
    assert metrics["ccc_gpu_exporter_collection_failures"] == {
        labels(source="nvml"): 0, labels(source="docker"): 0, labels(source="fan_state"): 0}
    assert 0 < metrics["ccc_gpu_exporter_scrape_duration_seconds"][()] < 5
    assert "process_cpu_seconds" in metrics
    assert exp.docker.calls == 0, "no GPU process, so Docker is not asked"


def test_metrics_are_served_on_every_path_like_mindprince(served):
    exp = served(FakeNvml(count=1))
    assert exp.scrape("/nvidia")["nvidia_gpu_num_devices"] == {(): 1}
    assert exp.scrape("/")["nvidia_gpu_num_devices"] == {(): 1}


def test_datacenter_gpus_without_fans_leave_the_fan_metric_out(served):
    exp = served(FakeNvml(gpus=[{"fan": None}, {"fan": None, "power_mw": None}]))
    metrics = exp.scrape()
    assert metrics.get("nvidia_gpu_fanspeed_percent", {}) == {}
    assert len(metrics["nvidia_gpu_power_usage_milliwatts"]) == 1
    assert len(metrics["nvidia_gpu_temperature_celsius"]) == 2
    assert metrics["ccc_gpu_exporter_collection_success"] == {(): 1}


# ---------------------------------------------------------------------------------------------
# Per-process GPU memory with container and user


def serve_four_processes(served, **kwargs):
    nvml = eight_gpus()
    nvml.add_process(0, 1001, 3 * GIB)
    nvml.add_process(0, 1002, 1 * GIB, graphics=True)
    nvml.add_process(5, 1002, 2 * GIB)
    nvml.add_process(5, 1003, 512 << 20)
    nvml.add_process(6, 1004, None)       # memory unknown: left out
    exp = served(nvml, **kwargs)
    exp.process_in(1001, f"0::/system.slice/docker-{container_id(1)}.scope")   # cgroup v2, systemd driver
    exp.process_in(1002, f"4:memory:/docker/{container_id(2)}")                # cgroup v1, cgroupfs driver
    exp.process_in(1003, "0::/user.slice/user-1000.slice/session-1.scope")     # on the host
    return exp


def test_processes_are_attributed_to_containers_without_user_identity_by_default(served):
    exp = serve_four_processes(served)
    text = exp.scrape_text()
    assert "hunter2-secret" not in text
    assert "@example.org" not in text and "user_email" not in text
    metrics = parse(text)
    assert metrics["ccc_gpu_process_memory_used_bytes"] == {
        labels(uuid=fake_uuid(0), minor_number="7", pid="1001", container="ana-main", stack="ana-main"): 3 * GIB,
        labels(uuid=fake_uuid(0), minor_number="7", pid="1002", container="bor-main", stack="bor-main"): 1 * GIB,
        labels(uuid=fake_uuid(5), minor_number="2", pid="1002", container="bor-main", stack="bor-main"): 2 * GIB,
        labels(uuid=fake_uuid(5), minor_number="2", pid="1003", container="", stack=""): 512 << 20,
    }
    assert exp.docker.calls == 1, "one Docker API call per scrape"


def test_user_labels_opt_in_adds_the_user_email(served):
    exp = serve_four_processes(served, user_labels=True)
    text = exp.scrape_text()
    assert "hunter2-secret" not in text
    metrics = parse(text)
    assert metrics["ccc_gpu_process_memory_used_bytes"] == {
        labels(uuid=fake_uuid(0), minor_number="7", pid="1001", container="ana-main", stack="ana-main",
               user_email="ana@example.org"): 3 * GIB,
        labels(uuid=fake_uuid(0), minor_number="7", pid="1002", container="bor-main", stack="bor-main",
               user_email="bor@example.org"): 1 * GIB,
        labels(uuid=fake_uuid(5), minor_number="2", pid="1002", container="bor-main", stack="bor-main",
               user_email="bor@example.org"): 2 * GIB,
        labels(uuid=fake_uuid(5), minor_number="2", pid="1003", container="", stack="", user_email=""): 512 << 20,
    }
    assert exp.docker.calls == 1, "one Docker API call per scrape"
    exp.scrape()
    assert exp.docker.calls == 2


def test_docker_down_still_exports_processes_and_counts_the_failure(served):
    nvml = FakeNvml(count=1)
    nvml.add_process(0, 1001, GIB)
    exp = served(nvml, docker=FakeDockerClient([], error=ConnectionError("docker.sock: connection refused")))
    exp.process_in(1001, f"0::/docker/{container_id(1)}")
    metrics = exp.scrape()
    assert metrics["ccc_gpu_process_memory_used_bytes"] == {
        labels(uuid=fake_uuid(0), minor_number="0", pid="1001", container="", stack=""): GIB}
    assert metrics["ccc_gpu_exporter_collection_failures"][labels(source="docker")] == 1
    assert metrics["ccc_gpu_exporter_collection_success"] == {(): 0}
    assert metrics["nvidia_gpu_num_devices"] == {(): 1}


# ---------------------------------------------------------------------------------------------
# Fan controller state


def test_fan_controller_state_metrics(served):
    exp = served(FakeNvml(count=1))
    exp.fan_state_file.write_text(json.dumps({
        "mode": "standard", "failsafe": False, "max_temperature_c": 61.4, "zones": {"2": 35, "3": 40},
        "updated": exp.now[0] - 4.5}))
    metrics = exp.scrape()
    assert metrics["ccc_fan_zone_duty_percent"] == {labels(zone="2"): 35, labels(zone="3"): 40}
    assert metrics["ccc_fan_failsafe"] == {(): 0}
    assert metrics["ccc_fan_controller_mode"] == {labels(mode="standard"): 1}
    assert metrics["ccc_fan_controller_max_temperature_celsius"] == {(): 61.4}
    assert metrics["ccc_fan_controller_state_age_seconds"] == {(): 4.5}
    assert metrics["ccc_gpu_exporter_collection_success"] == {(): 1}

    exp.fan_state_file.write_text(json.dumps({
        "mode": "full", "failsafe": True, "max_temperature_c": None, "zones": {"2": 100, "3": 100},
        "updated": exp.now[0]}))
    metrics = exp.scrape()
    assert metrics["ccc_fan_failsafe"] == {(): 1}
    assert metrics["ccc_fan_zone_duty_percent"] == {labels(zone="2"): 100, labels(zone="3"): 100}
    assert "ccc_fan_controller_max_temperature_celsius" not in metrics


def test_no_fan_controller_means_no_fan_metrics_and_no_failure(served):
    metrics = served(FakeNvml(count=1)).scrape()
    assert not [name for name in metrics if name.startswith("ccc_fan_")]
    assert metrics["ccc_gpu_exporter_collection_success"] == {(): 1}


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", json.dumps({"zones": {"2": "fast"}, "failsafe": "no"})])
def test_a_bad_fan_state_file_is_a_counted_failure_not_an_error_page(served, content):
    exp = served(FakeNvml(count=1))
    exp.fan_state_file.write_text(content)
    metrics = exp.scrape()
    assert metrics["ccc_gpu_exporter_collection_failures"][labels(source="fan_state")] == 1
    assert metrics["nvidia_gpu_num_devices"] == {(): 1}


# ---------------------------------------------------------------------------------------------
# NVML failures: the scrape keeps answering with the health metrics


def test_nvml_failure_keeps_answering_and_recovers(served, exporter_log):
    nvml = eight_gpus()
    exp = served(nvml)
    assert exp.scrape()["nvidia_gpu_num_devices"] == {(): 8}
    first_success = exp.now[0]

    nvml.fail_with = pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
    for scrape in (1, 2, 3):
        exp.now[0] += 15
        metrics = exp.scrape()
        assert not [name for name in metrics if name.startswith("nvidia_gpu_")]
        assert metrics["ccc_gpu_exporter_collection_failures"][labels(source="nvml")] == scrape
        assert metrics["ccc_gpu_exporter_collection_success"] == {(): 0}
        assert metrics["ccc_gpu_exporter_last_success_timestamp_seconds"] == {(): first_success}

    # NVML is re-initialised after a failure; each distinct error is logged once, not per scrape.
    assert exporter_log.messages() == ["nvml: NVML cannot count GPUs: GPU is lost",
                                       "nvml: NVML initialisation failed: GPU is lost"]

    nvml.fail_with = None
    exp.now[0] += 15
    metrics = exp.scrape()
    assert exporter_log.messages(logging.INFO)[-1] == "nvml: recovered"
    assert metrics["nvidia_gpu_num_devices"] == {(): 8}
    assert metrics["ccc_gpu_exporter_last_success_timestamp_seconds"] == {(): exp.now[0]}
    assert metrics["ccc_gpu_exporter_collection_failures"][labels(source="nvml")] == 3


def test_missing_driver_answers_with_health_only(served):
    nvml = FakeNvml(count=8)
    nvml.init_error = pynvml.NVMLError_LibraryNotFound()
    exp = served(nvml)
    for _ in range(3):
        metrics = exp.scrape()
    assert metrics["ccc_gpu_exporter_last_success_timestamp_seconds"] == {(): 0}
    assert metrics["ccc_gpu_exporter_collection_failures"][labels(source="nvml")] == 3
    assert "nvidia_gpu_num_devices" not in metrics
    assert nvml.calls.count("nvmlInit") == 3, "NVML is tried again on every scrape"


def test_a_lost_gpu_is_marked_down_and_the_others_are_exported(served):
    nvml = eight_gpus()
    nvml.lose_gpu(3)
    metrics = served(nvml).scrape()
    assert metrics["nvidia_gpu_num_devices"] == {(): 8}
    assert len(metrics["nvidia_gpu_temperature_celsius"]) == 7
    down = {key: value for key, value in metrics["ccc_gpu_up"].items() if value == 0}
    assert list(down) == [labels(minor_number="3", uuid="", name="")]
    assert metrics["ccc_gpu_exporter_collection_failures"][labels(source="nvml")] == 1


def test_an_unexpected_exception_never_becomes_a_500(served, monkeypatch):
    exp = served(FakeNvml(count=1))
    monkeypatch.setattr(ccc_nvml, "read_gpus", lambda nvml: 1 / 0)
    metrics = exp.scrape()
    assert metrics["ccc_gpu_exporter_collection_failures"][labels(source="nvml")] == 1


# ---------------------------------------------------------------------------------------------
# The real script: configuration, --once, serving, SIGTERM


def _host_has_nvml():
    return subprocess.run(["sh", "-c", "ldconfig -p | grep -q libnvidia-ml.so.1"], check=False).returncode == 0


def test_the_script_serves_and_stops_on_sigterm(tmp_path):
    port = free_port()
    config = tmp_path / "gpu-exporter.yaml"
    config.write_text(yaml.safe_dump({"listen_address": "127.0.0.1", "port": port,
                                      "fan_state_file": str(tmp_path / "none.json"), "docker_url": "unix:///nonexistent"}))
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "--config", str(config)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env=AGENT_ENV)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                    assert response.status == 200
                    metrics = parse(response.read().decode())
                break
            except urllib.error.URLError:
                assert proc.poll() is None, proc.stdout.read()
                assert time.monotonic() < deadline, "exporter did not answer"
                time.sleep(0.1)
        assert "ccc_gpu_exporter_scrape_duration_seconds" in metrics
        if not _host_has_nvml():
            assert metrics["ccc_gpu_exporter_collection_failures"][labels(source="nvml")] == 1
            assert "nvidia_gpu_num_devices" not in metrics
    finally:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, output
    if not _host_has_nvml():
        assert "NVML library not found: is the NVIDIA driver installed?" in output


def test_once_prints_the_exposition(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--once"], check=False, capture_output=True, text=True,
                          timeout=60, env=AGENT_ENV)
    metrics = parse(proc.stdout)
    assert "ccc_gpu_exporter_last_success_timestamp_seconds" in metrics
    assert proc.returncode == (0 if metrics["ccc_gpu_exporter_collection_success"][()] == 1 else 1)


@pytest.mark.parametrize("content, problem", [
    ({"port": 99999}, "port must be 0..65535"),
    ({"listen": "0.0.0.0"}, "unknown settings ['listen']"),
    ({"fan_state_file": "state.json"}, "fan_state_file must be an absolute path"),
    ({"docker_timeout": 0}, "docker_timeout must be a positive number"),
    ({"user_labels": "yes"}, "user_labels must be true or false"),
    ([1], "must be a mapping"),
])
def test_bad_configuration_is_refused_with_the_reason(tmp_path, content, problem):
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump(content))
    with pytest.raises(ccc_exporter_config.ConfigError) as caught:
        ccc_exporter_config.load_file(str(config))
    assert problem in str(caught.value)
    proc = subprocess.run([sys.executable, str(SCRIPT), "--config", str(config), "--once"],
                          check=False, capture_output=True, text=True, timeout=60, env=AGENT_ENV)
    assert proc.returncode == 2 and problem in proc.stderr


# ---------------------------------------------------------------------------------------------
# Configuration template and unit


def render_template(pillar):
    """The template as Salt renders it: ``salt['ccc_gpu.exporter_config']`` over ``pillar``."""
    env = Environment(loader=FileSystemLoader(str(REPO / "agents" / "config")), undefined=StrictUndefined)
    with mock.patch.object(ccc_gpu, "__pillar__", pillar, create=True):
        return env.get_template("gpu-exporter.yaml.jinja").render(salt={"ccc_gpu.exporter_config": ccc_gpu.exporter_config})


def test_config_template_defaults_and_pillar_values(tmp_path):
    rendered = render_template({})
    assert yaml.safe_load(rendered) == {
        "listen_address": "127.0.0.1", "port": 9445, "docker_url": "unix:///var/run/docker.sock",
        "fan_state_file": "/run/ccc-fan-controller/state.json", "docker_timeout": 5, "log_level": "info",
        "user_labels": False}
    pillar = {"ccc": {"node": {"docker_url": "unix:///run/d.sock"}, "fans": {"state_file": "/run/f/s.json"},
                      "monitoring": {"gpu_exporter": {"listen_address": "127.0.0.1", "port": 9500,
                                                      "log_level": "debug", "user_labels": True}}}}
    path = tmp_path / "gpu-exporter.yaml"
    path.write_text(render_template(pillar))
    config = ccc_exporter_config.load_file(str(path))
    assert (config["listen_address"], config["port"], config["docker_url"], config["fan_state_file"],
            config["log_level"], config["user_labels"]) == ("127.0.0.1", 9500, "unix:///run/d.sock", "/run/f/s.json",
                                                           "debug", True)
    assert render_template({"ccc": {"monitoring": None, "node": None}}) == rendered


def test_config_template_renders_through_salt(tmp_path):
    from support.site import SaltNode

    salt = SaltNode(tmp_path, "node3", "unix:///srv/node3.sock", tmp_path / "storage",
                    extra_ccc={"monitoring": {"gpu_exporter": {"port": 9446}}})
    rendered, _ = salt.salt_call("slsutil.renderer", f"path={REPO / 'agents' / 'config' / 'gpu-exporter.yaml.jinja'}",
                                 "default_renderer=jinja")
    path = tmp_path / "gpu-exporter.yaml"
    path.write_text(rendered)
    config = ccc_exporter_config.load_file(str(path))
    assert config["port"] == 9446 and config["docker_url"] == "unix:///srv/node3.sock"


def test_unit_runs_the_installed_exporter_with_its_config():
    unit = (REPO / "agents" / "systemd" / "ccc-gpu-exporter.service").read_text()
    # the agents' venv python (salt/cluster/agents), not whichever python3 the #! line finds
    assert "ExecStart=/opt/ccc-agents/venv/bin/python /opt/ccc-agents/bin/ccc_gpu_exporter.py --config /etc/ccc/gpu-exporter.yaml" in unit
    assert "Environment=PYTHONPATH=/opt/ccc-agents/lib" in unit
    assert "Restart=on-failure" in unit
    after = next(line for line in unit.splitlines() if line.startswith("After="))
    assert "nvidia-persistenced.service" in after and "docker.service" in after
    directives = {line.split("=", 1)[0] for line in unit.splitlines() if "=" in line and not line.startswith("#")}
    # Would hide /dev/nvidia* or other users' /proc entries from the exporter.
    assert not directives & {"PrivateDevices", "DevicePolicy", "DeviceAllow", "ProtectClock", "ProtectProc",
                             "ProcSubset", "PrivateUsers", "User", "DynamicUser"}
    assert os.access(SCRIPT, os.X_OK) and SCRIPT.read_text().startswith("#!/usr/bin/env python3\n")


def test_a_listen_address_not_on_the_host_yet_is_waited_for_not_a_crash(caplog):
    """The exporter listens on a Docker bridge's gateway, which exists only while dockerd has the
    network up: the exporter waits for it (until its deadline, or until it is told to stop)
    instead of exiting into systemd's restart limit."""
    registry = exporter.CollectorRegistry()
    started = time.monotonic()
    with pytest.raises(OSError) as failed:
        exporter.serve(registry, "192.0.2.77", 0, wait=2.5)  # TEST-NET-1: never on this host
    assert failed.value.errno == errno.EADDRNOTAVAIL and time.monotonic() - started >= 2.0
    assert "listen address 192.0.2.77 is not on this host yet (Docker network down?); waiting" in caplog.text
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    started = time.monotonic()
    with pytest.raises(OSError):
        exporter.serve(registry, "192.0.2.77", 0, wait=60, stop=stop)
    assert time.monotonic() - started < 5
