"""The monitoring_agent role's rules (``ccc_monitoring``): where the exporters listen (never the
whole LAN), which parts run on a node, the packaged exporter's arguments, the forwarder's FRP
labels and script, and the services ``salt-run ccc.status`` checks."""

import pathlib
import shlex
import subprocess

import pytest
import yaml

import support.site  # noqa: F401  (puts _utils on the path)

import ccc_exporter_config  # noqa: E402
import ccc_monitoring  # noqa: E402
import ccc_role_schema  # noqa: E402
from support import role_files  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
DEFAULTS = yaml.safe_load((REPO / "salt" / "cluster" / "monitoring_agent" / "defaults.yaml").read_text())["monitoring_agent"]
NETWORKS = {"student-restricted": {"subnet": "172.30.1.0/24", "gateway": "172.30.1.1"},
            "lab-unrestricted": {"subnet": "172.30.0.0/24"}}
GPUS = {"device_lab": ["GPU-1"]}
SCHEMA = role_files.schema("monitoring_agent")


def settings(**changes):
    merged = support.site.deep_merge(DEFAULTS, changes)
    return merged


def schema_problems(**changes):
    """What the role's schema says about the defaults with ``changes``."""
    return ccc_role_schema.problems("monitoring_agent", settings(**changes), SCHEMA)


def test_exporters_listen_on_the_monitoring_networks_gateway_or_what_pillar_says():
    assert ccc_monitoring.host_address({"network": "student-restricted"}, NETWORKS) == "172.30.1.1"
    assert ccc_monitoring.host_address({"network": "student-restricted", "listen_address": "10.0.0.5"}, NETWORKS) \
        == "10.0.0.5"
    assert ccc_monitoring.host_address({}, NETWORKS) is None
    result = ccc_monitoring.plan(settings(), NETWORKS, {}, False, 9445)
    assert result["address"] == "127.0.0.1"  # no network: local scrapes only, never 0.0.0.0


@pytest.mark.parametrize("monitoring, problem", [
    ({"network": "nope"}, "ccc:monitoring:network 'nope' is not in ccc:cluster:networks"),
    ({"network": "lab-unrestricted"}, "ccc:cluster:networks:lab-unrestricted has no gateway"),
    ({"listen_address": "eth0"}, "ccc:monitoring:listen_address must be an IP address, got 'eth0'"),
])
def test_an_address_that_cannot_be_found_is_named(monitoring, problem):
    with pytest.raises(ValueError, match=problem):
        ccc_monitoring.host_address(monitoring, NETWORKS)


def test_the_gpu_exporter_binds_the_role_address_unless_its_own_key_says_otherwise():
    ccc = {"cluster": {"networks": NETWORKS}, "monitoring": {"network": "student-restricted"}}
    assert ccc_exporter_config.from_pillar(ccc)["listen_address"] == "172.30.1.1"
    ccc["monitoring"]["gpu_exporter"] = {"listen_address": "127.0.0.1"}
    assert ccc_exporter_config.from_pillar(ccc)["listen_address"] == "127.0.0.1"
    assert ccc_exporter_config.from_pillar({})["listen_address"] == "127.0.0.1"
    with pytest.raises(ccc_exporter_config.ConfigError, match="listen_address: ccc:monitoring:network 'x'"):
        ccc_exporter_config.from_pillar({"monitoring": {"network": "x"}})


@pytest.mark.parametrize("changes, devices, frp, expected", [
    ({}, GPUS, False, {"node_exporter": "package", "gpu": True, "forwarder": False}),
    ({}, {"device_lab": []}, True, {"node_exporter": "package", "gpu": False, "forwarder": True}),
    ({"gpu": False, "node_exporter": {"mode": "container"}}, GPUS, True,
     {"node_exporter": "container", "gpu": False, "forwarder": True}),
    ({"gpu": "true", "forwarder": {"enabled": False}}, {}, True, {"node_exporter": "package", "gpu": True, "forwarder": False}),
    ({"node_exporter": {"enabled": False}, "gpu": False, "forwarder": {"enabled": True}}, {}, True,
     {"node_exporter": None, "gpu": False, "forwarder": False}),  # nothing to forward
])
def test_which_parts_run(changes, devices, frp, expected):
    assert ccc_monitoring.switches(settings(**changes), devices, frp) == expected


@pytest.mark.parametrize("changes, problem", [
    ({"node_exporter": {"mode": "docker"}}, "node_exporter:mode must be package or container, got 'docker'"),
    ({"node_exporter": {"port": "9100"}}, "node_exporter:port must be a port number"),
    ({"node_exporter": {"args": "--x"}}, "node_exporter:args must be a list of --flag"),
    ({"forwarder": {"forward_command": "socat"}}, "forward_command must be a command with {port}"),
])
def test_the_schema_names_wrong_values(changes, problem):
    problems = schema_problems(**changes)
    assert len(problems) == 1 and problem in problems[0], problems
    assert schema_problems() == []


@pytest.mark.parametrize("changes, problem", [
    ({"gpu": "maybe"}, "ccc:monitoring:gpu must be auto, true or false, got 'maybe'"),
    ({"forwarder": {"enabled": True}}, "the metrics forwarder needs ccc:monitoring:network"),
    ({"forwarder": {"enabled": True}, "network": "student-restricted", "listen_address": "127.0.0.1"},
     "cannot reach exporters on 127.0.0.1"),
])
def test_settings_that_cannot_work_are_named(changes, problem):
    with pytest.raises(ValueError, match=problem):
        ccc_monitoring.plan(settings(**changes), NETWORKS, {}, False, 9445)


def test_the_packaged_exporter_listens_on_the_host_address_with_the_admins_flags():
    text = ccc_monitoring.package_defaults_text(settings(node_exporter={"args": ["--collector.systemd"]}), "172.30.1.1")
    assert 'ARGS="--web.listen-address=172.30.1.1:9100 --collector.systemd"\n' in text
    assert ccc_monitoring.package_args(settings(), "fd00::1")[0] == "--web.listen-address=[fd00::1]:9100"
    for bad in (["--a b"], ["--x=$(reboot)"], ["--web.listen-address=0.0.0.0:9100"], ["-v"], "--x"):
        problems = schema_problems(node_exporter={"args": bad})
        assert len(problems) == 1 and problems[0].startswith("ccc:monitoring:node_exporter:args"), problems


def test_the_node_exporter_container_sees_the_hosts_network_and_processes():
    spec = ccc_monitoring.node_exporter_spec(settings(node_exporter={"mode": "container"}), "172.30.1.1", "gpu1")
    assert spec["networks"] == [{"name": "host"}] and spec["pid_mode"] == "host"
    assert spec["binds"] == [{"source": "/", "target": "/host", "read_only": True}]
    assert spec["command"] == ["--path.rootfs=/host", "--web.listen-address=172.30.1.1:9100"]
    assert spec["image"] == "prom/node-exporter:v1.8.2" and spec["role"] == "monitoring_agent"


def test_the_forwarder_publishes_the_originals_scrape_surface_without_secrets():
    result = ccc_monitoring.plan(settings(network="student-restricted"), NETWORKS, GPUS, True, 9445)
    spec = ccc_monitoring.forwarder_spec(settings(), result, "gpu1")
    labels = spec["labels"]
    assert labels["frp.9100.http.subdomain"] == labels["frp.9445.http.subdomain"] == "gpu1-metrics"
    assert (labels["frp.9100.http.locations"], labels["frp.9445.http.locations"]) == ("/", "/nvidia")
    assert labels["frp.9100.http.password"] == "{{ .Envs.FRP_CCC_METRICS_PASSWORD }}"
    assert labels["frp.9445.http.username"] == "{{ .Envs.FRP_CCC_METRICS_USER }}"
    assert spec["networks"] == [{"name": "student-restricted"}] and spec["exposed_ports"] == [9100, 9445]
    assert "secret_env" not in spec
    assert spec["command"][:2] == ["sh", "-c"]
    script = spec["command"][2]
    assert "nc -ll -p 9100 -e nc 172.30.1.1 9100" in script and "nc -ll -p 9445 -e nc 172.30.1.1 9445" in script
    no_gpu = ccc_monitoring.plan(settings(network="student-restricted", gpu=False), NETWORKS, GPUS, True, 9445)
    assert not any(key.startswith("frp.9445") for key in ccc_monitoring.forwarder_spec(settings(), no_gpu, "gpu1")["labels"])


def test_the_forward_script_runs_each_forwarding_and_stops_on_sigterm(tmp_path):
    log = tmp_path / "log"
    script = ccc_monitoring.forward_script(f"echo {{port}} {{address}} {{target_port}} >>{log}; exit 0",
                                           "172.30.1.1", [(9100, 9101), (9445, 9446)])
    proc = subprocess.Popen(["sh", "-c", script])
    try:
        import time
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not ({"9100 172.30.1.1 9101", "9445 172.30.1.1 9446"}
                                                   <= set(log.read_text().splitlines() if log.exists() else [])):
            time.sleep(0.1)
        assert {"9100 172.30.1.1 9101", "9445 172.30.1.1 9446"} <= set(log.read_text().splitlines())
        proc.terminate()
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
    assert shlex.split(ccc_monitoring.forward_script("x {port}", "fd00::1", [(1, 2)]))


def test_services_for_status():
    role = "monitoring_agent"
    assert ccc_monitoring.services(settings(), "gpu1", GPUS, True) == [
        {"kind": "unit", "name": "prometheus-node-exporter", "role": role},
        {"kind": "unit", "name": "ccc-gpu-exporter", "role": role},
        {"kind": "container", "name": "ccc-metrics-forwarder", "role": role}]
    assert ccc_monitoring.services(settings(node_exporter={"mode": "container"}), "cpu1") == [
        {"kind": "container", "name": "node_exporter", "role": role}]
    assert ccc_monitoring.services(settings(node_exporter={"enabled": False}, gpu=False), "cpu1", GPUS, True) == []
