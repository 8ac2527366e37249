#!/usr/bin/env python3
"""
ccc-fan-controller: Supermicro system fan zones follow the hottest GPU (NVML), through ipmitool.

Runs as its own systemd service (``agents/systemd/ccc-fan-controller.service``; why not inside
salt-minion: see ``_modules/ccc_fans.py``).

    ccc_fan_controller.py [--config /etc/ccc/fan-controller.yaml] [--dry-run] [--log-level info]

Library: the plain modules of ``_utils/`` (``ccc_fan_config``, ``ccc_fan_control``,
``ccc_ipmi``, ``ccc_fan_state``, ``ccc_nvml``, ...), imported the standard way from
``PYTHONPATH``. Installed (``salt/cluster/agents``), ``/opt/ccc-agents/lib`` holds the ``_utils/`` modules the
agents import, the unit runs the agent with ``/opt/ccc-agents/venv/bin/python`` and sets
``Environment=PYTHONPATH=/opt/ccc-agents/lib``; from a checkout:
``PYTHONPATH=_utils agents/ccc_fan_controller.py --dry-run``.

The configuration file is YAML with the keys of pillar ``ccc:fans`` (``docs/pillar.md``),
rendered by Salt from ``agents/config/fan-controller.yaml.jinja``; a key it leaves out takes
its default from ``ccc_fan_config.DEFAULTS``, the same one Salt uses. ``--dry-run`` logs every
decision and never runs ipmitool.

Exit status: 0 stopped (SIGTERM, SIGINT) with the BMC fan mode restored; 1 unexpected error;
2 unusable configuration; 3 IPMI unusable (mode not readable at start, writes failing for
``max_ipmi_failures`` steps, or the mode could not be restored). Every non-zero exit logs why;
systemd restarts the service (``Restart=on-failure``) within its start limit.
"""

import argparse
import logging
import signal
import sys
import threading

import ccc_fan_config
import ccc_fan_control
import ccc_ipmi

log = logging.getLogger("ccc-fan-controller")

EXIT_OK, EXIT_ERROR, EXIT_CONFIG, EXIT_IPMI = 0, 1, 2, 3


class NvmlTemperatures:
    """
    The production temperature reader: ``ccc_nvml.read_temperatures`` on an NVML handle from
    ``ccc_nvml.load_nvml`` (``nvml`` replaces the ``pynvml`` module there; tests pass a fake).
    NVML is (re)initialised lazily: after any failed reading it is shut down and the next
    reading initialises it afresh, so a driver reload heals without a restart. A ``ccc_nvml``
    that cannot be imported makes every reading fail (fail-safe 100 %, logged) rather than the
    service crash-looping.
    """

    def __init__(self, nvml=None):
        self.replacement = nvml
        self.nvml = None
        try:
            import ccc_nvml  # pylint: disable=import-outside-toplevel

            self.library, self.import_error = ccc_nvml, None
        except Exception as exc:  # noqa: BLE001  (reported by every reading instead)
            self.library, self.import_error = None, f"cannot import ccc_nvml (PYTHONPATH): {type(exc).__name__}: {exc}"
            log.error("%s", self.import_error)

    def __call__(self):
        if self.library is None:
            raise RuntimeError(self.import_error)
        if self.nvml is None:
            self.nvml = self.library.load_nvml(self.replacement)
        try:
            return self.library.read_temperatures(self.nvml)
        except Exception:
            nvml, self.nvml = self.nvml, None
            self.library.shutdown_nvml(nvml)
            raise

    def close(self):
        """Release NVML (on exit)."""
        if self.library is not None and self.nvml is not None:
            nvml, self.nvml = self.nvml, None
            self.library.shutdown_nvml(nvml)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--config", default=ccc_fan_config.DEFAULT_CONFIG_FILE, help="YAML configuration file")
    parser.add_argument("--dry-run", action="store_true", help="log decisions, never run ipmitool")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return parser.parse_args(argv)


def main(argv=None, read_temperatures=None, stop_event=None, ipmi=None):
    """
    Run the controller until ``stop_event`` is set (SIGTERM and SIGINT set it when called in the
    main thread); returns the exit status. ``read_temperatures`` (a callable returning
    ``{gpu uuid: °C}``) defaults to NVML through ``ccc_nvml``; ``ipmi`` to ipmitool as configured.
    """
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(args.log_level.upper())
    try:
        config = ccc_fan_config.load_file(args.config, dry_run=args.dry_run)
    except FileNotFoundError:
        log.error("configuration file %s not found", args.config)
        return EXIT_CONFIG
    except Exception as exc:  # noqa: BLE001  (YAML, permission or validation errors)
        log.error("unusable configuration %s: %s", args.config, exc)
        return EXIT_CONFIG

    stop = stop_event or threading.Event()
    if threading.current_thread() is threading.main_thread():
        def on_signal(signum, _frame):
            log.info("%s received: restoring the BMC fan mode and stopping", signal.Signals(signum).name)
            stop.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    reader = read_temperatures or NvmlTemperatures()
    controller = ccc_fan_control.Controller(config, reader, ipmi=ipmi)
    log.info("zones %s, curve %s%s, every %s s, %s", config["zones"], config["curve"],
             " (interpolated)" if config["interpolate"] else "", config["interval"],
             "DRY RUN" if config["dry_run"] else f"ipmitool {config['ipmitool']}")
    try:
        controller.run(stop)
    except ccc_ipmi.IpmiError as exc:
        log.error("stopping, IPMI unusable: %s", exc)
        return EXIT_IPMI
    except Exception:
        log.exception("stopping after an unexpected error (BMC fan mode restore attempted)")
        return EXIT_ERROR
    finally:
        if hasattr(reader, "close"):
            reader.close()
    log.info("stopped")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
