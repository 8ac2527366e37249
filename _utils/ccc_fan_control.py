"""
The fan control loop (the CCC "superfans" behaviour): Supermicro system fan zones follow the
hottest GPU. Plain Python: ``agents/ccc_fan_controller.py`` runs it as its own service.

* **Input**: for every GPU, the moving average of its last ``window`` temperature readings; the
  control input is the **maximum** of these averages; the curve (``ccc_fan_curve``) turns it
  into a duty.
* **Zones**: only the configured zones are driven.
* **Hysteresis**: a target within ``tolerance`` points of the applied duty sends nothing; a
  higher target is written at once; a lower target is written only once it has been wanted for
  ``decrease_delay`` seconds without interruption (which also means that long after the last
  applied change, the original rule).
* **BMC mode**: the mode is read at start and restored on every exit path (normal end,
  SIGTERM/SIGINT, exceptions). By default the controller does not change the mode (Full mode
  would also pin the undriven CPU zones at 100 %); the BMC may take a zone back in a non-Full
  mode, so the applied duty is re-sent every ``reassert_interval``. ``full_mode`` sets Full
  mode at start instead (smfc's way), for boards whose BMC keeps overriding.
* **Fail-safe**: when the temperatures cannot be read, a reading is implausible, no GPU is
  reported, or a GPU seen earlier is missing, every zone goes to 100 % at once (logged, and
  ``failsafe: true`` in the state file). Good readings bring the curve back (a lower duty
  still waits for the delay).
* **IPMI failures**: a failed write is logged and retried on the next step; after
  ``max_ipmi_failures`` consecutive failing steps ``step`` raises ``IpmiUnavailable``.
* **Dry run**: decisions are logged and written to the state file; IPMI is never used.
"""

import collections
import logging
import time

import ccc_fan_curve
import ccc_fan_state
import ccc_ipmi

log = logging.getLogger(__name__)

FAILSAFE_DUTY = 100
# A GPU temperature outside this range is a broken reading, not a temperature.
PLAUSIBLE_TEMPERATURE = (-40.0, 150.0)


class Controller:
    """
    The control loop. ``read_temperatures()`` returns ``{gpu uuid: °C}`` and may raise;
    ``ipmi`` is a ``ccc_ipmi.SupermicroIpmi`` (built from the configuration when omitted; never
    used in a dry run); ``clock`` is monotonic seconds and ``wall_clock`` the Unix time for the
    state file. ``start`` saves the BMC mode, ``step`` makes one decision, ``restore`` puts the
    saved mode back; ``run`` does all three until a stop event is set.
    """

    def __init__(self, config, read_temperatures, ipmi=None, clock=time.monotonic, wall_clock=time.time,
                 write_state=True):
        self.config = config
        self.read_temperatures = read_temperatures
        self.dry_run = config["dry_run"]
        self.ipmi = None if self.dry_run else (ipmi or ccc_ipmi.SupermicroIpmi.from_config(config))
        self.clock = clock
        self.wall_clock = wall_clock
        self.write_state = write_state
        self.curve = ccc_fan_curve.points(config["curve"], config["min_duty"])
        self.samples = {}  # GPU uuid -> its last ``window`` readings
        self.expected_gpus = set()
        # Per zone: the duty last sent, when it was sent, since when a lower duty is wanted.
        self.applied, self.last_write, self.pending_since = {}, {}, {}
        self.failsafe_reason = self.max_temperature = self.target = None
        # The BMC fan mode found at start (restored on exit) and the one in force now.
        self.saved_mode = self.current_mode = None
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
        log.info("BMC fan mode is %s (0x%02x); it is restored on exit", ccc_ipmi.mode_name(self.saved_mode),
                 self.saved_mode)
        if self.config["full_mode"] and self.saved_mode != ccc_ipmi.FULL_MODE:
            self.ipmi.set_mode(ccc_ipmi.FULL_MODE)
            self.current_mode = ccc_ipmi.FULL_MODE
            log.info("BMC fan mode set to full")

    def restore(self):
        """Put the saved BMC fan mode back (the BMC takes the zones over again). Raises ``IpmiError``."""
        try:
            if self.in_control:
                try:
                    self.ipmi.set_mode(self.saved_mode)
                except ccc_ipmi.IpmiError as exc:
                    log.error("could not restore the BMC fan mode %s: %s; the fans keep their last manual duty",
                              ccc_ipmi.mode_name(self.saved_mode), exc)
                    raise
                self.in_control = False
                self.current_mode = self.saved_mode
                self.applied.clear()
                log.info("BMC fan mode %s restored", ccc_ipmi.mode_name(self.saved_mode))
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
            except ccc_ipmi.IpmiError:
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

    @staticmethod
    def _blind_reason(temperatures, expected):
        """Why ``temperatures`` cannot be trusted (a sentence), or None."""
        if not isinstance(temperatures, dict) or not temperatures:
            return f"no GPU temperatures reported ({temperatures!r})"
        for uuid, value in temperatures.items():
            number = ccc_fan_curve.number(value)
            if number is None or not PLAUSIBLE_TEMPERATURE[0] <= number <= PLAUSIBLE_TEMPERATURE[1]:
                return f"unreadable temperature {value!r} for GPU {uuid}"
        missing = expected - set(temperatures)
        if missing:
            return (f"GPU(s) disappeared: {', '.join(sorted(missing))} "
                    f"(restart the controller once a GPU is removed on purpose)")
        return None

    def _decide_target(self):
        try:
            temperatures = self.read_temperatures()
        except Exception as exc:  # noqa: BLE001  (any reader failure means: blind)
            return self._failsafe(f"GPU temperatures unreadable: {type(exc).__name__}: {exc}")
        reason = self._blind_reason(temperatures, self.expected_gpus)
        if reason:
            return self._failsafe(reason)
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
        return ccc_fan_curve.duty_for(self.curve, self.max_temperature, self.config["interpolate"])

    def _zone_duty(self, zone, target, now):
        """The duty the hysteresis rules send to ``zone`` now, or None."""
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

    def _planned(self, zone, target, now):
        """``(duty, re-sent)`` to write to ``zone`` now, or None."""
        duty = self._zone_duty(zone, target, now)
        if duty is not None:
            return duty, False
        interval = self.config["reassert_interval"]
        if self.dry_run or not interval or now - self.last_write.get(zone, now) < interval:
            return None
        return self.applied[zone], True

    def _send(self, zone, duty, reassert):
        """Write ``duty`` to ``zone`` (or log it in a dry run); returns the problem, or None."""
        previous = self.applied.get(zone)
        shown = "unset" if previous is None else f"{previous} %"
        temperature = "n/a" if self.max_temperature is None else f"{self.max_temperature:.1f} °C"
        if self.dry_run:
            log.info("dry run: would set zone %s from %s to %d %% (max GPU %s)", zone, shown, duty, temperature)
            return None
        try:
            self.ipmi.set_zone_duty(zone, duty)
        except ccc_ipmi.IpmiError as exc:
            return f"zone {zone}: {exc}"
        if reassert:
            log.debug("zone %s: re-sent %d %%", zone, duty)
        else:
            log.info("zone %s: %s -> %d %% (max GPU %s%s)", zone, shown, duty, temperature,
                     ", FAIL-SAFE" if self.failsafe_reason else "")
        return None

    def _count_ipmi_failures(self, errors, wrote):
        """Count failing steps in a row; raise ``IpmiUnavailable`` at ``max_ipmi_failures``."""
        if not errors:
            if wrote:
                self.ipmi_failures = 0
            return
        self.ipmi_failures += 1
        log.error("IPMI write failed (%d of %d failing steps allowed in a row): %s", self.ipmi_failures,
                  self.config["max_ipmi_failures"], "; ".join(errors))
        if self.ipmi_failures >= self.config["max_ipmi_failures"]:
            self._write_state_file()
            raise ccc_ipmi.IpmiUnavailable(f"IPMI failed in {self.ipmi_failures} steps in a row; giving up so that "
                                           f"systemd restarts the controller. Last: {'; '.join(errors)}")

    def step(self):
        """Read, decide, write the zones that need it, write the state file; returns the state.
        Raises ``IpmiUnavailable`` after ``max_ipmi_failures`` failing steps in a row."""
        now = self.clock()
        self.target = self._decide_target()
        errors, wrote = [], False
        for zone in self.config["zones"]:
            planned = self._planned(zone, self.target, now)
            if planned is None:
                continue
            duty, reassert = planned
            problem = self._send(zone, duty, reassert)
            if problem:
                errors.append(problem)
                continue
            wrote = wrote or not self.dry_run
            self.last_write[zone] = now
            if duty != self.applied.get(zone):
                self.applied[zone] = duty
                self.pending_since.pop(zone, None)
        self._count_ipmi_failures(errors, wrote)
        return self._write_state_file()

    # -- reporting

    def state(self):
        """The state file's content (``ccc_fan_state``)."""
        mode = "unknown" if self.dry_run else ccc_ipmi.mode_name(self.current_mode)
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
                ccc_fan_state.write(self.config["state_file"], state)
            except OSError as exc:
                log.warning("could not write the state file %s: %s", self.config["state_file"], exc)
        return state
