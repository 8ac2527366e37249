"""The superfan_gpu role applied for real on a systemd test node (tests/support/sysnode.py): the
agents installed from the Salt file server into /opt/ccc-agents (venv from the node's apt and an
offline wheel), the fan controller running as the systemd service ccc-fan-controller and driving
the BMC, restarted on a configuration change, back after a reboot, and removed by the role's
clean with the BMC fan mode restored.

FAKES, each at the narrowest boundary; everything above them is the real code:

* **The BMC**: a recording fake ``ipmitool`` (a shell script written by this test at FAKE_IPMITOOL,
  the path pillar ``ccc:fans:ipmitool`` points the controller at; Debian's real ipmitool is
  installed by the role but has no BMC to talk to in a container). It appends its arguments to
  ``calls.log`` and keeps the fan mode byte in ``mode`` (``raw 0x30 0x45 0x00`` answers it,
  ``raw 0x30 0x45 0x01 <mode>`` stores it, as the Supermicro BMC does), both in BMC_DIR under
  ``/dev/shm``: the unit's sandbox (``ProtectSystem=strict``) leaves only API file systems
  writable, and /dev/shm starts empty at every boot like a BMC's volatile state would not, so
  the fake recreates its files (mode ``02``, optimal) when missing.
* **No GPU, no NVML library**: the node has no ``libnvidia-ml.so.1``, so the real ``pynvml``
  (nvidia-ml-py from the wheel) fails and the controller runs fail-safe: every configured zone
  at 100 % (``0x64``). That is the controller's real behaviour without readable temperatures.
* **The kernel module**: a test node cannot load ``ipmi_devintf`` (the host's ``/lib/modules``
  is not in it, and loading into the host kernel is not the test's business). The role reports
  that as one failed state with a clear message; the test checks that message and the
  modules-load file that loads it at boot (systemd-modules-load itself is masked in nodes).
"""

import json
import time

import pytest
import yaml

from nodes.agents_support import wheel_pillar
from support import site  # noqa: F401  (puts _utils on sys.path)

import ccc_agents

pytestmark = pytest.mark.docker

BMC_DIR = "/dev/shm/ccc-fake-bmc"
FAKE_IPMITOOL = "/usr/local/lib/ccc-fake-bmc/ipmitool"
FAKE_SCRIPT = f"""#!/bin/sh
# FAKE ipmitool of tests/nodes/test_superfan_gpu.py: records its arguments, keeps the fan mode.
dir={BMC_DIR}
mkdir -p "$dir"
[ -f "$dir/mode" ] || echo 02 >"$dir/mode"
echo "$*" >>"$dir/calls.log"
case "$*" in
  "raw 0x30 0x45 0x00") printf ' %s\\n' "$(cat "$dir/mode")" ;;
  "raw 0x30 0x45 0x01 "*) set -- $*; printf '%s\\n' "${{5#0x}}" >"$dir/mode" ;;
esac
"""
UNIT = "ccc-fan-controller"
FILES = ("/etc/systemd/system/ccc-fan-controller.service", "/etc/ccc/fan-controller.yaml",
         "/etc/modules-load.d/ccc-ipmi.conf")
MODULE_STATE = "ccc-cluster-superfan_gpu-module-ipmi_devintf"
FULL, RESTORE = "raw 0x30 0x45 0x01 0x01", "raw 0x30 0x45 0x01 0x02"


def zone(number, duty):
    return f"raw 0x30 0x70 0x66 0x01 0x{number:02x} 0x{duty:02x}"


def sh(node, command):
    result = node.exec(command, check=False)
    return result.stdout.strip()


def write_pillar(node, fans, role=True, agents=None):
    pillar = {"ccc": {"roles": {"superfan_gpu": role}, "only_roles": "superfan_gpu",
                      "fans": dict({"ipmitool": FAKE_IPMITOOL, "full_mode": True, "interval": 1}, **fans),
                      "agents": agents or node.agents_pillar}}
    node.write_pillar("site/nodes/fans1.sls", json.dumps(pillar))


def apply(node):
    call = node.salt_call("state.apply", "cluster", check=False)
    return call.states()


def problems(states):
    """States that failed, except the kernel module a test node cannot load (module docstring)."""
    return {key: state["comment"] for key, state in states.items() if state["result"] is not True and key != MODULE_STATE}


def calls(node):
    return sh(node, f"cat {BMC_DIR}/calls.log 2>/dev/null").splitlines()


def wait_calls(node, wanted, since=0, timeout=30):
    """The fake BMC's calls after the first ``since`` once every line of ``wanted`` is among them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = calls(node)[since:]
        if all(line in seen for line in wanted):
            return seen
        time.sleep(0.3)
    journal = sh(node, f"journalctl -u {UNIT} -n 30 --no-pager")
    raise AssertionError(f"the controller never sent {wanted}; calls {calls(node)}\n{journal}")


def invocation(node):
    return sh(node, f"systemctl show -p InvocationID --value {UNIT}")


@pytest.fixture(scope="module")
def node(sysnodes):
    made = sysnodes("fans1")
    made.add_apt_source()
    made.agents_pillar = wheel_pillar(made)
    made.write_file(FAKE_IPMITOOL, FAKE_SCRIPT, mode="0755")
    write_pillar(made, {})
    made.salt_call("saltutil.sync_all")
    return made


@pytest.fixture(scope="module")
def first(node):
    return apply(node)


def test_role_installs_the_agents_and_runs_the_controller(node, first):
    assert problems(first) == {}
    module = first[MODULE_STATE]
    if module["result"] is not True:  # no loadable ipmi_devintf in a test node: said plainly
        stderr = module["changes"].get("stderr", "")
        assert "cannot load the kernel module ipmi_devintf: without it the fan controller has no /dev/ipmi0" in stderr
    assert sh(node, "cat /etc/modules-load.d/ccc-ipmi.conf").splitlines()[-1] == "ipmi_devintf"
    assert sh(node, "dpkg-query -W -f '${Status}' ipmitool") == "install ok installed"
    # the agents: code, exactly the library their imports need, a venv that imports every dependency
    assert sh(node, "stat -c '%a' /opt/ccc-agents/bin/ccc_fan_controller.py") == "755"
    expected = sorted(f"{name}.py" for name in ccc_agents.library(
        {p.name: p.read_text() for p in (site.REPO / "agents").glob("*.py")},
        lambda name: (site.REPO / "_utils" / f"{name}.py").read_text() if (site.REPO / "_utils" / f"{name}.py").exists() else None))
    assert sh(node, "ls /opt/ccc-agents/lib").split() == expected
    assert sh(node, "/opt/ccc-agents/venv/bin/python -c 'import pynvml, yaml, prometheus_client, docker; "
                    "print(pynvml.__file__.startswith(\"/opt/ccc-agents/venv/\"))'") == "True"
    config = yaml.safe_load(sh(node, "cat /etc/ccc/fan-controller.yaml"))
    assert (config["ipmitool"], config["full_mode"], config["zones"]) == (FAKE_IPMITOOL, True, [2, 3])
    assert "packages" not in config and "kernel_modules" not in config  # role keys stay out of the agent's file
    assert sh(node, f"systemctl is-enabled {UNIT}; systemctl is-active {UNIT}").split() == ["enabled", "active"]
    assert "ExecStart={ path=/opt/ccc-agents/venv/bin/python" in sh(node, f"systemctl show -p ExecStart {UNIT}")
    seen = wait_calls(node, ["raw 0x30 0x45 0x00", FULL, zone(2, 100), zone(3, 100)])
    assert seen.index(FULL) < seen.index(zone(2, 100))  # Full mode first, then the fail-safe duty
    status = node.salt_call("ccc_fans.status").data
    assert status["stale"] is False and status["problem"].startswith("FAIL-SAFE: fans at 100 %"), status
    assert status["state"]["zones"] == {"2": 100, "3": 100}, status


def test_second_apply_changes_nothing(node, first):
    again = apply(node)
    assert problems(again) == {}
    assert {key: state["changes"] for key, state in again.items() if state["changes"] and key != MODULE_STATE} == {}


def test_configuration_change_restarts_the_controller(node, first):
    before, seen = invocation(node), len(calls(node))
    write_pillar(node, {"zones": [1]})
    states = apply(node)
    assert problems(states) == {}
    assert states["ccc-cluster-superfan_gpu-config"]["changes"] and states["ccc-cluster-superfan_gpu-service"]["changes"]
    assert invocation(node) != before
    new = wait_calls(node, [RESTORE, zone(1, 100)], since=seen)
    assert new.index(RESTORE) < new.index(zone(1, 100))  # the old one gave the mode back before the new one ran
    assert zone(2, 100) not in new[new.index(RESTORE):]


def test_controller_comes_back_after_a_reboot(node, first):
    node.restart()
    assert sh(node, f"systemctl is-active {UNIT}") == "active"
    wait_calls(node, ["raw 0x30 0x45 0x00", FULL, zone(1, 100)])  # /dev/shm is empty after a boot: all new


def test_role_absent_stops_the_controller_restores_the_mode_and_removes_its_files(node, first):
    assert sh(node, f"cat {BMC_DIR}/mode") == "01"  # Full while it runs
    write_pillar(node, {"zones": [1]}, role="absent")
    states = apply(node)
    assert {key: state["comment"] for key, state in states.items() if state["result"] is not True} == {}
    assert "ccc-cluster-superfan_gpu-clean-service" in states
    assert sh(node, f"systemctl is-active {UNIT}") in ("inactive", "unknown")
    assert calls(node)[-1] == RESTORE and sh(node, f"cat {BMC_DIR}/mode") == "02"
    assert sh(node, "ls " + " ".join(FILES) + " /opt/ccc-agents 2>&1 | grep -c 'No such file'") == str(len(FILES) + 1)
    assert sh(node, "dpkg-query -W -f '${Status}' ipmitool") == "install ok installed"  # kept
    assert problems(apply(node)) == {}  # cleaning again is a no-op that still succeeds
