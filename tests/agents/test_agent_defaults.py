"""One definition of the agents' defaults: ``_utils/ccc_fan_config.py`` and
``_utils/ccc_exporter_config.py``. The configuration templates render what the execution
modules compute from them, and the agents fall back to the same modules, so a changed default
shows up in the rendered file, in ``salt-call`` and in the running agent alike.

The end-to-end test changes a default in a copy of ``_utils/`` and runs the real agents on it
(``PYTHONPATH``, as their units do) and the real ``salt-call`` (its synced copy of ``_utils/``).
"""

import os
import pathlib
import shutil
import signal
import subprocess
import sys
import urllib.request
from unittest import mock

import ccc_exporter_config
import ccc_fan_config
import ccc_fans
import ccc_gpu
import pytest
import yaml
from agent_run import free_port, read_state, wait_for
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from salt.exceptions import CommandExecutionError

REPO = pathlib.Path(__file__).resolve().parents[2]
TEMPLATES = REPO / "agents" / "config"
FAN_AGENT = REPO / "agents" / "ccc_fan_controller.py"
EXPORTER = REPO / "agents" / "ccc_gpu_exporter.py"


def render(template, pillar):
    """A template as Salt renders it: ``salt[...]`` are the execution functions over ``pillar``."""
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), undefined=StrictUndefined)
    salt = {"ccc_fans.config": ccc_fans.config, "ccc_gpu.exporter_config": ccc_gpu.exporter_config}
    with mock.patch.object(ccc_fans, "__pillar__", pillar, create=True), \
            mock.patch.object(ccc_gpu, "__pillar__", pillar, create=True):
        return yaml.safe_load(env.get_template(template).render(salt=salt))


def test_the_fan_template_writes_every_default_of_the_module():
    assert render("fan-controller.yaml.jinja", {}) == ccc_fan_config.controller_config({})
    assert list(render("fan-controller.yaml.jinja", {})) == sorted(ccc_fan_config.DEFAULTS)


def test_a_changed_fan_default_reaches_template_salt_and_agent(monkeypatch, tmp_path):
    monkeypatch.setitem(ccc_fan_config.DEFAULTS, "window", 7)
    monkeypatch.setitem(ccc_fan_config.DEFAULTS, "zones", [4])
    assert render("fan-controller.yaml.jinja", {})["window"] == 7
    with mock.patch.object(ccc_fans, "__pillar__", {}, create=True):
        assert ccc_fans.config()["zones"] == [4]
    agent_file = tmp_path / "fan-controller.yaml"
    agent_file.write_text("interpolate: true\n")  # what the agent reads when a key is left out
    loaded = ccc_fan_config.load_file(agent_file)
    assert (loaded["window"], loaded["zones"], loaded["interpolate"]) == (7, [4], True)


def test_the_exporter_template_writes_the_module_defaults_and_the_node_endpoint():
    rendered = render("gpu-exporter.yaml.jinja", {"ccc": {"node": {"docker_url": "unix:///srv/n.sock"}}})
    expected = {key: ccc_exporter_config.DEFAULTS[key] for key in ccc_exporter_config.PILLAR_KEYS}
    assert rendered == dict(expected, docker_url="unix:///srv/n.sock")
    assert "proc_root" not in rendered  # a test hook, never set from pillar


@pytest.mark.parametrize("exporter, problem", [
    ({"prot": 9500}, "unknown settings ['prot']"),
    ({"proc_root": "/tmp/proc"}, "unknown settings ['proc_root']"),
    ({"port": "9445"}, "port must be 0..65535, got '9445'"),
])
def test_an_unusable_exporter_pillar_fails_the_render_with_its_name(exporter, problem):
    with pytest.raises(CommandExecutionError) as caught:
        render("gpu-exporter.yaml.jinja", {"ccc": {"monitoring": {"gpu_exporter": exporter}}})
    assert str(caught.value).startswith("ccc:monitoring:gpu_exporter: ") and problem in str(caught.value)


# --------------------------------------------------------------------------------------------
# End to end: a default changed in _utils/ reaches the running agents and salt-call


def change(path, old, new):
    """Replace ``old``, written exactly once in ``path``, by ``new``."""
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} is not written exactly once in {path.name}"
    path.write_text(text.replace(old, new))


def run_fan_agent(lib, tmp_path):
    """The fan controller on ``lib`` in a dry run; returns the zones of its first decision."""
    state_file = tmp_path / "run" / "state.json"
    config = tmp_path / "fan-controller.yaml"
    config.write_text(yaml.safe_dump({"state_file": str(state_file), "interval": 0.05}))
    proc = subprocess.Popen([sys.executable, str(FAN_AGENT), "--config", str(config), "--dry-run"],
                            env=dict(os.environ, PYTHONPATH=str(lib)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        zones = wait_for(lambda: (read_state(state_file) or {}).get("zones"), timeout=30, proc=proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    return sorted(zones)


def scrape_exporter(lib, port, tmp_path):
    """The exporter on ``lib`` with a file that sets nothing but the fan state file, scraped on
    127.0.0.1:``port`` (where only the changed defaults make it listen)."""
    config = tmp_path / "gpu-exporter.yaml"
    config.write_text(yaml.safe_dump({"fan_state_file": str(tmp_path / "none.json")}))
    proc = subprocess.Popen([sys.executable, str(EXPORTER), "--config", str(config)],
                            env=dict(os.environ, PYTHONPATH=str(lib)), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        return wait_for(lambda: _scrape(port), timeout=30, proc=proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def _scrape(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            return response.read().decode()
    except OSError:
        return None


def test_a_default_changed_in_utils_reaches_the_agents_and_salt_call(tmp_path):
    from support.site import SaltNode, network_overrides

    port = free_port()
    lib = tmp_path / "lib"
    shutil.copytree(REPO / "_utils", lib, ignore=shutil.ignore_patterns("__pycache__"))
    change(lib / "ccc_fan_config.py", '"zones": [2, 3],', '"zones": [4],')
    change(lib / "ccc_exporter_config.py", '"port": 9445,', f'"port": {port},')

    # The agents: the changed defaults, through PYTHONPATH only.
    assert run_fan_agent(lib, tmp_path) == ["4"]
    assert "ccc_gpu_exporter_scrape_duration_seconds" in scrape_exporter(lib, port, tmp_path)

    # salt-call: the minion's synced _utils/ replaced by the changed copy.
    node = SaltNode(tmp_path / "salt", "node3", "unix:///srv/node3.sock", tmp_path / "storage")
    synced = node.config_dir / "var" / "cache" / "extmods" / "utils"
    for name in ("ccc_fan_config.py", "ccc_exporter_config.py"):
        assert (synced / name).read_text() == (REPO / "_utils" / name).read_text()
        shutil.copyfile(lib / name, synced / name)
    fans, _ = node.salt_call("ccc_fans.config")
    assert fans["zones"] == [4]
    rendered, _ = node.salt_call("slsutil.renderer", f"path={TEMPLATES / 'fan-controller.yaml.jinja'}",
                                 "default_renderer=jinja")
    assert yaml.safe_load(rendered)["zones"] == [4]
    exporter, _ = node.salt_call("ccc_gpu.exporter_config")
    # The sample publishes metrics on student-restricted: the exporter listens on its gateway.
    gateway = network_overrides("node3")["student-restricted"]["gateway"]
    assert (exporter["listen_address"], exporter["port"], exporter["docker_url"]) == (
        gateway, port, "unix:///srv/node3.sock")

    # Every public function of the agents' execution modules is a CLI command whose example calls it.
    doc, _ = node.salt_call("sys.doc", "ccc_fans", "ccc_gpu")
    assert sorted(doc) == sorted(f"ccc_fans.{name}" for name in ("config", "controller_config", "curve", "duty_for",
                                                                 "load_config_file", "normalize_curve", "status")) \
        + sorted(f"ccc_gpu.{name}" for name in ("container_of_pid", "devices", "exporter_config", "processes"))
    for function, text in doc.items():
        assert f"salt-call {function}" in text, function
