#!/usr/bin/env python3
"""
CCC GPU exporter: Prometheus metrics of a GPU node, read from NVML on every scrape.

A long-lived service of its own (``ccc-gpu-exporter.service``), not part of salt-minion: it must
answer scrapes whether or not the minion runs, and a stuck NVML call must never block Salt.
It replaces the original CCC's ``mindprince/nvidia_gpu_prometheus_exporter`` on the same port
(9445) with the same metric names and labels, so existing dashboards keep working:

* ``nvidia_gpu_num_devices`` (no labels)
* ``nvidia_gpu_memory_used_bytes``, ``nvidia_gpu_memory_total_bytes``, ``nvidia_gpu_duty_cycle``,
  ``nvidia_gpu_power_usage_milliwatts``, ``nvidia_gpu_temperature_celsius``,
  ``nvidia_gpu_fanspeed_percent``, all labelled ``minor_number``, ``uuid``, ``name``
  (a value a GPU does not support, e.g. the fan of a datacenter GPU, is left out)

and adds what no original had:

* ``ccc_gpu_process_memory_used_bytes{uuid, minor_number, pid, container, stack}``: GPU memory
  per process, attributed to its container through the container's ``ccc.stack`` label (no other
  label is ever exported: no secrets in output). The scrape port is reachable by anyone who can
  reach the node, so the user's e-mail (``user_email``, from ``ccc-user.email``) is added only
  when ``user_labels: true``;
* ``ccc_gpu_info{minor_number, uuid, name, index, pci_bus_id}``, ``ccc_gpu_up{...}`` (0 when the
  GPU could not be read), ``ccc_gpu_memory_duty_cycle``, ``ccc_gpu_power_limit_milliwatts``;
* the fan controller's state from its state file (``ccc_fan_zone_duty_percent{zone}``,
  ``ccc_fan_failsafe``, ``ccc_fan_controller_mode{mode}``, ``ccc_fan_controller_max_temperature_celsius``,
  ``ccc_fan_controller_state_age_seconds``); nothing when the node runs no fan controller;
* per CCC compute container (``ccc_container_metrics``, labels ``stack`` and ``network``):
  ``ccc_container_network_{receive,transmit}_bytes_total``, ``ccc_container_restarts_total``,
  ``ccc_container_running``, ``ccc_container_ssh_sessions`` (and ``..._truncated``: 1 when a
  container's connection tables were longer than a scrape reads), with their own health
  (``ccc_container_collection_success``, ``ccc_container_collection_failures_total``);
* its own health: ``ccc_gpu_exporter_last_success_timestamp_seconds`` (0 before the first
  success), ``ccc_gpu_exporter_collection_failures_total{source}`` (source = nvml, docker,
  fan_state), ``ccc_gpu_exporter_collection_success`` and
  ``ccc_gpu_exporter_scrape_duration_seconds``.

A collection is collected on scrape, one at a time. Whatever fails (no driver, a lost GPU,
Docker down, a corrupt state file), the scrape still answers 200 with what could be read and
the health metrics: a monitoring outage never looks like a scrape-level 500 storm. NVML is
initialised once and re-initialised after a failure. Metrics are served on every path (FRP
routes ``/nvidia`` to this port, as it did for mindprince).

Configuration (YAML, ``--config``; every key optional): the keys of pillar
``ccc:monitoring:gpu_exporter`` (``docs/pillar.md``), rendered by Salt from
``agents/config/gpu-exporter.yaml.jinja``; a key the file leaves out takes its default from
``ccc_exporter_config.DEFAULTS``, the same one Salt uses. Unknown keys are refused.

``--once`` collects once, prints the exposition and exits 0 (1 when a source failed).

Library: the plain modules of ``_utils/`` (``ccc_nvml``, ``ccc_process_owners``,
``ccc_exporter_config``, ``ccc_fan_state``, ...), imported the standard way from
``PYTHONPATH``. Installed (``salt/cluster/agents``), ``/opt/ccc-agents/lib`` holds the ``_utils/`` modules the
agents import, the unit runs the agent with ``/opt/ccc-agents/venv/bin/python`` and sets
``Environment=PYTHONPATH=/opt/ccc-agents/lib``; from a checkout:
``PYTHONPATH=_utils agents/ccc_gpu_exporter.py --once``.
"""

import argparse
import errno
import logging
import math
import signal
import socket
import sys
import threading
import time
from wsgiref.simple_server import WSGIRequestHandler, make_server

import ccc_container_metrics
import ccc_exporter_config
import ccc_fan_state
import ccc_nvml
import ccc_process_owners
import ccc_rules
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

log = logging.getLogger("ccc_gpu_exporter")

SOURCES = ("nvml", "docker", "fan_state")
GPU_LABELS = ["minor_number", "uuid", "name"]
PROCESS_LABELS = ["uuid", "minor_number", "pid", "container", "stack"]
USER_LABELS = ["user_email"]  # personal data: exported only with ``user_labels: true``
MAX_LABEL_CHARS = 128


# ---------------------------------------------------------------------------------------------
# Sources


class NvmlSession:
    """NVML initialised once (``ccc_nvml.load_nvml``) and again after ``reset()``."""

    def __init__(self, loader=ccc_nvml.load_nvml):
        self._loader = loader
        self._nvml = None

    def get(self):
        if self._nvml is None:
            self._nvml = self._loader()
        return self._nvml

    def reset(self):
        if self._nvml is not None:
            ccc_nvml.shutdown_nvml(self._nvml)
        self._nvml = None


class DockerContainers:
    """Running containers of the node's dockerd, one API call per scrape with GPU processes; its
    client is shared (``call``, one caller at a time) with the container metrics."""

    def __init__(self, url, timeout=5, client_factory=None):
        self.url = url
        self.timeout = timeout
        self._factory = client_factory or (lambda: ccc_process_owners.docker_client(url, timeout=timeout))
        self._client = None
        self._lock = threading.Lock()

    def call(self, function):
        """``function(client)``; a failure drops the client (the next call makes a new one)."""
        with self._lock:
            try:
                if self._client is None:
                    self._client = self._factory()
                return function(self._client)
            except Exception:
                self.close()
                raise

    def get(self):
        return self.call(ccc_process_owners.docker_containers)

    def close(self):
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:
                log.debug("closing the Docker client failed", exc_info=True)


def _number(value):
    if not ccc_rules.is_number(value) or not math.isfinite(value):
        return None
    return float(value)


def _label(value):
    text = "" if value is None else str(value)
    return text[:MAX_LABEL_CHARS]


# ---------------------------------------------------------------------------------------------
# Collector


class GpuCollector:
    """The custom collector: reads NVML, Docker and the fan state file on every ``collect()``."""

    def __init__(self, nvml, containers, fan_state_file=None, proc_root="/proc", clock=time.time,
                 user_labels=False):
        self.nvml = nvml
        self.containers = containers
        self.failures = {source: 0 for source in SOURCES}
        self.fan_state_file = fan_state_file
        self.proc_root = proc_root
        self.user_labels = user_labels
        self.clock = clock
        self.last_success = 0.0
        self.last_ok = False
        self.last_errors = {}
        self._lock = threading.Lock()

    def describe(self):
        return []  # collected on scrape only; nothing to declare at registration

    def collect(self):
        with self._lock:
            start = time.perf_counter()
            errors = {}
            try:
                families = self._gpu_families(errors) + self._fan_families(errors)
            except Exception as exc:  # never a 500
                log.exception("unexpected collection failure")
                errors.setdefault("nvml", f"unexpected: {type(exc).__name__}: {exc}")
                families = []
            self._account(errors)
            families.extend(self._health_families(time.perf_counter() - start))
        return families

    # -- GPUs and processes

    def _gpu_families(self, errors):
        try:
            nvml = self.nvml.get()
            gpus = ccc_nvml.read_gpus(nvml)
        except ccc_nvml.GpuReadError as exc:
            errors["nvml"] = str(exc)
            self.nvml.reset()
            return []

        def gauge(name, documentation, labels=GPU_LABELS):
            return GaugeMetricFamily(name, documentation, labels=labels)

        num = GaugeMetricFamily("nvidia_gpu_num_devices", "Number of GPU devices", value=len(gpus))
        used = gauge("nvidia_gpu_memory_used_bytes", "Memory used by the GPU device in bytes")
        total = gauge("nvidia_gpu_memory_total_bytes", "Total memory of the GPU device in bytes")
        duty = gauge("nvidia_gpu_duty_cycle", "Percent of time over the past sample period during which one or "
                     "more kernels were executing on the GPU device")
        power = gauge("nvidia_gpu_power_usage_milliwatts", "Power usage of the GPU device in milliwatts")
        temperature = gauge("nvidia_gpu_temperature_celsius", "Temperature of the GPU device in celsius")
        fan = gauge("nvidia_gpu_fanspeed_percent", "Fanspeed of the GPU device as a percent of its maximum")
        memory_duty = gauge("ccc_gpu_memory_duty_cycle", "Percent of time over the past sample period during "
                            "which GPU memory was being read or written")
        limit = gauge("ccc_gpu_power_limit_milliwatts", "Enforced power limit of the GPU device in milliwatts")
        info = gauge("ccc_gpu_info", "GPU device identity (value 1)", GPU_LABELS + ["index", "pci_bus_id"])
        up = gauge("ccc_gpu_up", "1 when every field of the GPU device could be read, 0 otherwise")

        minor_of = {}
        gpu_errors = []
        for gpu in gpus:
            minor = gpu["minor_number"] if gpu["minor_number"] is not None else gpu["index"]
            labels = [_label(minor), _label(gpu["uuid"]), _label(gpu["name"])]
            if gpu["uuid"]:
                minor_of[gpu["uuid"]] = _label(minor)
            if gpu["error"]:
                gpu_errors.append(f"GPU {gpu['index']} ({gpu['uuid']}): {gpu['error']}")
            up.add_metric(labels, 0 if gpu["error"] else 1)
            info.add_metric(labels + [str(gpu["index"]), _label(gpu["pci_bus_id"])], 1)
            for family, value, scale in (
                (used, gpu["memory_used_bytes"], 1), (total, gpu["memory_total_bytes"], 1),
                (duty, gpu["utilization_gpu_percent"], 1), (power, gpu["power_watts"], 1000),
                (temperature, gpu["temperature_c"], 1), (fan, gpu["fan_percent"], 1),
                (memory_duty, gpu["utilization_memory_percent"], 1), (limit, gpu["power_limit_watts"], 1000),
            ):
                if value is not None:
                    family.add_metric(labels, round(value * scale, 3) if scale != 1 else value)

        process_errors = []
        try:
            processes = ccc_nvml.read_processes(nvml, process_errors)
        except ccc_nvml.GpuReadError as exc:
            process_errors.append(str(exc))
            processes = []
        if gpu_errors or process_errors:
            errors["nvml"] = "; ".join(gpu_errors + process_errors)
        process_memory = self._process_family(processes, minor_of, errors)
        return [num, used, total, duty, power, temperature, fan, memory_duty, limit, info, up, process_memory]

    def _process_family(self, processes, minor_of, errors):
        family = GaugeMetricFamily("ccc_gpu_process_memory_used_bytes",
                                   "GPU memory used by a process, with its container and stack"
                                   + (" and user" if self.user_labels else ""),
                                   labels=PROCESS_LABELS + (USER_LABELS if self.user_labels else []))
        if not processes:
            return family
        try:
            containers = self.containers.get() if self.containers is not None else {}
        except Exception as exc:  # noqa: BLE001  (Docker down must not fail the scrape)
            errors["docker"] = f"cannot list containers: {type(exc).__name__}: {exc}"
            containers = {}
        for process in ccc_process_owners.attribute(processes, containers, self.proc_root):
            if process["used_memory_bytes"] is None:
                continue
            values = [
                _label(process["gpu_uuid"]), minor_of.get(process["gpu_uuid"], str(process["gpu_index"])),
                str(process["pid"]), _label(process["container"]), _label(process["stack"]),
            ]
            if self.user_labels:
                values.append(_label(process["user_email"]))
            family.add_metric(values, process["used_memory_bytes"])
        return family

    # -- fan controller

    def _fan_families(self, errors):
        if not self.fan_state_file:
            return []
        try:
            state = ccc_fan_state.read(self.fan_state_file)
        except ValueError as exc:
            errors["fan_state"] = str(exc)
            return []
        if state is None:
            return []
        problems = []
        zones = GaugeMetricFamily("ccc_fan_zone_duty_percent", "Fan duty the controller set per IPMI zone",
                                  labels=["zone"])
        raw_zones = state.get("zones")
        if isinstance(raw_zones, dict):
            for zone, duty in sorted(raw_zones.items()):
                if _number(duty) is None:
                    problems.append(f"zone {zone!r}: duty {duty!r} is not a number")
                else:
                    zones.add_metric([_label(zone)], _number(duty))
        elif raw_zones is not None:
            problems.append("zones must be an object")
        families = [zones]
        if isinstance(state.get("failsafe"), bool):
            families.append(GaugeMetricFamily("ccc_fan_failsafe", "1 while the fan controller drives 100 % "
                                              "because GPU temperatures are unknown", value=int(state["failsafe"])))
        else:
            problems.append("failsafe must be true or false")
        mode = GaugeMetricFamily("ccc_fan_controller_mode", "BMC fan mode reported by the fan controller "
                                 "(value 1)", labels=["mode"])
        if isinstance(state.get("mode"), str):
            mode.add_metric([_label(state["mode"])], 1)
        families.append(mode)
        if _number(state.get("max_temperature_c")) is not None:
            families.append(GaugeMetricFamily("ccc_fan_controller_max_temperature_celsius",
                                              "Control input: maximum over GPUs of the averaged temperature",
                                              value=_number(state["max_temperature_c"])))
        if _number(state.get("updated")) is not None:
            families.append(GaugeMetricFamily("ccc_fan_controller_state_age_seconds",
                                              "Seconds since the fan controller last wrote its state",
                                              value=max(0.0, self.clock() - _number(state["updated"]))))
        else:
            problems.append("updated must be a unix time")
        if problems:
            errors["fan_state"] = f"{self.fan_state_file}: " + "; ".join(problems)
        return families

    # -- health

    def _account(self, errors):
        for source in SOURCES:
            message = errors.get(source)
            if message:
                self.failures[source] += 1
                if self.last_errors.get(source) != message:
                    log.warning("%s: %s", source, message)
            elif self.last_errors.get(source):
                log.info("%s: recovered", source)
        self.last_errors = dict(errors)
        self.last_ok = not errors
        if self.last_ok:
            self.last_success = self.clock()

    def _health_families(self, duration):
        failures = CounterMetricFamily("ccc_gpu_exporter_collection_failures",
                                       "Collections in which a source failed", labels=["source"])
        for source in SOURCES:
            failures.add_metric([source], self.failures[source])
        return [
            GaugeMetricFamily("ccc_gpu_exporter_last_success_timestamp_seconds",
                              "Unix time of the last collection in which every source succeeded (0: never)",
                              value=self.last_success),
            GaugeMetricFamily("ccc_gpu_exporter_collection_success",
                              "1 when every source succeeded in this collection", value=int(self.last_ok)),
            failures,
            GaugeMetricFamily("ccc_gpu_exporter_scrape_duration_seconds",
                              "Seconds this collection took", value=duration),
        ]


# ---------------------------------------------------------------------------------------------
# Wiring


def build(config, nvml_loader=ccc_nvml.load_nvml, docker_factory=None, clock=time.time):
    """A registry holding the GPU collector (and ``process_*`` metrics) for ``config``."""
    collector = GpuCollector(
        NvmlSession(nvml_loader),
        DockerContainers(config["docker_url"], config["docker_timeout"], docker_factory),
        fan_state_file=config["fan_state_file"], proc_root=config["proc_root"], clock=clock,
        user_labels=config["user_labels"])
    registry = CollectorRegistry()
    registry.register(collector)
    registry.register(ccc_container_metrics.ContainerCollector(
        collector.containers.call, proc_root=config["proc_root"], user_labels=config["user_labels"]))
    ProcessCollector(registry=registry)
    return registry, collector


class _QuietHandler(WSGIRequestHandler):
    """No access log line per scrape (the journal would fill with them)."""

    def log_message(self, format, *args):  # noqa: A002  (the signature of the base class)
        pass


class _Server6(ThreadingWSGIServer):
    address_family = socket.AF_INET6


# How long the exporter waits for its listen address to appear (a Docker bridge's gateway exists
# only while dockerd has the network up: at boot, or while the docker role recreates it).
ADDRESS_WAIT = 120.0


def serve(registry, address, port, wait=ADDRESS_WAIT, stop=None):
    """
    Serve ``registry`` over HTTP in a daemon thread; returns the server (``server_port``,
    ``shutdown()``). Built here rather than by ``start_http_server``, which returns nothing in
    prometheus-client 0.16 (Debian 12's ``python3-prometheus-client``, what nodes run). An
    address that is not on the host yet is waited for (up to ``wait`` seconds, or until ``stop``
    is set) instead of failing the service into systemd's restart limit.
    """
    server_class = _Server6 if ":" in address else ThreadingWSGIServer
    deadline = time.monotonic() + wait
    while True:
        try:
            server = make_server(address, port, make_wsgi_app(registry), server_class, handler_class=_QuietHandler)
            break
        except OSError as exc:
            if exc.errno != errno.EADDRNOTAVAIL or time.monotonic() > deadline or (stop and stop.is_set()):
                raise
            log.warning("listen address %s is not on this host yet (Docker network down?); waiting", address)
            (stop or threading.Event()).wait(2.0)
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    return server


def main(argv=None):
    parser = argparse.ArgumentParser(description="CCC GPU exporter (NVML, Prometheus)")
    parser.add_argument("--config", help="YAML configuration file (e.g. /etc/ccc/gpu-exporter.yaml)")
    parser.add_argument("--once", action="store_true", help="print one collection to stdout and exit")
    args = parser.parse_args(argv)
    try:
        config = ccc_exporter_config.load_file(args.config)
    except ccc_exporter_config.ConfigError as exc:
        print(f"ccc_gpu_exporter: {exc}", file=sys.stderr)
        return 2
    # force: drop any handler a library put on the root logger (Salt's buffering one, if importable).
    logging.basicConfig(level=config["log_level"].upper(), format="%(levelname)s %(name)s: %(message)s",
                        force=True)
    registry, collector = build(config)
    if args.once:
        sys.stdout.write(generate_latest(registry).decode("utf-8"))
        return 0 if collector.last_ok else 1
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    server = serve(registry, config["listen_address"], config["port"], stop=stop)
    log.info("serving GPU metrics on %s:%d (every path)", config["listen_address"], server.server_port)
    stop.wait()
    server.shutdown()
    collector.nvml.reset()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
