"""How the node agents reach a node (``_utils/ccc_agents.py``, ``_modules/ccc_agents.py``): the
library they get is computed from their imports, and that library is enough to run them; and the
superfan_gpu role's own keys (``salt/cluster/superfan_gpu/defaults.yaml``) versus the controller's
(``ccc_fan_config``): one source of truth for each, and the retired ``ccc:fans:enabled`` named."""

import shutil
import subprocess
import sys

import pytest
import yaml

import support.site  # noqa: F401  (puts _utils on the path)
from support.scripts import REPO, load_module

import ccc_agents  # noqa: E402
import ccc_fan_config  # noqa: E402
import ccc_role_schema  # noqa: E402
import ccc_superfan_gpu  # noqa: E402

AGENTS = {path.name: path.read_text() for path in (REPO / "agents").glob("*.py")}


def read_utils(name):
    path = REPO / "_utils" / f"{name}.py"
    return path.read_text() if path.exists() else None


def test_imports_are_found_anywhere_in_a_file_and_relative_ones_ignored():
    source = "import os, ccc_a.sub\nfrom ccc_b import x\nfrom . import y\ndef f():\n    import ccc_c\n"
    assert ccc_agents.imported_names(source) == {"os", "ccc_a", "ccc_b", "ccc_c"}


def test_library_follows_imports_through_the_library_and_skips_other_packages():
    modules = {"ccc_a": "import ccc_b\nimport yaml\n", "ccc_b": "import ccc_a\n", "ccc_unused": ""}
    assert ccc_agents.library({"agent.py": "import ccc_a, pynvml, sys\n"}, modules.get) == ["ccc_a", "ccc_b"]


def test_library_of_a_broken_agent_names_the_file():
    with pytest.raises(SyntaxError) as caught:
        ccc_agents.library({"bad_agent.py": "import (\n"}, read_utils)
    assert caught.value.filename == "bad_agent.py"


def test_agent_files_and_the_include_pattern():
    paths = ["agents/a.py", "agents/config/x.jinja", "agents/systemd/a.service", "agents/b.py", "agents/c.sh"]
    assert ccc_agents.agent_files(paths) == ["a.py", "b.py"]
    assert ccc_agents.include_pattern(["ccc_b", "ccc_a"]) == r"E@^(ccc_a|ccc_b)\.py$"
    with pytest.raises(ValueError, match="nothing to install"):
        ccc_agents.include_pattern([])


def run_agent(agent, lib):
    return subprocess.run([sys.executable, str(REPO / "agents" / agent), "--help"], env={"PYTHONPATH": str(lib)},
                          capture_output=True, text=True, cwd=lib)


def test_the_computed_library_is_enough_to_run_every_agent(tmp_path):
    """Each agent starts (``--help``) with PYTHONPATH holding only the computed modules, as on a
    node; with an empty folder it cannot (so the folder, not some other path, provides them)."""
    lib = tmp_path / "lib"
    lib.mkdir()
    for agent in AGENTS:
        assert "ModuleNotFoundError: No module named 'ccc_" in run_agent(agent, lib).stderr
    names = ccc_agents.library(AGENTS, read_utils)
    assert {"ccc_fan_config", "ccc_fan_control", "ccc_ipmi", "ccc_nvml", "ccc_exporter_config"} <= set(names)
    for name in names:
        shutil.copy(REPO / "_utils" / f"{name}.py", lib / f"{name}.py")
    for agent in AGENTS:
        ran = run_agent(agent, lib)
        assert ran.returncode == 0 and "usage:" in ran.stdout, f"{agent}: {ran.stderr[-2000:]}"


def test_execution_module_reads_the_file_server(tmp_path):
    files = {f"agents/{name}": text for name, text in AGENTS.items()}
    files.update({f"_utils/{path.name}": path.read_text() for path in (REPO / "_utils").glob("*.py")})
    salt = {"cp.list_master": lambda prefix="": sorted(p for p in files if p.startswith(prefix)),
            "cp.get_file_str": lambda url: files.get(url[len("salt://"):], False)}
    module = load_module("_modules/ccc_agents.py", "ccc_agents_module", salt=salt)
    assert module.agents() == sorted(AGENTS)
    assert module.library() == ccc_agents.library(AGENTS, read_utils)
    assert module.library_pattern().startswith("E@^(ccc_container_metrics|ccc_exporter_config|ccc_fan_config|")
    salt["cp.list_master"] = lambda prefix="": []
    from salt.exceptions import CommandExecutionError
    with pytest.raises(CommandExecutionError, match="salt/agents link"):
        module.agents()


def test_role_defaults_hold_only_the_role_keys_and_the_controller_ignores_them():
    defaults = yaml.safe_load((REPO / "salt" / "cluster" / "superfan_gpu" / "defaults.yaml").read_text())
    assert set(defaults) == {"superfan_gpu"}
    assert sorted(defaults["superfan_gpu"]) == sorted(ccc_fan_config.ROLE_KEYS)
    assert not set(defaults["superfan_gpu"]) & set(ccc_fan_config.DEFAULTS)  # no agent default repeated
    config = ccc_fan_config.controller_config(dict(defaults["superfan_gpu"], zones=[1]))
    assert config["zones"] == [1] and not set(config) & set(ccc_fan_config.ROLE_KEYS)


def test_the_old_enabled_switch_is_refused_with_where_it_went():
    with pytest.raises(ccc_fan_config.ConfigError, match="'enabled' is no longer a key: the role's switch is ccc:roles:superfan_gpu"):
        ccc_fan_config.controller_config({"enabled": True})


def test_services_for_status():
    assert ccc_superfan_gpu.services({"zones": [2]}, "node2") == [
        {"kind": "unit", "name": "ccc-fan-controller.service", "role": "superfan_gpu"}]


def test_role_keys_are_checked_before_they_reach_a_shell_command():
    defaults = yaml.safe_load((REPO / "salt" / "cluster" / "superfan_gpu" / "defaults.yaml").read_text())
    schema = yaml.safe_load((REPO / "salt" / "cluster" / "superfan_gpu" / "schema.yaml").read_text())
    assert ccc_role_schema.problems("superfan_gpu", defaults["superfan_gpu"], schema) == []
    wrong = {"packages": "ipmitool", "kernel_modules": ["ipmi_si", "x; reboot", 3]}
    assert ccc_role_schema.problems("superfan_gpu", wrong, schema) == [
        "ccc:fans:packages must be a list, got 'ipmitool'",
        "ccc:fans:kernel_modules: 'x; reboot' is not a kernel module name (letters, digits, _ and -)",
        "ccc:fans:kernel_modules: 3 is not a kernel module name (letters, digits, _ and -)"]
