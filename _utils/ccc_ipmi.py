"""
Supermicro BMC fan commands through ``ipmitool raw``: building the OEM command bytes, running
them with retries, and reading their answers. Used by the fan controller
(``ccc_fan_control``, ``agents/ccc_fan_controller.py``).

Commands are argument lists, never shell strings. A failing call (non-zero exit, timeout,
missing binary) is retried with exponential backoff, then ``IpmiError`` is raised.
"""

import logging
import os
import subprocess
import time

log = logging.getLogger(__name__)

# Supermicro BMC fan modes (answer of 0x30 0x45 0x00, argument of 0x30 0x45 0x01).
MODE_NAMES = {0: "standard", 1: "full", 2: "optimal", 4: "heavy_io"}
FULL_MODE = 1
# Supermicro OEM raw commands (netfn 0x30).
GET_FAN_MODE = (0x30, 0x45, 0x00)
SET_FAN_MODE = (0x30, 0x45, 0x01)  # + mode
SET_ZONE_DUTY = (0x30, 0x70, 0x66, 0x01)  # + zone, duty (0x00-0x64)
IPMI_DEVICES = ("/dev/ipmi0", "/dev/ipmi/0", "/dev/ipmidev/0")


class IpmiError(RuntimeError):
    """An ipmitool command failed on every attempt."""


class IpmiUnavailable(IpmiError):
    """IPMI kept failing for ``max_ipmi_failures`` steps: the controller gives up (exit non-zero)."""


def mode_name(mode):
    """The name of a Supermicro BMC fan mode byte (``mode_0xNN`` for one without a known name)."""
    if mode is None:
        return "unknown"
    return MODE_NAMES.get(int(mode), f"mode_0x{int(mode):02x}")


def raw_argv(ipmitool, data):
    """The argument list of ``ipmitool raw <bytes>`` (each byte as ``0xNN``)."""
    return [ipmitool, "raw"] + [f"0x{int(byte):02x}" for byte in data]


def parse_mode(answer):
    """The mode byte in the answer to get fan mode (``" 02"``); raises ``IpmiError``."""
    words = answer.split()
    try:
        return int(words[0], 16)
    except (IndexError, ValueError):
        raise IpmiError(f"unexpected answer to get fan mode: {' '.join(words)!r}") from None


class SupermicroIpmi:
    """
    Supermicro OEM raw commands through ``ipmitool`` on the local BMC (``/dev/ipmi0``).

    A failing call is retried ``attempts`` times in all, sleeping ``retry_delay`` and doubling
    it; then ``IpmiError`` is raised. ``failed_attempts`` and ``failed_commands`` count them.
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
        """The IPMI client a controller configuration (``ccc_fan_config``) asks for."""
        return cls(config["ipmitool"], config["ipmi_attempts"], config["ipmi_retry_delay"], config["ipmi_timeout"],
                   **kwargs)

    def _attempt(self, argv):
        """Run ``argv`` once: ``(stdout, None)`` on success, ``(None, problem)`` otherwise."""
        try:
            proc = self.runner(argv, capture_output=True, text=True, timeout=self.timeout, check=False)
        except FileNotFoundError:
            return None, f"{self.ipmitool}: not found (install ipmitool)"
        except subprocess.TimeoutExpired:
            return None, f"no answer within {self.timeout} s"
        except OSError as exc:
            return None, str(exc)
        if proc.returncode == 0:
            return proc.stdout, None
        detail = (proc.stderr or proc.stdout or "").strip().replace("\n", " ")
        return None, f"exit status {proc.returncode}" + (f": {detail}" if detail else "")

    def raw(self, *data):
        """Run ``ipmitool raw <bytes>``; returns its standard output."""
        argv = raw_argv(self.ipmitool, data)
        delay = self.retry_delay
        for attempt in range(1, self.attempts + 1):
            output, problem = self._attempt(argv)
            if problem is None:
                if attempt > 1:
                    log.warning("ipmitool %s succeeded on attempt %d", " ".join(argv[1:]), attempt)
                return output
            self.failed_attempts += 1
            log.warning("ipmitool %s failed (attempt %d of %d): %s", " ".join(argv[1:]), attempt, self.attempts, problem)
            if attempt < self.attempts:
                self.sleep(delay)
                delay *= 2
        self.failed_commands += 1
        hint = ""
        if not any(os.path.exists(path) for path in IPMI_DEVICES):
            hint = " (no /dev/ipmi0: is the ipmi_devintf kernel module loaded?)"
        raise IpmiError(f"ipmitool {' '.join(argv[1:])} failed {self.attempts} times: {problem}{hint}")

    def get_mode(self):
        """The BMC fan mode byte (``0x30 0x45 0x00``)."""
        return parse_mode(self.raw(*GET_FAN_MODE))

    def set_mode(self, mode):
        """Set the BMC fan mode (``0x30 0x45 0x01 <mode>``)."""
        self.raw(*SET_FAN_MODE, int(mode))

    def set_zone_duty(self, zone, duty):
        """Set a fan zone's duty in percent (``0x30 0x70 0x66 0x01 <zone> <duty>``)."""
        duty = int(duty)
        if not 0 <= duty <= 100:
            raise ValueError(f"duty {duty} is not a percentage")
        self.raw(*SET_ZONE_DUTY, int(zone), duty)
