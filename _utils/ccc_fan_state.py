"""
The fan controller's state file: written by the controller after every step, read by
``salt-call ccc_fans.status`` and by the GPU exporter (``ccc_fan_*`` metrics).

Format (JSON, replaced atomically so that readers never see half a file; mode 0644)::

    {"mode": "<bmc mode name>", "failsafe": false, "max_temperature_c": 61.4,
     "zones": {"2": 30, "3": 30}, "updated": 1767225600.0}

``mode`` is the BMC fan mode (``standard``, ``full``, ``optimal``, ``heavy_io``, ``mode_0xNN``
for others, ``unknown`` in a dry run); ``max_temperature_c`` the control input (null when there
is none, i.e. in fail-safe); ``zones`` the duty last sent to each zone (the decided duty in a
dry run; empty once the BMC mode has been restored).
"""

import json

import ccc_safefs

MAX_BYTES = 64 * 1024


def write(path, state):
    """Replace the state file with ``state`` (atomically, ``ccc_safefs.replace_file``)."""
    data = (json.dumps(state, sort_keys=True) + "\n").encode("utf-8")
    ccc_safefs.replace_file(path, data, 0o644)


def read(path):
    """The state file as a dict, ``None`` when there is none; raises ``ValueError`` naming the problem."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc}") from exc
    if len(raw) > MAX_BYTES:
        raise ValueError(f"{path} is larger than {MAX_BYTES} bytes")
    try:
        state = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{path} is not JSON: {exc}") from exc
    if not isinstance(state, dict):
        raise ValueError(f"{path} must hold a JSON object")  # noqa: TRY004  (one error type for the caller)
    return state


def status(path, interval, now):
    """
    What an admin needs to know about a running controller from its state file at ``path``:
    ``state``, ``age_seconds``, ``stale`` (not rewritten for five ``interval`` or 10 s) and
    ``problem`` (a sentence, or None when all is well).
    """
    result = {"state_file": path, "state": None, "age_seconds": None, "stale": True, "problem": None}
    try:
        state = read(path)
    except ValueError as exc:
        result["problem"] = f"unreadable state file: {exc}"
        return result
    if state is None:
        result["problem"] = "no state file: the fan controller is not running (or not installed)"
        return result
    result["state"] = state
    try:
        age = max(0.0, now - float(state.get("updated")))
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
