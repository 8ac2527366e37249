#!/usr/bin/env python3
"""
ccc-fan-controller: Supermicro system fan zones follow the hottest GPU (NVML), through ipmitool.

Runs as its own systemd service (``agents/systemd/ccc-fan-controller.service``; why not inside
salt-minion: see ``_modules/ccc_fans.py``). The control logic lives in ``ccc_fans`` and the GPU
reading in ``ccc_gpu``; both are imported from the library directory ``$CCC_AGENT_LIB``
(installed: ``/opt/ccc-agents/lib``), else ``<this script's dir>/../_modules`` (a checkout).

    ccc_fan_controller.py [--config /etc/ccc/fan-controller.yaml] [--dry-run] [--log-level info]

The configuration file is YAML with the keys of pillar ``ccc:fans`` (see ``ccc_fans``), rendered
by Salt from ``agents/config/fan-controller.yaml.jinja``. ``--dry-run`` logs every decision and
never runs ipmitool.

Exit status: 0 stopped (SIGTERM, SIGINT) with the BMC fan mode restored; 1 unexpected error;
2 unusable configuration; 3 IPMI unusable (mode not readable at start, writes failing for
``max_ipmi_failures`` steps, or the mode could not be restored). Every non-zero exit logs why;
systemd restarts the service (``Restart=on-failure``) within its start limit.
"""

import argparse
import logging
import os
import signal
import sys
import threading

HERE = os.path.dirname(os.path.realpath(__file__))
LIB = os.environ.get("CCC_AGENT_LIB") or os.path.normpath(os.path.join(HERE, os.pardir, "_modules"))
if LIB not in sys.path:
    sys.path.insert(0, LIB)

import ccc_fans  # from LIB

log = logging.getLogger("ccc-fan-controller")

EXIT_OK, EXIT_ERROR, EXIT_CONFIG, EXIT_IPMI = 0, 1, 2, 3


class NvmlTemperatures:
    """
    The production temperature reader: ``ccc_gpu.read_temperatures`` on an NVML handle from
    ``ccc_gpu.load_nvml`` (``nvml`` replaces the ``pynvml`` module there; tests pass a fake).
    NVML is (re)initialised lazily: after any failed reading it is shut down and the next
    reading initialises it afresh, so a driver reload heals without a restart. A ``ccc_gpu``
    that cannot be imported makes every reading fail (fail-safe 100 %, logged) rather than the
    service crash-looping.
    """

    def __init__(self, nvml=None):
        self.replacement = nvml
        self.nvml = None
        try:
            import ccc_gpu  # pylint: disable=import-outside-toplevel

            self.gpu, self.import_error = ccc_gpu, None
        except Exception as exc:  # noqa: BLE001  (reported by every reading instead)
            self.gpu, self.import_error = None, f"cannot import ccc_gpu from {LIB}: {type(exc).__name__}: {exc}"
            log.error("%s", self.import_error)

    def __call__(self):
        if self.gpu is None:
            raise RuntimeError(self.import_error)
        if self.nvml is None:
            self.nvml = self.gpu.load_nvml(self.replacement)
        try:
            return self.gpu.read_temperatures(self.nvml)
        except Exception:
            nvml, self.nvml = self.nvml, None
            self.gpu.shutdown_nvml(nvml)
            raise

    def close(self):
        """Release NVML (on exit)."""
        if self.gpu is not None and self.nvml is not None:
            nvml, self.nvml = self.nvml, None
            self.gpu.shutdown_nvml(nvml)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--config", default=ccc_fans.DEFAULT_CONFIG_FILE, help="YAML configuration file")
    parser.add_argument("--dry-run", action="store_true", help="log decisions, never run ipmitool")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return parser.parse_args(argv)


def main(argv=None, read_temperatures=None, stop_event=None, ipmi=None):
    """
    Run the controller until ``stop_event`` is set (SIGTERM and SIGINT set it when called in the
    main thread); returns the exit status. ``read_temperatures`` (a callable returning
    ``{gpu uuid: °C}``) defaults to NVML through ``ccc_gpu``; ``ipmi`` to ipmitool as configured.
    """
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(args.log_level.upper())
    try:
        config = ccc_fans.load_config_file(args.config, dry_run=args.dry_run)
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
    controller = ccc_fans.Controller(config, reader, ipmi=ipmi)
    log.info("zones %s, curve %s%s, every %s s, %s", config["zones"], config["curve"],
             " (interpolated)" if config["interpolate"] else "", config["interval"],
             "DRY RUN" if config["dry_run"] else f"ipmitool {config['ipmitool']}")
    try:
        controller.run(stop)
    except ccc_fans.IpmiError as exc:
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
