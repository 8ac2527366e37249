"""
The fan controller's configuration: its defaults (the only place they are written), and the
validation that turns pillar ``ccc:fans`` or the agent's YAML file into a usable configuration.

The defaults reach every user from here: ``salt-call ccc_fans.config`` and
``agents/config/fan-controller.yaml.jinja`` (which renders ``ccc_fans.config``) merge pillar over
them, and the agent (``agents/ccc_fan_controller.py``) merges its file over them. The meaning of
each key is in ``docs/pillar.md`` (``ccc:fans``); how the controller uses them, in
``ccc_fan_control``.
"""

import os

import ccc_fan_curve
import ccc_rules
import yaml

DEFAULT_CONFIG_FILE = "/etc/ccc/fan-controller.yaml"
DEFAULTS = {
    # {°C: duty %}, the ccc-ansible role default (the original superfans curve).
    "curve": {0: 20, 60: 30, 65: 35, 70: 40, 80: 45, 90: 50},
    "interpolate": False,
    "min_duty": 20,
    # The system zones of the SYS-4029GP-TRT2 the original was calibrated on; CPU zones 0 and 1
    # stay under BMC control.
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
    "state_file": "/run/ccc-fan-controller/state.json",
    "dry_run": False,
}
# Pillar ``ccc:fans`` keys of the role that installs the controller (superfan_gpu: the keys of
# salt/cluster/superfan_gpu/defaults.yaml), not of the controller, which ignores them.
ROLE_KEYS = ("packages", "kernel_modules")
# Keys that are gone, with what replaced them (named when a pillar still sets one).
RETIRED_KEYS = {"enabled": "the role's switch is ccc:roles:superfan_gpu (true, false or absent)"}

# The accepted range of each numeric key: (low, high, integer, low included).
_NUMBERS = {
    "min_duty": (0, 100, True, True),
    "interval": (0, 60, False, False),
    "window": (1, 100, True, True),
    "tolerance": (0, 50, False, True),
    "decrease_delay": (0, 3600, False, True),
    "reassert_interval": (0, 3600, False, True),
    "ipmi_attempts": (1, 10, True, True),
    "ipmi_retry_delay": (0, 60, False, True),
    "ipmi_timeout": (0, 300, False, False),
    "max_ipmi_failures": (1, 1000, True, True),
}
_FLAGS = ("interpolate", "full_mode", "dry_run")
_PATHS = ("ipmitool", "state_file")


class ConfigError(ValueError):
    """The controller configuration is unusable; the message lists every problem."""


def _number(key, value, problems):
    low, high, integer, low_inclusive = _NUMBERS[key]
    parsed = ccc_fan_curve.number(value)
    ok = parsed is not None and (parsed >= low if low_inclusive else parsed > low) and parsed <= high
    if ok and integer and not float(parsed).is_integer():
        ok = False
    if not ok:
        kind = "an integer" if integer else "a number"
        problems.append(f"{key} must be {kind} {'>=' if low_inclusive else '>'} {low} and <= {high}, got {value!r}")
        return DEFAULTS[key]
    return int(parsed) if integer else float(parsed)


def _flag(key, value, problems):
    if not isinstance(value, bool):
        problems.append(f"{key} must be true or false, got {value!r}")
        return DEFAULTS[key]
    return value


def _path(key, value, problems):
    if not isinstance(value, str) or not value.strip() or "\n" in value:
        problems.append(f"{key} must be a path, got {value!r}")
        return DEFAULTS[key]
    if key == "state_file" and not os.path.isabs(value):
        problems.append(f"state_file must be an absolute path, got {value!r}")
    return value


def _zones(value, problems):
    zones = [value] if ccc_rules.is_whole(value) or isinstance(value, str) else value
    if not isinstance(zones, (list, tuple)) or not zones:
        problems.append(f"zones must be a non-empty list of IPMI fan zone numbers, got {value!r}")
        return list(DEFAULTS["zones"])
    checked = []
    for zone in zones:
        parsed = ccc_fan_curve.number(zone)
        if parsed is None or not float(parsed).is_integer() or not 0 <= parsed <= 255:
            problems.append(f"zone {zone!r} is not a zone number between 0 and 255")
        elif int(parsed) in checked:
            problems.append(f"zone {int(parsed)} is listed twice")
        else:
            checked.append(int(parsed))
    return checked or list(DEFAULTS["zones"])


def _curve(value, min_duty, problems):
    try:
        return ccc_fan_curve.normalize(value, min_duty)
    except ccc_fan_curve.CurveError as exc:
        problems.append(str(exc))
        return dict(DEFAULTS["curve"])


def controller_config(raw=None):
    """
    The controller configuration: ``raw`` (pillar ``ccc:fans`` or the agent's YAML file) over
    ``DEFAULTS``, validated; keys in ``DEFAULTS`` order. Raises ``ConfigError`` naming every
    problem (unknown keys too, so a misspelt key is not silently ignored).
    """
    raw = {key: value for key, value in dict(raw or {}).items() if key not in ROLE_KEYS}
    problems = [f"{key!r} is no longer a key: {RETIRED_KEYS[key]}" if key in RETIRED_KEYS
                else f"unknown key {key!r} (known: {', '.join(sorted(DEFAULTS))})"
                for key in sorted(set(raw) - set(DEFAULTS), key=str)]
    merged = dict(DEFAULTS)
    merged.update({key: value for key, value in raw.items() if key in DEFAULTS and value is not None})
    result = {key: _number(key, merged[key], problems) for key in _NUMBERS}
    result.update({key: _flag(key, merged[key], problems) for key in _FLAGS})
    result.update({key: _path(key, merged[key], problems) for key in _PATHS})
    result["zones"] = _zones(merged["zones"], problems)
    result["curve"] = _curve(merged["curve"], result["min_duty"], problems)
    if problems:
        raise ConfigError("invalid fan controller configuration: " + "; ".join(problems))
    return {key: result[key] for key in DEFAULTS}


def load_file(path, dry_run=False):
    """
    Read the agent's YAML configuration file and validate it (``controller_config``).
    ``dry_run=True`` (the agent's ``--dry-run``) overrides the file. Raises ``OSError`` when
    the file cannot be read, ``ConfigError`` when it is unusable.
    """
    with open(path, encoding="utf-8") as handle:
        try:
            raw = yaml.safe_load(handle)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not YAML: {exc}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of settings, got {type(raw).__name__}")
    if dry_run:
        raw = dict(raw, dry_run=True)
    return controller_config(raw)
