"""
GPU-temperature fan control for Supermicro chassis (the CCC "superfans" behaviour).

The system fan zones of a Supermicro GPU server follow the hottest GPU, through the BMC's
Supermicro raw IPMI commands issued with ``ipmitool``:

* **Input**: for every GPU, the moving average of its last ``window`` (5) temperature readings
  (NVML, through ``ccc_gpu``); the control input is the **maximum** of these averages.
* **Curve**: the CCC form ``{temperature: duty}`` (keys ints or strings, duty in percent). The
  duty of a temperature is the duty of the largest threshold at or below it (a step function);
  with ``interpolate: true`` it is linear between neighbouring points, rounded up.
* **Zones**: only the configured zones are driven; the default ``[2, 3]`` are the system zones
  of the SYS-4029GP-TRT2 the original controller was calibrated on (CPU zones 0 and 1 stay
  under BMC control).
* **Hysteresis**: a target within ``tolerance`` (2) points of the applied duty sends nothing;
  a higher target is written at once; a lower target is written only once it has been wanted
  for ``decrease_delay`` (120 s) without interruption (which also means 120 s after the last
  applied change, the original rule).
* **BMC mode**: the mode is read at start (``0x30 0x45 0x00``) and restored on every exit path
  (``0x30 0x45 0x01 <mode>``): normal end, SIGTERM/SIGINT, exceptions. As in the original, the
  controller does not change the mode by default (Full mode would also pin the undriven CPU
  zones at 100 %); the BMC may take a zone back in a non-Full mode, so the applied duty is
  re-sent every ``reassert_interval`` (30 s). ``full_mode: true`` sets Full mode at start
  instead (smfc's way), for boards whose BMC keeps overriding.
* **Fail-safe**: when NVML fails, a temperature cannot be read, no GPU is reported, or a GPU
  seen earlier is missing, every zone goes to 100 % at once (logged, and ``failsafe: true`` in
  the state file). Good readings bring the curve back (a lower duty still waits for the delay).
* **IPMI failures**: each ``ipmitool`` call is retried with exponential backoff
  (``ipmi_attempts``, ``ipmi_retry_delay``); a failed write is logged and retried on the next
  step; after ``max_ipmi_failures`` consecutive failing steps the controller raises
  ``IpmiUnavailable`` and the service exits non-zero (systemd restarts it, within its start
  limit). Commands are argument lists, never shell strings.
* **Dry run**: decisions are logged and written to the state file; ``ipmitool`` is never run.

Why a separate long-lived service and not something inside salt-minion (a beacon, a schedule
or an engine): the controller owns the fans between two ``ipmitool`` calls. It must keep running,
and restore the BMC mode when it stops, independently of minion restarts, Salt upgrades and
state runs (Salt restarts its own processes during those, and a state run can block a minion
for minutes). It needs a tight 2 s loop and its own SIGTERM/SIGINT handling, which Salt's
process model does not offer to execution modules. And a crash or hang of Salt must never leave
the fans at a low manual duty: as its own systemd unit
(``agents/systemd/ccc-fan-controller.service``, ``agents/ccc_fan_controller.py``) the controller
restores the BMC mode on its own exit and is restarted by systemd on failure. Salt only
installs it, renders its configuration from pillar ``ccc:fans`` (``config`` below) and reads
its state file (``status``).

The control logic (``duty_for``, ``controller_config``, ``SupermicroIpmi``, ``Controller``) is
plain Python usable without Salt; the agent imports this file as a plain module. ``curve``,
``duty_for`` (with one argument), ``config`` and ``status`` are the Salt-facing wrappers.

Pillar ``ccc:fans`` (all optional; ``enabled`` is the role's switch and ignored here):

====================  =========================================  ======================================
key                   default                                    meaning
====================  =========================================  ======================================
curve                 ``{0: 20, 60: 30, 65: 35, 70: 40,          °C -> duty %; needs a point at or
                      80: 45, 90: 50}``                          below 0 °C; duty never decreasing
interpolate           ``false``                                  linear between points (else steps)
min_duty              ``20``                                     lowest duty a curve may ask for
zones                 ``[2, 3]``                                 IPMI fan zones driven
interval              ``2``                                      seconds between readings
window                ``5``                                      readings averaged per GPU
tolerance             ``2``                                      points of change that are ignored
decrease_delay        ``120``                                    seconds a lower duty must persist
reassert_interval     ``30``                                     re-send the applied duty (0 = never)
full_mode             ``false``                                  set the BMC to Full mode at start
ipmitool              ``ipmitool``                               ipmitool binary (PATH or absolute)
ipmi_attempts         ``3``                                      tries per ipmitool command
ipmi_retry_delay      ``0.5``                                    first backoff (s), doubled each retry
ipmi_timeout          ``10``                                     seconds per ipmitool call
max_ipmi_failures     ``5``                                      failing steps in a row before exit
state_file            ``/run/ccc-fan-controller/state.json``     state read by ``status`` and exporter
dry_run               ``false``                                  log decisions, never run ipmitool
====================  =========================================  ======================================

State file (JSON, rewritten atomically after every step)::

    {"mode": "<bmc mode name>", "failsafe": false, "max_temperature_c": 61.4,
     "zones": {"2": 30, "3": 30}, "updated": 1767225600.0}

``mode`` is the BMC fan mode (``standard``, ``full``, ``optimal``, ``heavy_io``, ``mode_0xNN``
for others, ``unknown`` in a dry run); ``max_temperature_c`` the control input (null when there
is none, i.e. in fail-safe); ``zones`` the duty last sent to each zone (the decided duty in a
dry run; empty once the BMC mode has been restored).
"""

import collections
import itertools
import json
import logging
import math
import numbers
import os
import subprocess
import tempfile
import time

__virtualname__ = "ccc_fans"

log = logging.getLogger(__name__)

DEFAULT_CURVE = {0: 20, 60: 30, 65: 35, 70: 40, 80: 45, 90: 50}
DEFAULT_STATE_FILE = "/run/ccc-fan-controller/state.json"
DEFAULT_CONFIG_FILE = "/etc/ccc/fan-controller.yaml"
DEFAULTS = {
    "curve": DEFAULT_CURVE,
    "interpolate": False,
    "min_duty": 20,
    "zones": [2, 3],
    "interval": 2.0,
    "window": 5,
    "tolerance": 2.0,
    "decrease_delay": 120.0,
    "reassert_interval": 30.0,
    "full_mode": False,
    "ipmitool": "ipmitool",
    "ipmi_attempts": 3,
    "ipmi_retry_delay": 0.5,
    "ipmi_timeout": 10.0,
    "max_ipmi_failures": 5,
    "state_file": DEFAULT_STATE_FILE,
    "dry_run": False,
}
# Pillar keys that belong to the role that installs the controller, not to the controller.
ROLE_KEYS = ("enabled",)

FAILSAFE_DUTY = 100
# Supermicro BMC fan modes (answer of 0x30 0x45 0x00, argument of 0x30 0x45 0x01).
MODE_NAMES = {0: "standard", 1: "full", 2: "optimal", 4: "heavy_io"}
FULL_MODE = 1
# Supermicro OEM raw commands (netfn 0x30).
GET_FAN_MODE = (0x30, 0x45, 0x00)
SET_FAN_MODE = (0x30, 0x45, 0x01)  # + mode
SET_ZONE_DUTY = (0x30, 0x70, 0x66, 0x01)  # + zone, duty (0x00-0x64)
# A GPU temperature outside this range is a broken reading, not a temperature.
PLAUSIBLE_TEMPERATURE = (-40.0, 150.0)


def __virtual__():
    return __virtualname__


class CurveError(ValueError):
    """The fan curve is unusable; the message lists every problem."""


class ConfigError(ValueError):
    """The controller configuration is unusable; the message lists every problem."""


class IpmiError(RuntimeError):
    """An ipmitool command failed on every attempt."""


class IpmiUnavailable(IpmiError):
    """IPMI kept failing for ``max_ipmi_failures`` steps: the controller gives up (exit non-zero)."""


# --------------------------------------------------------------------------------------------
# Curve


def _number(value):
    """``value`` as a finite int or float (numeric strings too), else None. Booleans are not numbers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if not isinstance(value, numbers.Real):
        return None
    value = float(value)
    if not math.isfinite(value):
        return None
    return int(value) if value.is_integer() else value


class _Points(tuple):
    """A validated curve: sorted ``(temperature, duty)`` pairs."""


def _curve_points(curve, min_duty):
    if isinstance(curve, _Points):
        return curve
    if isinstance(curve, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in curve):
        items = list(curve)
    elif isinstance(curve, dict):
        items = list(dict.items(curve))
    else:
        raise CurveError(f"invalid fan curve: expected a mapping of temperature (°C) to duty (%), got {curve!r}")
    problems, points = [], []
    if not items:
        problems.append("the curve has no points")
    for key, duty in items:
        temperature, percent = _number(key), _number(duty)
        if temperature is None or not -100 <= temperature <= 150:
            problems.append(f"temperature {key!r} is not a number of °C between -100 and 150")
            continue
        if percent is None or not 0 <= percent <= 100:
            problems.append(f"duty {duty!r} at {temperature} °C is not a percentage between 0 and 100")
            continue
        if percent < min_duty:
            problems.append(f"duty {percent} % at {temperature} °C is below the minimum duty {min_duty} % "
                            "(slow fans can stall and make the BMC force full speed; see min_duty)")
            continue
        points.append((temperature, percent))
    points.sort()
    for (t1, _), (t2, _) in itertools.pairwise(points):
        if t1 == t2:
            problems.append(f"temperature {t1} °C appears twice")
    for (t1, d1), (t2, d2) in itertools.pairwise(points):
        if d2 < d1:
            problems.append(f"duty falls from {d1} % at {t1} °C to {d2} % at {t2} °C (a hotter GPU must never get less air)")
    if points and points[0][0] > 0:
        problems.append(f"the lowest point is {points[0][0]} °C: the curve needs a point at 0 °C or below "
                        "(e.g. 0: 20) so that every temperature has a duty")
    if problems:
        raise CurveError("invalid fan curve: " + "; ".join(problems))
    return _Points(points)


def normalize_curve(curve, min_duty=DEFAULTS["min_duty"]):
    """
    Validate a CCC fan curve ``{temperature: duty}`` and return it sorted as ``{°C: duty %}``.

    Keys may be ints, floats or numeric strings (``"60"``). Raises ``CurveError`` naming every
    problem: no points, a non-numeric temperature or duty, a duty outside 0-100 or below
    ``min_duty``, a duty that falls as the temperature rises, no point at or below 0 °C.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_fans.normalize_curve '{"0": 20, "60": 30, "70": 40}'
    """
    return dict(_curve_points(curve, min_duty))


def duty_for(curve, temperature=None, interpolate=None):
    """
    The fan duty (%) for a temperature (°C).

    Pure use (no Salt): ``duty_for(curve, temperature, interpolate=False)`` with a curve in
    the CCC form ``{temperature: duty}``. As a step function the duty is that of the largest
    threshold at or below ``temperature``; with ``interpolate`` it is linear between the two
    neighbouring points (rounded up, never less air than the line) and flat above the last.
    A mapping is validated first (``normalize_curve`` with the default minimum duty).

    Salt use: ``ccc_fans.duty_for <temperature>`` (one argument) uses the curve, interpolation
    and minimum duty of pillar ``ccc:fans``; ``interpolate=`` overrides the pillar's choice.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_fans.duty_for 72
        salt-call ccc_fans.duty_for 72 interpolate=True
    """
    if temperature is None:
        if isinstance(curve, (dict, list, tuple)):
            raise TypeError("duty_for(curve, temperature): the temperature is missing")
        # Called from Salt with only a temperature: the curve comes from pillar.
        temperature = curve
        settings = config()
        curve = _curve_points(settings["curve"], settings["min_duty"])
        if interpolate is None:
            interpolate = settings["interpolate"]
    points = _curve_points(curve, DEFAULTS["min_duty"])
    value = _number(temperature)
    if value is None:
        raise ValueError(f"temperature {temperature!r} is not a number")
    if value < points[0][0]:
        raise ValueError(f"{value} °C is below the curve's lowest point {points[0][0]} °C")
    below = [point for point in points if point[0] <= value]
    low_t, low_d = below[-1]
    if not interpolate or len(below) == len(points):
        return math.ceil(low_d - 1e-9)
    high_t, high_d = points[len(below)]
    duty = low_d + (high_d - low_d) * (value - low_t) / (high_t - low_t)
    return math.ceil(duty - 1e-9)


# --------------------------------------------------------------------------------------------
# Configuration


def controller_config(raw=None):
    """
    The controller configuration: ``raw`` (pillar ``ccc:fans`` or the agent's YAML file) over
    the defaults, validated. Raises ``ConfigError`` naming every problem (unknown keys too, so
    a misspelt key is not silently ignored).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_fans.controller_config '{"zones": [1], "interpolate": true}'
    """
    raw = dict(raw or {})
    for key in ROLE_KEYS:
        raw.pop(key, None)
    problems = [f"unknown key {key!r} (known: {', '.join(sorted(DEFAULTS))})" for key in sorted(set(raw) - set(DEFAULTS), key=str)]
    merged = dict(DEFAULTS)
    merged.update({key: value for key, value in raw.items() if key in DEFAULTS and value is not None})
    result = {}

    def number(key, low, high=None, integer=False, low_inclusive=True):
        value = _number(merged[key])
        ok = value is not None and (value >= low if low_inclusive else value > low) and (high is None or value <= high)
        if ok and integer and not float(value).is_integer():
            ok = False
        if not ok:
            kind = "an integer" if integer else "a number"
            bound = f"{'>=' if low_inclusive else '>'} {low}" + (f" and <= {high}" if high is not None else "")
            problems.append(f"{key} must be {kind} {bound}, got {merged[key]!r}")
            return DEFAULTS[key]
        return int(value) if integer else float(value)

    def flag(key):
        if not isinstance(merged[key], bool):
            problems.append(f"{key} must be true or false, got {merged[key]!r}")
            return DEFAULTS[key]
        return merged[key]

    result["min_duty"] = number("min_duty", 0, 100, integer=True)
    try:
        result["curve"] = dict(_curve_points(merged["curve"], result["min_duty"]))
    except CurveError as exc:
        problems.append(str(exc))
        result["curve"] = dict(DEFAULT_CURVE)
    result["interpolate"] = flag("interpolate")
    zones = merged["zones"]
    if isinstance(zones, (int, str)) and not isinstance(zones, bool):
        zones = [zones]
    zone_list = []
    if not isinstance(zones, (list, tuple)) or not zones:
        problems.append(f"zones must be a non-empty list of IPMI fan zone numbers, got {merged['zones']!r}")
    else:
        for zone in zones:
            value = _number(zone)
            if value is None or not float(value).is_integer() or not 0 <= value <= 255:
                problems.append(f"zone {zone!r} is not a zone number between 0 and 255")
            elif int(value) in zone_list:
                problems.append(f"zone {int(value)} is listed twice")
            else:
                zone_list.append(int(value))
    result["zones"] = zone_list or list(DEFAULTS["zones"])
    result["interval"] = number("interval", 0, 60, low_inclusive=False)
    result["window"] = number("window", 1, 100, integer=True)
    result["tolerance"] = number("tolerance", 0, 50)
    result["decrease_delay"] = number("decrease_delay", 0, 3600)
    result["reassert_interval"] = number("reassert_interval", 0, 3600)
    result["full_mode"] = flag("full_mode")
    result["ipmi_attempts"] = number("ipmi_attempts", 1, 10, integer=True)
    result["ipmi_retry_delay"] = number("ipmi_retry_delay", 0, 60)
    result["ipmi_timeout"] = number("ipmi_timeout", 0, 300, low_inclusive=False)
    result["max_ipmi_failures"] = number("max_ipmi_failures", 1, 1000, integer=True)
    for key in ("ipmitool", "state_file"):
        value = merged[key]
        if not isinstance(value, str) or not value.strip() or "\n" in value:
            problems.append(f"{key} must be a path, got {value!r}")
            value = DEFAULTS[key]
        result[key] = value
    if result["state_file"] and not os.path.isabs(result["state_file"]):
        problems.append(f"state_file must be an absolute path, got {result['state_file']!r}")
    result["dry_run"] = flag("dry_run")
    if problems:
        raise ConfigError("invalid fan controller configuration: " + "; ".join(problems))
    return {key: result[key] for key in DEFAULTS}


def load_config_file(path, dry_run=False):
    """
    Read the agent's YAML configuration file and validate it (``controller_config``).
    ``dry_run=True`` (the agent's ``--dry-run``) overrides the file.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_fans.load_config_file /etc/ccc/fan-controller.yaml
    """
    import yaml  # pylint: disable=import-outside-toplevel

    with open(path, encoding="utf-8") as handle:
        raw = yaml.safe_load(handle)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of settings, got {type(raw).__name__}")
    if dry_run:
        raw = dict(raw, dry_run=True)
    return controller_config(raw)


def mode_name(mode):
    """
    The name of a Supermicro BMC fan mode byte (``mode_0xNN`` for one without a known name).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_fans.mode_name 2
    """
    if mode is None:
        return "unknown"
    return MODE_NAMES.get(int(mode), f"mode_0x{int(mode):02x}")


# --------------------------------------------------------------------------------------------
# IPMI


class SupermicroIpmi:
    """
    Supermicro OEM raw commands through ``ipmitool`` on the local BMC (``/dev/ipmi0``).

    Every call is an argument list (no shell). A failing call (non-zero exit, timeout, missing
    binary) is retried ``attempts`` times in all, sleeping ``retry_delay`` and doubling it;
    then ``IpmiError`` is raised. ``failed_attempts`` and ``failed_commands`` count them.
    """

    def __init__(self, ipmitool="ipmitool", attempts=3, retry_delay=0.5, timeout=10.0, sleep=time.sleep,
                 runner=subprocess.run):
        self.ipmitool = ipmitool
        self.attempts = max(1, int(attempts))
        self.retry_delay = retry_delay
        self.timeout = timeout
        self.sleep = sleep
        self.runner = runner
        self.failed_attempts = 0
        self.failed_commands = 0

    @classmethod
    def from_config(cls, config, **kwargs):
        return cls(config["ipmitool"], config["ipmi_attempts"], config["ipmi_retry_delay"], config["ipmi_timeout"],
                   **kwargs)

    def raw(self, *data):
        """Run ``ipmitool raw <bytes>``; returns its standard output."""
        argv = [self.ipmitool, "raw"] + [f"0x{int(byte):02x}" for byte in data]
        delay = self.retry_delay
        problem = None
        for attempt in range(1, self.attempts + 1):
            try:
                proc = self.runner(argv, capture_output=True, text=True, timeout=self.timeout, check=False)
            except FileNotFoundError:
                problem = f"{self.ipmitool}: not found (install ipmitool)"
            except subprocess.TimeoutExpired:
                problem = f"no answer within {self.timeout} s"
            except OSError as exc:
                problem = str(exc)
            else:
                if proc.returncode == 0:
                    if attempt > 1:
                        log.warning("ipmitool %s succeeded on attempt %d", " ".join(argv[1:]), attempt)
                    return proc.stdout
                detail = (proc.stderr or proc.stdout or "").strip().replace("\n", " ")
                problem = f"exit status {proc.returncode}" + (f": {detail}" if detail else "")
            self.failed_attempts += 1
            log.warning("ipmitool %s failed (attempt %d of %d): %s", " ".join(argv[1:]), attempt, self.attempts, problem)
            if attempt < self.attempts:
                self.sleep(delay)
                delay *= 2
        self.failed_commands += 1
        hint = ""
        if not any(os.path.exists(p) for p in ("/dev/ipmi0", "/dev/ipmi/0", "/dev/ipmidev/0")):
            hint = " (no /dev/ipmi0: is the ipmi_devintf kernel module loaded?)"
        raise IpmiError(f"ipmitool {' '.join(argv[1:])} failed {self.attempts} times: {problem}{hint}")

    def get_mode(self):
        """The BMC fan mode byte (``0x30 0x45 0x00``)."""
        answer = self.raw(*GET_FAN_MODE).split()
        try:
            return int(answer[0], 16)
        except (IndexError, ValueError):
            raise IpmiError(f"unexpected answer to get fan mode: {' '.join(answer)!r}") from None

    def set_mode(self, mode):
        """Set the BMC fan mode (``0x30 0x45 0x01 <mode>``)."""
        self.raw(*SET_FAN_MODE, int(mode))

    def set_zone_duty(self, zone, duty):
        """Set a fan zone's duty in percent (``0x30 0x70 0x66 0x01 <zone> <duty>``)."""
        duty = int(duty)
        if not 0 <= duty <= 100:
            raise ValueError(f"duty {duty} is not a percentage")
        self.raw(*SET_ZONE_DUTY, int(zone), duty)


# --------------------------------------------------------------------------------------------
# State file


def _write_state(path, state):
    """Write the state file atomically (readers never see half a file); mode 0644."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=".state-", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(state, stream, sort_keys=True)
            stream.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _read_state(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


# --------------------------------------------------------------------------------------------
# Controller


class Controller:
    """
    The control loop. ``read_temperatures()`` returns ``{gpu uuid: °C}`` and may raise;
    ``ipmi`` is a ``SupermicroIpmi`` (built from the configuration when omitted; never used in
    a dry run); ``clock`` is monotonic seconds and ``wall_clock`` the Unix time for the state
    file. ``start`` saves the BMC mode, ``step`` makes one decision, ``restore`` puts the saved
    mode back; ``run`` does all three until a stop event is set.
    """

    def __init__(self, config, read_temperatures, ipmi=None, clock=time.monotonic, wall_clock=time.time,
                 write_state=True):
        self.config = config
        self.read_temperatures = read_temperatures
        self.dry_run = config["dry_run"]
        self.ipmi = None if self.dry_run else (ipmi or SupermicroIpmi.from_config(config))
        self.clock = clock
        self.wall_clock = wall_clock
        self.write_state = write_state
        self.curve = _curve_points(config["curve"], config["min_duty"])
        self.samples = {}
        self.expected_gpus = set()
        self.applied = {}
        self.last_write = {}
        self.pending_since = {}
        self.failsafe_reason = None
        self.max_temperature = None
        self.target = None
        self.saved_mode = None
        self.current_mode = None
        self.ipmi_failures = 0
        self.in_control = False

    # -- lifecycle

    def start(self):
        """Save the BMC fan mode (and set Full mode when configured). Raises ``IpmiError``."""
        if self.dry_run:
            log.info("dry run: ipmitool is never called; decisions are only logged")
            return
        self.saved_mode = self.ipmi.get_mode()
        self.current_mode = self.saved_mode
        self.in_control = True
        log.info("BMC fan mode is %s (0x%02x); it is restored on exit", mode_name(self.saved_mode), self.saved_mode)
        if self.config["full_mode"] and self.saved_mode != FULL_MODE:
            self.ipmi.set_mode(FULL_MODE)
            self.current_mode = FULL_MODE
            log.info("BMC fan mode set to full")

    def restore(self):
        """Put the saved BMC fan mode back (the BMC takes the zones over again). Raises ``IpmiError``."""
        try:
            if self.in_control:
                try:
                    self.ipmi.set_mode(self.saved_mode)
                except IpmiError as exc:
                    log.error("could not restore the BMC fan mode %s: %s; the fans keep their last manual duty",
                              mode_name(self.saved_mode), exc)
                    raise
                self.in_control = False
                self.current_mode = self.saved_mode
                self.applied.clear()
                log.info("BMC fan mode %s restored", mode_name(self.saved_mode))
            elif self.dry_run:
                self.applied.clear()
                log.info("dry run: would restore the BMC fan mode")
        finally:
            self._write_state_file()

    def run(self, stop_event):
        """Start, step every ``interval`` seconds until ``stop_event`` is set, always restore."""
        try:
            self.start()
            while not stop_event.is_set():
                self.step()
                stop_event.wait(self.config["interval"])
        except BaseException:
            try:
                self.restore()
            except IpmiError:
                pass  # logged by restore; the original error is the one to report
            raise
        self.restore()

    # -- one decision

    def _failsafe(self, reason):
        self.samples.clear()
        self.max_temperature = None
        if reason != self.failsafe_reason:
            log.error("FAIL-SAFE: %s; all zones (%s) to %d %%", reason,
                      ", ".join(map(str, self.config["zones"])), FAILSAFE_DUTY)
        self.failsafe_reason = reason
        return FAILSAFE_DUTY

    def _decide_target(self):
        try:
            temperatures = self.read_temperatures()
        except Exception as exc:  # noqa: BLE001  (any reader failure means: blind)
            return self._failsafe(f"GPU temperatures unreadable: {type(exc).__name__}: {exc}")
        if not isinstance(temperatures, dict) or not temperatures:
            return self._failsafe(f"no GPU temperatures reported ({temperatures!r})")
        for uuid, value in temperatures.items():
            number = _number(value)
            if number is None or not PLAUSIBLE_TEMPERATURE[0] <= number <= PLAUSIBLE_TEMPERATURE[1]:
                return self._failsafe(f"unreadable temperature {value!r} for GPU {uuid}")
        missing = self.expected_gpus - set(temperatures)
        if missing:
            return self._failsafe(f"GPU(s) disappeared: {', '.join(sorted(missing))} "
                                  f"(restart the controller once a GPU is removed on purpose)")
        new = set(temperatures) - self.expected_gpus
        if new:
            log.info("watching GPU(s) %s", ", ".join(sorted(new)))
            self.expected_gpus |= new
        window = self.config["window"]
        for uuid, value in temperatures.items():
            self.samples.setdefault(uuid, collections.deque(maxlen=window)).append(float(value))
        self.max_temperature = max(sum(s) / len(s) for s in (self.samples[u] for u in temperatures))
        if self.failsafe_reason:
            log.warning("fail-safe over: GPU temperatures readable again (max %.1f °C)", self.max_temperature)
            self.failsafe_reason = None
        return duty_for(self.curve, self.max_temperature, self.config["interpolate"])

    def _zone_duty(self, zone, target, now):
        """The duty to send to ``zone`` now, or None."""
        applied = self.applied.get(zone)
        if applied is None:
            return target
        if self.failsafe_reason:
            self.pending_since.pop(zone, None)
            return target if applied != target else None
        if target - applied > self.config["tolerance"]:
            self.pending_since.pop(zone, None)
            return target
        if applied - target > self.config["tolerance"]:
            since = self.pending_since.setdefault(zone, now)
            if now - since >= self.config["decrease_delay"]:
                return target
            if since == now:
                log.info("zone %s: lower duty %d %% (now %d %%) once it is still wanted in %.0f s",
                         zone, target, applied, self.config["decrease_delay"])
            return None
        self.pending_since.pop(zone, None)
        return None

    def step(self):
        """Read, decide, write the zones that need it, write the state file; returns the state.
        Raises ``IpmiUnavailable`` after ``max_ipmi_failures`` failing steps in a row."""
        now = self.clock()
        target = self._decide_target()
        self.target = target
        errors, wrote = [], False
        for zone in self.config["zones"]:
            duty = self._zone_duty(zone, target, now)
            reassert = False
            if duty is None:
                interval = self.config["reassert_interval"]
                if self.dry_run or not interval or now - self.last_write.get(zone, now) < interval:
                    continue
                duty, reassert = self.applied[zone], True
            previous = self.applied.get(zone)
            shown = "unset" if previous is None else f"{previous} %"
            temperature = "n/a" if self.max_temperature is None else f"{self.max_temperature:.1f} °C"
            if self.dry_run:
                log.info("dry run: would set zone %s from %s to %d %% (max GPU %s)", zone, shown, duty, temperature)
            else:
                try:
                    self.ipmi.set_zone_duty(zone, duty)
                except IpmiError as exc:
                    errors.append(f"zone {zone}: {exc}")
                    continue
                wrote = True
                if reassert:
                    log.debug("zone %s: re-sent %d %%", zone, duty)
                else:
                    log.info("zone %s: %s -> %d %% (max GPU %s%s)", zone, shown, duty, temperature,
                             ", FAIL-SAFE" if self.failsafe_reason else "")
            self.last_write[zone] = now
            if duty != previous:
                self.applied[zone] = duty
                self.pending_since.pop(zone, None)
        if errors:
            self.ipmi_failures += 1
            log.error("IPMI write failed (%d of %d failing steps allowed in a row): %s", self.ipmi_failures,
                      self.config["max_ipmi_failures"], "; ".join(errors))
            if self.ipmi_failures >= self.config["max_ipmi_failures"]:
                self._write_state_file()
                raise IpmiUnavailable(f"IPMI failed in {self.ipmi_failures} steps in a row; giving up so that "
                                      f"systemd restarts the controller. Last: {'; '.join(errors)}")
        elif wrote:
            self.ipmi_failures = 0
        return self._write_state_file()

    # -- reporting

    def state(self):
        """The state file's content."""
        mode = "unknown" if self.dry_run else mode_name(self.current_mode)
        return {
            "mode": mode,
            "failsafe": bool(self.failsafe_reason),
            "max_temperature_c": None if self.max_temperature is None else round(float(self.max_temperature), 2),
            "zones": {str(zone): int(duty) for zone, duty in sorted(self.applied.items())},
            "updated": float(self.wall_clock()),
        }

    def _write_state_file(self):
        state = self.state()
        if self.write_state and self.config["state_file"]:
            try:
                _write_state(self.config["state_file"], state)
            except OSError as exc:
                log.warning("could not write the state file %s: %s", self.config["state_file"], exc)
        return state


# --------------------------------------------------------------------------------------------
# Salt-facing wrappers


def _plain(value):
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in dict.items(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in list.__iter__(list(value))]
    return value


def _pillar_fans():
    # __pillar__ directly: Salt 3008 masks what __salt__['pillar.get'] returns.
    ccc = __pillar__.get("ccc") or {}  # pylint: disable=undefined-variable
    return _plain(dict.get(ccc, "fans") or {})


def _salt_error(exc):
    try:
        from salt.exceptions import CommandExecutionError  # pylint: disable=import-outside-toplevel
    except ImportError:  # pragma: no cover
        return exc
    return CommandExecutionError(str(exc))


def config():
    """
    The fan controller's effective configuration: pillar ``ccc:fans`` over the defaults,
    validated (what ``agents/config/fan-controller.yaml.jinja`` writes to
    ``/etc/ccc/fan-controller.yaml``). An invalid pillar fails with every problem named.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_fans.config
    """
    try:
        return controller_config(_pillar_fans())
    except ConfigError as exc:
        raise _salt_error(exc) from None


def curve():
    """
    The effective fan curve from pillar ``ccc:fans`` (``{°C: duty %}``), whether it
    interpolates, and the minimum duty it was checked against.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_fans.curve
    """
    settings = config()
    return {"curve": settings["curve"], "interpolate": settings["interpolate"], "min_duty": settings["min_duty"]}


def status(state_file=None):
    """
    The running controller's state (its state file): BMC mode, fail-safe, control temperature,
    duty per zone, and how old that is (``stale`` when older than five intervals or 10 s).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_fans.status
    """
    if state_file is None:
        try:
            settings = config()
            state_file, interval = settings["state_file"], settings["interval"]
        except Exception:  # noqa: BLE001  (an invalid pillar must not hide the state)
            state_file, interval = DEFAULT_STATE_FILE, DEFAULTS["interval"]
    else:
        interval = DEFAULTS["interval"]
    result = {"state_file": state_file, "state": None, "age_seconds": None, "stale": True, "problem": None}
    try:
        state = _read_state(state_file)
    except FileNotFoundError:
        result["problem"] = "no state file: the fan controller is not running (or not installed)"
        return result
    except (OSError, ValueError) as exc:
        result["problem"] = f"unreadable state file: {exc}"
        return result
    result["state"] = state
    try:
        age = max(0.0, time.time() - float(state.get("updated")))
    except (TypeError, ValueError):
        result["problem"] = "state file has no valid 'updated' time"
        return result
    result["age_seconds"] = round(age, 1)
    result["stale"] = age > max(10.0, 5 * interval)
    if result["stale"]:
        result["problem"] = f"state not updated for {age:.0f} s: the controller is stopped or hanging"
    elif state.get("failsafe"):
        result["problem"] = "FAIL-SAFE: fans at 100 % because GPU temperatures cannot be trusted (see the journal)"
    return result
