"""The monitoring_agent role applied for real on a systemd test node (tests/support/sysnode.py),
with the docker role for the engine and the monitoring network: node_exporter from Debian's
package and the GPU exporter (agents installed offline, cluster.agents) really running as
services, listening only on the gateway of the monitoring network; the forwarder container on
that network carrying the FRP labels of <node>-metrics; a real Prometheus server (Debian's
``prometheus`` binary) scraping both exporters *through the forwarder's address on the
monitoring network*, as frpc reaches it, with ``up == 1`` and the ``nvidia_gpu_*`` series. A
second apply changes nothing; the role set to ``absent`` removes the services, the package, its
config and the forwarder. The same Prometheus evaluates the alert rules of
``monitoring/prometheus/ccc-alerts.yml`` (written by ``ccc_alert_rules.py`` with this test's job
names and ``for: 0s`` for CCCFanFailsafe): the real fan controller, reading the FAKE NVML below,
goes fail-safe when that NVML fails, the exporter reports ``ccc_fan_failsafe 1`` and the alert
fires in Prometheus' ``/api/v1/alerts``.

FAKES, each at the narrowest boundary; everything above them is the real code:

* **NVML** (no GPU, no ``libnvidia-ml.so.1`` in a node): a systemd drop-in of this test puts a
  FAKE ``ccc_nvml`` module (FAKE_LIB) first on the exporter's ``PYTHONPATH``. It is the real
  ``/opt/ccc-agents/lib/ccc_nvml.py`` (installed by the role) except that ``load_nvml`` hands the
  real code ``tests/agents/fake_nvml.FakeNvml`` (two GPUs) instead of the ``pynvml`` module, the
  injection tests/agents/test_fans.py uses for the fan controller's service. The fan controller
  (the installed agent, run by this test as a transient unit with ``--dry-run``: the BMC is
  tests/nodes/test_superfan_gpu.py's business) gets FAN_FAKE_LIB first on its ``PYTHONPATH``: the
  same FakeNvml, except that every call fails once the file NVML_BROKEN exists (a driver that
  stopped answering).
* **Images** (nothing can be pulled): the forwarder's image ``busybox:1.36.1`` is a stand-in built in
  the node from ``ccc-test/tiny:1`` (Debian's static busybox, the small ``nc`` dialect without
  ``-k``). The role's default forward command runs unchanged: it uses ``-ll``, which that dialect
  and the busybox image's (where ``-lk`` is the same) both take.
* **Prometheus** runs on the host (the binary of Debian's package, unpacked into the cache) inside
  the node's network namespace (``nsenter --net``): there it reaches the node's Docker bridges, as
  the frpc container on the same network would.
"""

import json
import pathlib
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

from nodes.agents_support import wheel_pillar
from support import prometheus as prometheus_programs
from support.sysnode import REPO
from support.sysnode import failed as _failed, changed as _changed

pytestmark = pytest.mark.docker

NODE = "monitor1"
NETWORK = "student-restricted"
GATEWAY = "172.31.1.1"
FORWARDER = "ccc-metrics-forwarder"
GPUS = ["GPU-11111111-2222-4333-8444-000000000001", "GPU-11111111-2222-4333-8444-000000000002"]
FAKE_LIB = "/opt/ccc-test-fake-nvml"
FAKE_DROPIN = "/etc/systemd/system/ccc-gpu-exporter.service.d/ccc-test-fake-nvml.conf"
FAKE_CCC_NVML = f'''"""FAKE ccc_nvml of tests/nodes/test_monitoring_agent.py: the installed ccc_nvml, except that
load_nvml hands it a FakeNvml (tests/agents/fake_nvml.py) with two GPUs instead of pynvml."""
import importlib.util
from fake_nvml import FakeNvml
_spec = importlib.util.spec_from_file_location("real_ccc_nvml", "/opt/ccc-agents/lib/ccc_nvml.py")
real = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(real)
globals().update({{name: value for name, value in vars(real).items() if not name.startswith("__")}})


def load_nvml(nvml=None):
    return real.load_nvml(FakeNvml(gpus=[{{"uuid": uuid, "temperature": 50 + i}} for i, uuid in enumerate({GPUS!r})]))
'''
PROMETHEUS_PORT = 19090
NVML_BROKEN = "/run/ccc-test-nvml-broken"
FAN_FAKE_LIB = "/opt/ccc-test-fake-nvml-fans"
FAN_FAKE_CCC_NVML = f'''"""FAKE ccc_nvml of the fan controller of tests/nodes/test_monitoring_agent.py: the exporter's
fake ccc_nvml ({FAKE_LIB}), except that every NVML call fails while {NVML_BROKEN} exists."""
import importlib.util
import os
import pynvml
from fake_nvml import FakeNvml
_spec = importlib.util.spec_from_file_location("exporter_fake_ccc_nvml", "{FAKE_LIB}/ccc_nvml.py")
base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(base)
globals().update({{name: value for name, value in vars(base).items() if not name.startswith("__")}})


class _Breakable(FakeNvml):
    def _enter(self, name):
        if os.path.exists({NVML_BROKEN!r}):
            self.fail_with = pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)
        super()._enter(name)


def load_nvml(nvml=None):
    return base.real.load_nvml(_Breakable(gpus=[{{"uuid": uuid, "temperature": 50}} for uuid in {GPUS!r}]))
'''
FAN_UNIT = "ccc-test-fan-controller"
FAN_CONFIG = "/etc/ccc-test-fan-controller.yaml"  # not under /etc/ccc-test: the node's salt config


def _pillar(node, monitoring_role=True):
    return {"ccc": {
        "only_roles": ["docker", "monitoring_agent"],
        "roles": {"monitoring_agent": monitoring_role},
        "node": {"compute_devices": {"device_lab": GPUS}},
        "cluster": {"networks": {NETWORK: {"subnet": "172.31.1.0/24", "gateway": GATEWAY, "bridge_name": "ccc-student"}}},
        "docker": {"nvidia_toolkit": {"enabled": False}, "registries": []},
        "agents": node.agents_pillar,
        "monitoring": {"network": NETWORK,
                       "forwarder": {"enabled": True}},  # the default image name and command
    }}


def _apply(node, label):
    started = time.monotonic()
    call = node.salt_call("state.apply", "cluster", check=False)
    node.timings[label] = time.monotonic() - started
    return call.states()


@pytest.fixture(scope="module")
def node(sysnodes):
    made = sysnodes(NODE)
    made.timings = {}
    made.add_apt_source()
    made.agents_pillar = wheel_pillar(made)
    # FAKE NVML for the exporter service (module docstring), in place before the role starts it.
    # Copied into the node, not read from the checkout: a checkout under /tmp (CI's clean clone)
    # is hidden from the service by its PrivateTmp=yes.
    made.write_file(f"{FAKE_LIB}/ccc_nvml.py", FAKE_CCC_NVML)
    made.write_file(f"{FAKE_LIB}/fake_nvml.py", (REPO / "tests" / "agents" / "fake_nvml.py").read_text())
    made.write_file(FAKE_DROPIN, "[Service]\n# FAKE NVML of tests/nodes/test_monitoring_agent.py\n"
                    f"Environment=PYTHONPATH={FAKE_LIB}:/opt/ccc-agents/lib\n")
    made.write_pillar(f"site/nodes/{NODE}.sls", json.dumps(_pillar(made)))
    made.salt_call("saltutil.sync_all")
    return made


def _load_forwarder_image(node):
    """The stand-in forwarder image in the node's dockerd (module docstring)."""
    saved = subprocess.run(["docker", "save", "ccc-test/tiny:1"], capture_output=True, check=True).stdout
    subprocess.run(["docker", "exec", "-i", node.container, "docker", "load"], input=saved, capture_output=True, check=True)
    node.exec(["docker", "build", "-q", "-t", "busybox:1.36.1", "-"],
              input='FROM ccc-test/tiny:1\nENTRYPOINT []\nCMD ["sh"]\n')


@pytest.fixture(scope="module")
def runs(node):
    """The docker role first (the engine to load the stand-in image into), then the cluster apply
    with the monitoring role, then a no-op apply."""
    started = time.monotonic()
    node.salt_call("state.apply", "cluster.docker")
    node.timings["docker role"] = time.monotonic() - started
    _load_forwarder_image(node)
    first = _apply(node, "first")
    second = _apply(node, "no-op")
    print("monitoring_agent on a fresh node: " + ", ".join(f"{k} {v:.1f} s" for k, v in node.timings.items()))
    return first, second


def prometheus_binary():
    """Debian's prometheus binary, unpacked once into the cache (no service, nothing installed)."""
    return prometheus_programs.binary("prometheus")


@pytest.fixture(scope="module")
def prometheus(node, runs, tmp_path_factory):
    """A Prometheus server in the node's network namespace scraping the forwarder's two ports."""
    forwarder_ip = node.exec(["docker", "inspect", "-f", f'{{{{(index .NetworkSettings.Networks "{NETWORK}").IPAddress}}}}',
                              FORWARDER]).stdout.strip()
    work = tmp_path_factory.mktemp("prometheus")
    config = work / "prometheus.yml"
    overrides = work / "alert-overrides.yml"  # this config's job names; the fail-safe alert at once
    overrides.write_text(json.dumps({"jobs": {"node": "node", "gpu": "gpu"}, "for": {"CCCFanFailsafe": "0s"}}))
    (work / "ccc-alerts.yml").write_text(subprocess.run(
        [sys.executable, str(REPO / "monitoring" / "prometheus" / "ccc_alert_rules.py"), "--overrides", str(overrides)],
        capture_output=True, text=True, check=True).stdout)
    config.write_text(json.dumps({
        "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
        "rule_files": [str(work / "ccc-alerts.yml")],
        "scrape_configs": [
            {"job_name": "node", "static_configs": [{"targets": [f"{forwarder_ip}:9100"]}]},
            {"job_name": "gpu", "metrics_path": "/nvidia", "static_configs": [{"targets": [f"{forwarder_ip}:9445"]}]},
        ]}))
    pid = subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", node.container], capture_output=True,
                         text=True, check=True).stdout.strip()
    log = open(work / "prometheus.log", "w")
    proc = subprocess.Popen(["nsenter", "--target", pid, "--net", str(prometheus_binary()),
                             f"--config.file={config}", f"--storage.tsdb.path={work / 'data'}",
                             f"--web.listen-address=0.0.0.0:{PROMETHEUS_PORT}"], stdout=log, stderr=subprocess.STDOUT)
    try:
        yield {"url": f"http://{node.ip()}:{PROMETHEUS_PORT}", "log": work / "prometheus.log", "forwarder": forwarder_ip}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def query(prometheus, expression, timeout=60):
    """The first non-empty result of an instant query, retried while scrapes come in."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            url = f"{prometheus['url']}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
            with urllib.request.urlopen(url, timeout=5) as response:
                result = json.load(response)["data"]["result"]
            if result:
                return result
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"no result for {expression!r} within {timeout} s; prometheus log:\n"
                                 + pathlib.Path(prometheus["log"]).read_text()[-3000:])
        time.sleep(1)


def test_the_role_comes_up_and_a_second_apply_changes_nothing(runs):
    first, second = runs
    assert _failed(first) == {}
    assert {"ccc-cluster-monitoring_agent-node-exporter-service", "ccc-cluster-monitoring_agent-gpu-exporter-service",
            "ccc-cluster-monitoring_agent-forwarder"} <= set(_changed(first))
    assert _failed(second) == {} and _changed(second) == {}


def test_both_exporters_run_as_services_on_the_monitoring_gateway_only(node, runs):
    assert node.exec("systemctl is-active prometheus-node-exporter ccc-gpu-exporter").stdout.split() == ["active"] * 2
    deadline = time.monotonic() + 30  # Type=simple units are active before they bind
    while True:
        listening = [line.split()[3] for line in node.exec("ss -Hltn").stdout.splitlines()]
        if {f"{GATEWAY}:9100", f"{GATEWAY}:9445"} <= set(listening) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert {f"{GATEWAY}:9100", f"{GATEWAY}:9445"} <= set(listening), (listening, node.exec(
        "journalctl -u ccc-gpu-exporter -n 12 -o cat --no-pager", check=False).stdout[-1500:])
    assert not {"0.0.0.0:9100", "*:9100", "[::]:9100", "0.0.0.0:9445", "*:9445"} & set(listening)
    assert node.exec("cat /etc/default/prometheus-node-exporter").stdout.endswith(
        f'ARGS="--web.listen-address={GATEWAY}:9100"\n')


def test_the_forwarder_carries_the_frp_labels_of_node_metrics(node, runs):
    attrs = json.loads(node.exec(["docker", "inspect", FORWARDER]).stdout)[0]
    labels = attrs["Config"]["Labels"]
    assert labels["frp.9100.http.subdomain"] == labels["frp.9445.http.subdomain"] == f"{NODE}-metrics"
    assert (labels["frp.9100.http.locations"], labels["frp.9445.http.locations"]) == ("/", "/nvidia")
    assert labels["frp.9100.http.password"] == "{{ .Envs.FRP_CCC_METRICS_PASSWORD }}"
    assert labels["ccc.cluster-role"] == "monitoring_agent"
    assert list(attrs["NetworkSettings"]["Networks"]) == [NETWORK]


def test_prometheus_scrapes_both_exporters_through_the_forwarder(prometheus):
    for job in ("node", "gpu"):
        result = query(prometheus, f'up{{job="{job}"}} == 1')
        assert result[0]["metric"]["instance"].startswith(prometheus["forwarder"])
    devices = query(prometheus, "nvidia_gpu_num_devices")
    assert devices[0]["value"][1] == "2"
    temperatures = query(prometheus, "nvidia_gpu_temperature_celsius")
    assert sorted(item["metric"]["uuid"] for item in temperatures) == GPUS
    assert query(prometheus, 'node_network_receive_bytes_total{device="eth0"}')  # the host's NIC, not a container's
    assert query(prometheus, "node_exporter_build_info")


def alerts(prometheus, name):
    """Prometheus' alerts named ``name`` (``/api/v1/alerts``): their labels and state."""
    with urllib.request.urlopen(f"{prometheus['url']}/api/v1/alerts", timeout=5) as response:
        found = json.load(response)["data"]["alerts"]
    return [alert for alert in found if alert["labels"]["alertname"] == name]


def _start_fan_controller(node):
    """The installed fan controller as a transient unit (module docstring: FAKES), dry run, 1 s steps."""
    node.write_file(f"{FAN_FAKE_LIB}/ccc_nvml.py", FAN_FAKE_CCC_NVML)
    node.write_file(FAN_CONFIG, "interval: 1\nzones: [2, 3]\n")
    node.exec(["systemd-run", f"--unit={FAN_UNIT}", "-p", "RuntimeDirectory=ccc-fan-controller",
               "-p", "RuntimeDirectoryMode=0755", "-p", f"Environment=PYTHONPATH={FAN_FAKE_LIB}:{FAKE_LIB}:/opt/ccc-agents/lib",
               "/opt/ccc-agents/venv/bin/python", "/opt/ccc-agents/bin/ccc_fan_controller.py", "--dry-run",
               "--config", FAN_CONFIG])


def test_the_fan_failsafe_alert_fires_when_nvml_fails(node, runs, prometheus):
    _start_fan_controller(node)
    try:
        # NVML answers: the controller follows the curve, the exporter says so, the rules are loaded
        assert query(prometheus, 'ccc_fan_failsafe{job="gpu"} == 0')
        assert query(prometheus, 'ccc:alert_threshold:gpu_temperature_warning_celsius')[0]["value"][1] == "85"
        assert alerts(prometheus, "CCCFanFailsafe") == []
        node.exec(["touch", NVML_BROKEN])
        started = time.monotonic()
        assert query(prometheus, 'ccc_fan_failsafe{job="gpu"} == 1', timeout=30)
        deadline = time.monotonic() + 30
        while not (firing := [a for a in alerts(prometheus, "CCCFanFailsafe") if a["state"] == "firing"]):
            assert time.monotonic() < deadline, (alerts(prometheus, "CCCFanFailsafe"), node.exec(
                f"journalctl -u {FAN_UNIT} -n 12 -o cat --no-pager", check=False).stdout[-1500:])
            time.sleep(0.5)
        print(f"CCCFanFailsafe firing {time.monotonic() - started:.1f} s after NVML failed")
        assert firing[0]["labels"] == {"alertname": "CCCFanFailsafe", "severity": "warning", "job": "gpu",
                                       "instance": f"{prometheus['forwarder']}:9445"}
        assert firing[0]["annotations"]["summary"] == \
            f"Fan controller of {prometheus['forwarder']}:9445 runs fail-safe: fans at 100 %"
        assert "FAIL-SAFE: GPU temperatures unreadable" in node.exec(
            f"journalctl -u {FAN_UNIT} -o cat --no-pager", check=False).stdout
    finally:
        node.exec(["systemctl", "stop", FAN_UNIT], check=False)
        node.exec(["rm", "-rf", NVML_BROKEN, FAN_FAKE_LIB, FAN_CONFIG], check=False)


def test_the_role_absent_removes_what_it_set_up(node, runs, prometheus):
    node.write_pillar(f"site/nodes/{NODE}.sls", json.dumps(_pillar(node, monitoring_role="absent")))
    states = _apply(node, "absent")
    assert _failed(states) == {}
    for unit in ("prometheus-node-exporter", "ccc-gpu-exporter"):
        assert node.exec(["systemctl", "is-active", unit], check=False).stdout.strip() != "active"
    assert "ii" not in node.exec("dpkg -l prometheus-node-exporter 2>/dev/null | tail -1 | cut -c1-2", check=False).stdout
    for path in ("/etc/default/prometheus-node-exporter", "/etc/systemd/system/ccc-gpu-exporter.service",
                 "/etc/ccc/gpu-exporter.yaml", "/etc/systemd/system/prometheus-node-exporter.service.d/ccc-salt.conf"):
        assert node.exec(["test", "-e", path], check=False).returncode == 1, path
    assert node.exec(["docker", "ps", "-aq", "--filter", f"name=^{FORWARDER}$"]).stdout.strip() == ""
