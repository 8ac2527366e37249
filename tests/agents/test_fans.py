"""Fan control: the library in ``_utils/`` (``ccc_fan_curve``, ``ccc_fan_config``,
``ccc_fan_control``, ``ccc_ipmi``, ``ccc_fan_state``: curve, hysteresis, fail-safe, IPMI), the
service ``agents/ccc_fan_controller.py`` (signals, exit status, mode restore) and the execution
module ``_modules/ccc_fans.py``.

The fakes are FAKES, each at the narrowest hardware boundary; everything above them is the real
code:

* the BMC: a fake ``ipmitool`` executable that the test writes into ``tmp_path`` and puts first
  on ``PATH``. The controller runs it as a real subprocess. It appends its argv to ``calls.log``,
  answers ``raw 0x30 0x45 0x00`` with the mode byte in its ``mode`` file (and stores the byte
  of ``raw 0x30 0x45 0x01 <mode>`` there, as a BMC would), and fails (exit 1, ipmitool's
  message) while its ``fail`` file holds a non-zero count (``-1``: always).
* NVML: ``FakeNvml`` (``tests/agents/fake_nvml.py``), a fake of the ``pynvml`` module, read
  through the real ``ccc_nvml.read_temperatures``. For the service started as a subprocess,
  ``PYTHONPATH`` is a temporary folder, then ``_utils/`` (the real library, as installed): the
  folder holds only a FAKE ``ccc_nvml.py``, the real ``_utils/ccc_nvml.py`` with ``load_nvml``
  handing out a ``FakeNvml`` whose temperatures come from a JSON file.
* time: the controller's ``step`` is driven with a fake monotonic clock and a recorded
  ``sleep`` for the IPMI backoff; only the service tests wait for real (milliseconds).
"""

import json
import logging
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

import pynvml
import pytest
import yaml

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import ccc_fan_config
import ccc_fan_control
import ccc_fan_curve
import ccc_fans
import ccc_ipmi
import ccc_nvml
from support.scripts import load_agent
from agent_run import read_state, wait_for
from fake_nvml import FakeNvml

# ccc_fans imports salt.exceptions; importing Salt while logging is unconfigured puts Salt's
# deferred stderr handler on the root logger, which replays every warning at interpreter exit
# onto pytest's already closed capture stream. These tests read logs through caplog.
try:
    from salt._logging.impl import shutdown_temp_handler
except ImportError:  # pragma: no cover
    pass
else:
    shutdown_temp_handler()

AGENT = REPO / "agents" / "ccc_fan_controller.py"
GET_MODE = "raw 0x30 0x45 0x00"


agent = load_agent("ccc_fan_controller.py")


def zone(zone_number, duty):
    """The fake ipmitool's log line for 'set zone duty'."""
    return f"raw 0x30 0x70 0x66 0x01 0x{zone_number:02x} 0x{duty:02x}"


def set_mode(mode):
    return f"raw 0x30 0x45 0x01 0x{mode:02x}"


# --------------------------------------------------------------------------------------------
# Fakes and rig


FAKE_IPMITOOL = '''#!{python} -S
"""FAKE ipmitool written by tests/agents/test_fans.py: stands in for the BMC; see the test module."""
import os, sys
here = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
with open(os.path.join(here, "calls.log"), "a") as log:
    log.write(" ".join(args) + "\\n")
fail_file = os.path.join(here, "fail")
try:
    with open(fail_file) as handle:
        failures = int(handle.read().strip() or 0)
except FileNotFoundError:
    failures = 0
if failures:
    if failures > 0:
        with open(fail_file, "w") as handle:
            handle.write(str(failures - 1))
    sys.stderr.write("Unable to send RAW command (channel=0x0 netfn=0x30 lun=0x0 cmd=0x70): Timeout\\n")
    sys.exit(1)
mode_file = os.path.join(here, "mode")
if args[:4] == ["raw", "0x30", "0x45", "0x00"]:
    with open(mode_file) as handle:
        print(" " + handle.read().strip())
elif args[:4] == ["raw", "0x30", "0x45", "0x01"] and len(args) == 5:
    with open(mode_file, "w") as handle:
        handle.write("%02x" % int(args[4], 16))
'''


class FakeIpmitool:
    """The fake ipmitool executable (see the module docstring) and its files."""

    def __init__(self, directory):
        self.dir = pathlib.Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "ipmitool"
        self.path.write_text(FAKE_IPMITOOL.format(python=sys.executable))
        self.path.chmod(0o755)
        self.log = self.dir / "calls.log"
        self.mode = "02"  # optimal
        self._seen = 0

    @property
    def mode(self):
        return (self.dir / "mode").read_text().strip()

    @mode.setter
    def mode(self, value):
        (self.dir / "mode").write_text(value)

    def fail(self, times):
        """Fail the next ``times`` calls (-1: every call, 0: none)."""
        (self.dir / "fail").write_text(str(times))

    def calls(self):
        return self.log.read_text().splitlines() if self.log.exists() else []

    def new_calls(self):
        """Calls since the previous ``new_calls``."""
        calls = self.calls()
        fresh, self._seen = calls[self._seen:], len(calls)
        return fresh


@pytest.fixture
def ipmitool(tmp_path, monkeypatch):
    fake = FakeIpmitool(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{fake.dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return fake


class FakeClock:
    def __init__(self):
        self.now = 5000.0

    def __call__(self):
        return self.now


class Rig:
    """A Controller over FakeNvml (through the real ccc_nvml) and the fake ipmitool on PATH."""

    def __init__(self, tmp_path, gpus=2, temperature=40, **settings):
        self.nvml = FakeNvml(gpus=[{"temperature": temperature} for _ in range(gpus)])
        self.nvml.nvmlInit()
        self.clock = FakeClock()
        self.sleeps = []
        self.state_file = tmp_path / "run" / "state.json"
        self.config = ccc_fan_config.controller_config(dict({"state_file": str(self.state_file)}, **settings))
        self.ipmi = ccc_ipmi.SupermicroIpmi.from_config(self.config, sleep=self.sleeps.append)
        self.controller = ccc_fan_control.Controller(
            self.config, lambda: ccc_nvml.read_temperatures(self.nvml), ipmi=self.ipmi, clock=self.clock,
            wall_clock=lambda: 1_700_000_000.0 + self.clock.now)

    def temperatures(self, *celsius):
        """Set the GPUs' temperatures (one value: every GPU)."""
        values = celsius * len(self.nvml.gpus) if len(celsius) == 1 else celsius
        for gpu, value in zip(self.nvml.gpus, values):
            gpu["temperature"] = value

    def step(self, after=2.0):
        """Advance the fake clock by ``after`` seconds and make one controller step."""
        self.clock.now += after
        return self.controller.step()

    def state(self):
        return json.loads(self.state_file.read_text())


@pytest.fixture
def rig(tmp_path, ipmitool):
    def make(**settings):
        # Re-sending the applied duty every 30 s would add lines to the tests that wait for
        # minutes; it has its own test.
        settings.setdefault("reassert_interval", 0)
        made = Rig(tmp_path, **settings)
        made.controller.start()
        assert ipmitool.new_calls() == [GET_MODE]
        return made
    return make


# --------------------------------------------------------------------------------------------
# Curve and configuration


ROLE_CURVE = {0: 20, 60: 30, 65: 35, 70: 40, 80: 45, 90: 50}


@pytest.mark.parametrize("temperature, duty", [
    (0, 20), (35.5, 20), (59.9, 20), (60, 30), (64, 30), (65, 35), (79.99, 40), (80, 45), (90, 50), (105, 50),
])
def test_step_curve_takes_the_largest_threshold_at_or_below(temperature, duty):
    assert ccc_fan_curve.duty_for(ROLE_CURVE, temperature) == duty
    assert ccc_fan_curve.duty_for({str(k): v for k, v in ROLE_CURVE.items()}, temperature) == duty


@pytest.mark.parametrize("temperature, duty", [
    (0, 20), (30, 25), (59, 30), (60, 30), (62.5, 35), (66, 42), (70, 50), (71, 52), (79, 68), (80, 70), (99, 70),
])
def test_interpolated_curve_is_linear_between_points_and_rounds_up(temperature, duty):
    curve = {"0": 20, "60": 30, "70": 50, "80": 70}
    # 30 °C: 20 + 10*30/60 = 25; 62.5: 30 + 20*2.5/10 = 35; 66: 42; 71: 52; 79: 68; flat above 80.
    assert ccc_fan_curve.duty_for(curve, temperature, interpolate=True) == duty
    # 61 °C: 32 exactly; 60.1 °C: 30.2 -> 31 (rounded up: never less air than the line)
    assert ccc_fan_curve.duty_for(curve, 60.1, interpolate=True) == 31


@pytest.mark.parametrize("curve, message", [
    ({}, "the curve has no points"),
    ({20: 20, 60: 40}, "the lowest point is 20 °C: the curve needs a point at 0 °C or below"),
    ({0: 20, 60: 120}, "duty 120 at 60 °C is not a percentage between 0 and 100"),
    ({0: 10}, "duty 10 % at 0 °C is below the minimum duty 20 %"),
    ({0: 40, 60: 30}, "duty falls from 40 % at 0 °C to 30 % at 60 °C"),
    ({0: 20, "hot": 30}, "temperature 'hot' is not a number of °C"),
    ({0: 20, True: 30}, "temperature True is not a number"),
    ({0: 20, "60": 30, 60: 35}, "temperature 60 °C appears twice"),
    ({0: 20, 60: "loud"}, "duty 'loud' at 60 °C is not a percentage"),
    ([20, 30], "expected a mapping of temperature (°C) to duty (%)"),
])
def test_curve_validation_names_the_problem(curve, message):
    with pytest.raises(ccc_fan_curve.CurveError) as caught:
        ccc_fan_curve.normalize(curve, ccc_fan_config.DEFAULTS["min_duty"])
    assert message in str(caught.value)
    assert str(caught.value).startswith("invalid fan curve: ")


def test_normalized_curve_is_sorted_and_numeric_and_min_duty_is_configurable():
    assert list(ccc_fan_curve.normalize({"90": 50, "0": 20, "60.5": 30}).items()) == [(0, 20), (60.5, 30), (90, 50)]
    assert ccc_fan_curve.normalize({0: 10, 50: 15}, min_duty=10) == {0: 10, 50: 15}
    assert ccc_fan_config.controller_config({"curve": {0: 10}, "min_duty": 10})["curve"] == {0: 10}


def test_configuration_defaults_follow_the_original_controller():
    # the role's own keys (salt/cluster/superfan_gpu/defaults.yaml) are ignored here
    config = ccc_fan_config.controller_config({"packages": ["ipmitool"], "kernel_modules": ["ipmi_devintf"]})
    assert config["curve"] == ROLE_CURVE  # ccc-ansible-behaviour.md §1.8 role default
    assert config["zones"] == [2, 3]
    assert (config["interval"], config["window"], config["tolerance"], config["decrease_delay"]) == (2, 5, 2, 120)
    assert config["interpolate"] is False and config["full_mode"] is False and config["dry_run"] is False
    assert config["state_file"] == "/run/ccc-fan-controller/state.json"


def test_configuration_errors_are_all_named():
    with pytest.raises(ccc_fan_config.ConfigError) as caught:
        ccc_fan_config.controller_config({"zones": [2, 2, 300], "interval": 0, "window": 2.5, "interpolate": "yes",
                                    "decrease_dealy": 60, "curve": {10: 30}, "state_file": "state.json"})
    message = str(caught.value)
    for part in ("unknown key 'decrease_dealy'", "zone 2 is listed twice", "zone 300 is not a zone number",
                 "interval must be a number > 0", "window must be an integer", "interpolate must be true or false",
                 "needs a point at 0 °C or below", "state_file must be an absolute path"):
        assert part in message


# --------------------------------------------------------------------------------------------
# Control loop


def test_heating_raises_every_zone_at_once_with_the_supermicro_raw_bytes(rig, ipmitool):
    fans = rig(window=1)
    fans.step()
    assert ipmitool.new_calls() == ["raw 0x30 0x70 0x66 0x01 0x02 0x14", "raw 0x30 0x70 0x66 0x01 0x03 0x14"]
    fans.temperatures(95)
    fans.step()
    assert ipmitool.new_calls() == ["raw 0x30 0x70 0x66 0x01 0x02 0x32", "raw 0x30 0x70 0x66 0x01 0x03 0x32"]
    fans.temperatures(40, 81)  # one hot GPU is enough; down to 45 % is a decrease: it waits
    fans.step()
    assert ipmitool.new_calls() == []
    assert fans.state()["zones"] == {"2": 50, "3": 50}


def test_input_is_the_maximum_over_gpus_of_a_five_sample_average(rig, ipmitool):
    fans = rig()
    for _ in range(5):
        fans.step()
    assert ipmitool.new_calls() == [zone(2, 20), zone(3, 20)]
    fans.temperatures(40, 90)  # GPU 1 jumps; its average climbs 50, 60, 70, 80, 90
    seen = []
    for expected_duty in (None, 30, 40, 45, 50):
        state = fans.step()
        seen.append(state["max_temperature_c"])
        assert ipmitool.new_calls() == ([] if expected_duty is None else [zone(2, expected_duty), zone(3, expected_duty)])
    assert seen == [50.0, 60.0, 70.0, 80.0, 90.0]


def test_cooling_lowers_duty_only_after_the_delay_and_a_dip_restarts_the_wait(rig, ipmitool):
    fans = rig(window=1)
    fans.temperatures(85)
    fans.step()
    assert ipmitool.new_calls() == [zone(2, 45), zone(3, 45)]
    fans.temperatures(40)
    started = fans.clock.now + 2
    while fans.clock.now + 2 < started + 120:
        fans.step()
        assert ipmitool.new_calls() == []
    fans.step()  # the lower target has been wanted for 120 s
    assert fans.clock.now - started == 120
    assert ipmitool.new_calls() == [zone(2, 20), zone(3, 20)]

    fans.temperatures(85)
    fans.step()
    assert ipmitool.new_calls() == [zone(2, 45), zone(3, 45)]
    fans.temperatures(40)
    fans.step(after=60)  # lower target wanted from here ...
    fans.temperatures(85)
    fans.step()  # ... but it went away again,
    fans.temperatures(40)
    fans.step()  # so the 120 s start again here.
    fans.step(after=118)
    assert ipmitool.new_calls() == []
    fans.step(after=2)
    assert ipmitool.new_calls() == [zone(2, 20), zone(3, 20)]


def test_changes_within_the_tolerance_send_nothing(rig, ipmitool):
    fans = rig(window=1, interpolate=True, curve={0: 20, 40: 20, 80: 60})  # 1 % per °C above 40
    fans.temperatures(50)
    fans.step()
    assert ipmitool.new_calls() == [zone(2, 30), zone(3, 30)]
    for celsius in (51, 52, 48, 49):  # 31, 32, 28, 29 %: within 2 points of 30
        fans.temperatures(celsius)
        fans.step(after=125)  # even long after the decrease delay
        assert ipmitool.new_calls() == []
    fans.temperatures(53)
    fans.step()
    assert ipmitool.new_calls() == [zone(2, 33), zone(3, 33)]


def test_applied_duty_is_resent_after_the_reassert_interval(rig, ipmitool):
    fans = rig(reassert_interval=30)
    fans.step()
    assert ipmitool.new_calls() == [zone(2, 20), zone(3, 20)]
    fans.step(after=29)
    assert ipmitool.new_calls() == []
    fans.step(after=1)
    assert ipmitool.new_calls() == [zone(2, 20), zone(3, 20)]
    fans.step(after=29)
    assert ipmitool.new_calls() == []


def test_a_vanished_gpu_drives_every_zone_to_full_speed_until_it_is_back(rig, ipmitool, caplog):
    fans = rig(window=1)
    fans.step()
    ipmitool.new_calls()
    lost = fans.nvml.remove_gpu(1)
    with caplog.at_level(logging.ERROR, logger="ccc_fan_control"):
        state = fans.step()
    assert ipmitool.new_calls() == ["raw 0x30 0x70 0x66 0x01 0x02 0x64", "raw 0x30 0x70 0x66 0x01 0x03 0x64"]
    assert state["failsafe"] is True and state["max_temperature_c"] is None
    assert state["zones"] == {"2": 100, "3": 100}
    assert f"FAIL-SAFE: GPU(s) disappeared: {lost['uuid']}" in caplog.text
    fans.step(after=300)
    assert ipmitool.new_calls() == []  # already at 100 %
    assert fans.state()["failsafe"] is True

    fans.nvml.gpus.append(lost)
    state = fans.step()
    assert state["failsafe"] is False and state["max_temperature_c"] == 40.0
    assert ipmitool.new_calls() == []  # back to the curve: a decrease, so after the delay
    fans.step(after=120)
    assert ipmitool.new_calls() == [zone(2, 20), zone(3, 20)]


def test_nvml_failing_drives_full_speed_and_recovers(rig, ipmitool, caplog):
    fans = rig(window=1)
    fans.step()
    ipmitool.new_calls()
    fans.nvml.fail_with = pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)
    state = fans.step()
    assert ipmitool.new_calls() == [zone(2, 100), zone(3, 100)]
    assert state["failsafe"] is True
    assert "FAIL-SAFE: GPU temperatures unreadable: GpuReadError" in caplog.text
    fans.nvml.fail_with = None
    fans.temperatures(91)
    state = fans.step()
    assert state["failsafe"] is False and state["max_temperature_c"] == 91.0
    fans.step(after=120)
    assert ipmitool.new_calls() == [zone(2, 50), zone(3, 50)]


@pytest.mark.parametrize("breakage", ["temperature not supported", "gpu lost", "no gpu"])
def test_unreadable_temperatures_drive_full_speed(rig, ipmitool, breakage):
    fans = rig(window=1, gpus=0 if breakage == "no gpu" else 2)
    if breakage == "temperature not supported":
        fans.nvml.gpus[0]["temperature"] = None
    elif breakage == "gpu lost":
        fans.nvml.lose_gpu(1)
    state = fans.step()
    assert ipmitool.new_calls() == [zone(2, 100), zone(3, 100)]
    assert state["failsafe"] is True


def test_the_services_nvml_reader_reinitialises_nvml_after_a_failure():
    """The agent's NvmlTemperatures over FakeNvml: NVML missing at start, later present."""
    nvml = FakeNvml(gpus=[{"temperature": 70}])
    nvml.init_error = pynvml.NVMLError_LibraryNotFound()
    reader = agent.NvmlTemperatures(nvml=nvml)
    with pytest.raises(ccc_nvml.NvmlUnavailable, match="NVML library not found"):
        reader()
    nvml.init_error = None
    assert reader() == {nvml.gpus[0]["uuid"]: 70}
    nvml.fail_with = pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
    with pytest.raises(ccc_nvml.GpuReadError):
        reader()
    assert reader.nvml is None
    nvml.fail_with = None
    assert reader() == {nvml.gpus[0]["uuid"]: 70}
    reader.close()
    assert nvml.initialized == 1  # the init after the failed one was released; the failed one could not be


def test_an_ipmitool_failure_is_retried_with_backoff_and_reported(rig, ipmitool, caplog):
    fans = rig(window=1)
    fans.step()
    ipmitool.new_calls()
    ipmitool.fail(2)
    fans.temperatures(70)
    with caplog.at_level(logging.WARNING):  # ccc_ipmi (attempts) and ccc_fan_control (steps)
        state = fans.step()
    assert ipmitool.new_calls() == [zone(2, 40)] * 3 + [zone(3, 40)]
    assert fans.sleeps == [0.5, 1.0]
    assert state["zones"] == {"2": 40, "3": 40}
    assert "ipmitool raw 0x30 0x70 0x66 0x01 0x02 0x28 failed (attempt 1 of 3): exit status 1: Unable to send RAW command" in caplog.text
    assert "succeeded on attempt 3" in caplog.text
    assert fans.ipmi.failed_attempts == 2 and fans.ipmi.failed_commands == 0

    ipmitool.fail(3)  # zone 2 fails all three attempts: reported, retried on the next step
    fans.temperatures(85)
    caplog.clear()
    state = fans.step()
    assert ipmitool.new_calls() == [zone(2, 45)] * 3 + [zone(3, 45)]
    assert state["zones"] == {"2": 40, "3": 45}
    assert "IPMI write failed (1 of 5 failing steps allowed in a row): zone 2: ipmitool raw" in caplog.text
    state = fans.step()
    assert ipmitool.new_calls() == [zone(2, 45)]
    assert state["zones"] == {"2": 45, "3": 45} and fans.controller.ipmi_failures == 0


def test_persistent_ipmi_failure_stops_the_controller_after_restoring_what_it_can(tmp_path, ipmitool, caplog):
    fans = Rig(tmp_path, window=1, max_ipmi_failures=3, ipmi_retry_delay=0.001, interval=0.001)
    calls = []
    real_step = fans.controller.step

    def step():
        calls.append(len(ipmitool.calls()))
        if len(calls) == 2:  # hotter, so every later step must write; the BMC stops answering
            fans.temperatures(85)
            ipmitool.fail(-1)
        assert len(calls) <= 4
        return real_step()

    fans.controller.step = step
    with pytest.raises(ccc_ipmi.IpmiUnavailable, match="IPMI failed in 3 steps in a row; giving up"):
        fans.controller.run(threading.Event())
    assert len(calls) == 4  # one good step, then three failing ones
    log = ipmitool.calls()
    assert log[0] == GET_MODE
    assert log[-3:] == [set_mode(2)] * 3  # the restore was tried (and failed: the BMC is gone)
    assert "could not restore the BMC fan mode optimal" in caplog.text


def test_full_mode_option_sets_full_and_restores_the_saved_mode(ipmitool):
    ipmitool.mode = "00"
    fans = Rig(ipmitool.dir.parent, full_mode=True)
    fans.controller.start()
    assert ipmitool.new_calls() == [GET_MODE, "raw 0x30 0x45 0x01 0x01"]
    assert fans.step()["mode"] == "full"
    fans.controller.restore()
    assert ipmitool.new_calls() == [zone(2, 20), zone(3, 20), "raw 0x30 0x45 0x01 0x00"]
    assert fans.state()["mode"] == "standard" and fans.state()["zones"] == {}


def test_dry_run_never_calls_ipmitool(tmp_path, ipmitool, caplog):
    fans = Rig(tmp_path, window=1, dry_run=True)
    with caplog.at_level(logging.INFO, logger="ccc_fan_control"):
        fans.controller.start()
        fans.step()
        fans.temperatures(95)
        fans.step()
        fans.nvml.fail_with = pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)
        state = fans.step()
        fans.controller.restore()
    assert ipmitool.calls() == [] and not ipmitool.log.exists()
    assert fans.controller.ipmi is None
    assert state == {"mode": "unknown", "failsafe": True, "max_temperature_c": None,
                     "zones": {"2": 100, "3": 100}, "updated": state["updated"]}
    assert "dry run: would set zone 2 from 50 % to 100 %" in caplog.text
    assert "dry run: would restore the BMC fan mode" in caplog.text


def test_state_file_has_exactly_the_documented_format(rig, ipmitool):
    fans = rig(window=1)
    fans.temperatures(61, 64)
    fans.step()
    state = fans.state()
    assert state == {"mode": "optimal", "failsafe": False, "max_temperature_c": 64.0,
                     "zones": {"2": 30, "3": 30}, "updated": 1_700_000_000.0 + fans.clock.now}
    assert isinstance(state["max_temperature_c"], float) and isinstance(state["updated"], float)
    assert (fans.state_file.stat().st_mode & 0o777) == 0o644
    assert sorted(p.name for p in fans.state_file.parent.iterdir()) == ["state.json"]  # no temporary left over
    fans.controller.restore()
    assert fans.state()["zones"] == {} and fans.state()["mode"] == "optimal"


# --------------------------------------------------------------------------------------------
# The service


def write_config(tmp_path, **settings):
    path = tmp_path / "fan-controller.yaml"
    config = {"interval": 0.02, "window": 1, "state_file": str(tmp_path / "run" / "state.json"),
              "ipmi_retry_delay": 0.01}
    config.update(settings)
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def root_log_level():
    level = logging.getLogger().level
    yield
    logging.getLogger().setLevel(level)


@pytest.mark.parametrize("dry_run", [False, True])
def test_service_main_restores_the_saved_mode_when_stopped(tmp_path, ipmitool, root_log_level, dry_run):
    nvml = FakeNvml(gpus=[{"temperature": 66}, {"temperature": 50}])
    config = write_config(tmp_path)
    stop = threading.Event()
    result = {}
    argv = ["--config", str(config)] + (["--dry-run"] if dry_run else [])
    thread = threading.Thread(target=lambda: result.setdefault(
        "rc", agent.main(argv, read_temperatures=agent.NvmlTemperatures(nvml=nvml), stop_event=stop)))
    thread.start()
    try:
        wait_for(lambda: (read_state(tmp_path / "run" / "state.json") or {}).get("zones"))
    finally:
        stop.set()
        thread.join(10)
    assert result["rc"] == 0
    state = read_state(tmp_path / "run" / "state.json")
    assert state["zones"] == {} and state["failsafe"] is False
    if dry_run:
        assert ipmitool.calls() == [] and state["mode"] == "unknown"
    else:
        calls = ipmitool.calls()
        assert calls[:3] == [GET_MODE, zone(2, 35), zone(3, 35)]
        assert calls[-1] == "raw 0x30 0x45 0x01 0x02" and calls.count(set_mode(2)) == 1
        assert state["mode"] == "optimal"
    assert nvml.initialized == 0  # NVML released on exit


FAKE_CCC_NVML = '''"""FAKE ccc_nvml for the service test (written by tests/agents/test_fans.py): the real
_utils/ccc_nvml.py, except that load_nvml hands out a FakeNvml (tests/agents/fake_nvml.py) whose
temperatures are re-read from the JSON file $FAKE_GPU_TEMPERATURES ({{uuid: °C}}) on every reading."""
import importlib.util, json, os
from fake_nvml import FakeNvml
_spec = importlib.util.spec_from_file_location("real_ccc_nvml", {real!r})
real = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(real)
GpuReadError, NvmlUnavailable, shutdown_nvml = real.GpuReadError, real.NvmlUnavailable, real.shutdown_nvml


def _temperatures():
    with open(os.environ["FAKE_GPU_TEMPERATURES"]) as handle:
        return json.load(handle)


def load_nvml(nvml=None):
    return real.load_nvml(FakeNvml(gpus=[{{"uuid": u, "temperature": t}} for u, t in _temperatures().items()]))


def read_temperatures(nvml):
    for gpu in nvml.gpus:
        gpu["temperature"] = _temperatures()[gpu["uuid"]]
    return real.read_temperatures(nvml)
'''


@pytest.fixture
def service(tmp_path, ipmitool):
    """Start agents/ccc_fan_controller.py as a subprocess with the fake ccc_nvml and ipmitool."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "ccc_nvml.py").write_text(FAKE_CCC_NVML.format(real=str(REPO / "_utils" / "ccc_nvml.py")))
    temperatures = tmp_path / "temperatures.json"
    temperatures.write_text(json.dumps({"GPU-fake-0000-a": 72, "GPU-fake-0000-b": 55}))
    # The fake first, then the real library as the unit installs it, then fake_nvml's folder.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(lib), str(REPO / "_utils"), str(HERE)]),
               FAKE_GPU_TEMPERATURES=str(temperatures))
    procs = []

    def start(**settings):
        config = write_config(tmp_path, **settings)
        proc = subprocess.Popen([sys.executable, str(AGENT), "--config", str(config)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_service_restores_the_saved_mode_on_a_signal(tmp_path, ipmitool, service, signum):
    proc = service()
    state_file = tmp_path / "run" / "state.json"
    wait_for(lambda: (read_state(state_file) or {}).get("zones"))
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0, stderr
    calls = ipmitool.calls()
    assert calls[:3] == [GET_MODE, zone(2, 40), zone(3, 40)]
    assert calls[-1] == "raw 0x30 0x45 0x01 0x02"
    assert f"{signal.Signals(signum).name} received" in stderr
    assert "BMC fan mode optimal restored" in stderr
    assert read_state(state_file)["zones"] == {}


def test_service_exits_non_zero_and_says_why_when_ipmi_is_unusable(tmp_path, ipmitool, service):
    ipmitool.fail(-1)
    proc = service()
    _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 3
    assert "stopping, IPMI unusable: ipmitool raw 0x30 0x45 0x00 failed 3 times" in stderr
    assert ipmitool.calls() == [GET_MODE] * 3  # never took control, so nothing to restore


def test_service_refuses_an_invalid_configuration(tmp_path, ipmitool, service):
    proc = service(curve={"50": 40})
    _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 2
    assert "needs a point at 0 °C or below" in stderr
    assert ipmitool.calls() == []


def test_unit_file_runs_the_service_as_the_role_installs_it():
    unit = (REPO / "agents" / "systemd" / "ccc-fan-controller.service").read_text()
    lines = {line.split("=", 1)[0]: line.split("=", 1)[1] for line in unit.splitlines() if "=" in line and not line.startswith("#")}
    assert lines["ExecStart"] == ("/opt/ccc-agents/venv/bin/python /opt/ccc-agents/bin/ccc_fan_controller.py"
                                  " --config /etc/ccc/fan-controller.yaml")
    assert "Environment=PYTHONPATH=/opt/ccc-agents/lib" in unit
    assert "nvidia-persistenced.service" in lines["After"]
    assert lines["Restart"] == "on-failure" and lines["RuntimeDirectory"] == "ccc-fan-controller"
    assert "StartLimitIntervalSec" in lines and "StartLimitBurst" in lines
    assert "DevicePolicy" not in lines and "PrivateDevices" not in lines  # /dev/ipmi0 and /dev/nvidia* stay reachable
    assert os.access(AGENT, os.X_OK)


# --------------------------------------------------------------------------------------------
# Salt wrappers


@pytest.fixture
def pillar(monkeypatch):
    def set_fans(fans):
        monkeypatch.setattr(ccc_fans, "__pillar__", {"ccc": {"fans": fans}}, raising=False)
    return set_fans


def test_salt_wrappers_read_pillar(pillar):
    pillar({"curve": {"0": 25, "70": 55}, "interpolate": True, "kernel_modules": ["ipmi_devintf"]})
    assert ccc_fans.curve() == {"curve": {0: 25, 70: 55}, "interpolate": True, "min_duty": 20}
    assert ccc_fans.duty_for(35) == 40
    assert ccc_fans.duty_for(35, interpolate=False) == 25
    pillar({"curve": {"10": 5}})
    from salt.exceptions import CommandExecutionError
    with pytest.raises(CommandExecutionError, match="below the minimum duty 20 %"):
        ccc_fans.curve()


def test_status_reports_the_state_file(pillar, tmp_path):
    state_file = tmp_path / "state.json"
    pillar({"state_file": str(state_file)})
    assert ccc_fans.status()["problem"].startswith("no state file")
    state = {"mode": "optimal", "failsafe": False, "max_temperature_c": 55.0, "zones": {"2": 30, "3": 30},
             "updated": time.time()}
    state_file.write_text(json.dumps(state))
    result = ccc_fans.status()
    assert result["state"] == state and result["stale"] is False and result["problem"] is None
    state_file.write_text(json.dumps(dict(state, failsafe=True, updated=time.time() - 600)))
    result = ccc_fans.status()
    assert result["stale"] is True and "not updated for 600 s" in result["problem"]


def test_salt_checks_curves_configs_and_files_as_the_agent_would(pillar, tmp_path):
    from salt.exceptions import CommandExecutionError

    pillar({"min_duty": 30, "curve": {0: 30, 50: 40}})
    assert ccc_fans.normalize_curve({"0": 30, "50": 40}) == {0: 30, 50: 40}
    with pytest.raises(CommandExecutionError, match="duty 25 % at 0 °C is below the minimum duty 30 %"):
        ccc_fans.normalize_curve({"0": 25})  # the node's own min_duty
    assert ccc_fans.normalize_curve({"0": 25}, min_duty=20) == {0: 25}
    assert ccc_fans.controller_config({"zones": 1})["zones"] == [1]
    with pytest.raises(CommandExecutionError, match="unknown key 'zone'"):
        ccc_fans.controller_config({"zone": 1})
    with pytest.raises(CommandExecutionError, match="-300 °C is below the curve's lowest point 0 °C"):
        ccc_fans.duty_for(-300)
    with pytest.raises(CommandExecutionError, match="temperature 'hot' is not a number"):
        ccc_fans.duty_for("hot")
    config_file = tmp_path / "fan-controller.yaml"
    with pytest.raises(CommandExecutionError, match="No such file"):
        ccc_fans.load_config_file(str(config_file))
    config_file.write_text("zones: [1, 1]\n")
    with pytest.raises(CommandExecutionError, match="zone 1 is listed twice"):
        ccc_fans.load_config_file(str(config_file))
    config_file.write_text("zones: [1\n")
    with pytest.raises(CommandExecutionError, match="not YAML"):
        ccc_fans.load_config_file(str(config_file))


def test_status_with_an_invalid_pillar_or_a_corrupt_state_file_still_answers(pillar, tmp_path):
    state_file = tmp_path / "state.json"
    state_file.write_text("{half a file")
    pillar({"zones": "two"})  # unusable: status falls back to the defaults, and says what it reads
    result = ccc_fans.status(str(state_file))
    assert result["state_file"] == str(state_file) and result["stale"] is True
    assert result["problem"].startswith(f"unreadable state file: {state_file} is not JSON")
    assert ccc_fans.status()["state_file"] == ccc_fan_config.DEFAULTS["state_file"]


def test_config_template_renders_with_salt_and_loads_in_the_service(tmp_path):
    """Real masterless salt-call: the template and the wrappers against (masked) pillar."""
    from support.site import SaltNode

    fans = {"packages": ["ipmitool"], "curve": {0: 20, 62.5: 35, 80: 60}, "interpolate": True, "zones": [1],
            "decrease_delay": 60, "dry_run": True}
    node = SaltNode(tmp_path, "node1", "unix:///nonexistent.sock", tmp_path / "storage", extra_ccc={"fans": fans})
    rendered, code = node.salt_call("slsutil.renderer", f"path={REPO / 'agents' / 'config' / 'fan-controller.yaml.jinja'}",
                                    "default_renderer=jinja")
    assert code == 0
    assert rendered.startswith("# Managed by Salt")
    config_file = tmp_path / "fan-controller.yaml"
    config_file.write_text(rendered)
    loaded = ccc_fan_config.load_file(config_file)  # as the service reads it
    assert loaded == ccc_fan_config.controller_config(fans)
    assert loaded["curve"] == {0: 20, 62.5: 35, 80: 60} and loaded["zones"] == [1]
    duty, code = node.salt_call("ccc_fans.duty_for", "71.25")
    assert code == 0 and duty == 48  # 35 + 25 * 8.75 / 17.5 = 47.5, rounded up
