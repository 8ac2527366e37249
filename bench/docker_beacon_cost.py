#!/usr/bin/env python3
"""Benchmark: the idle cost of the ``ccc_docker`` beacon (not a test: prints figures).

Opens the beacon's events stream on a running Docker engine and measures, over ``--polls``
calls, the CPU time (process time) and wall time of one idle poll: ``EngineWatcher.poll`` alone,
and ``beacon()`` as Salt calls it every ``interval`` (configuration from pillar included). The
engine is only asked for ``GET /events`` once; an idle poll sends it nothing.

    .venv/bin/python bench/docker_beacon_cost.py --docker-url unix:///var/run/docker.sock [--polls 20000]

Smallest (the suite's smoke test): ``--polls 100``, a second. The beacon is loaded from
``_beacons/`` with that folder on the import path, as Salt's loader has it.
"""

import argparse
import importlib.util
import pathlib
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "_utils"), str(REPO / "_modules")]
sys.path.append(str(REPO / "_beacons"))  # the beacon's own helpers (_ccc_beacon_config)
import ccc_containers  # noqa: E402  (the beacon reads the node's docker_url and crash rules through it)


def load_beacon():
    spec = importlib.util.spec_from_file_location("ccc_docker_beacon", REPO / "_beacons" / "ccc_docker.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def per_call(function, calls):
    """(CPU µs, wall µs) per call of ``function``."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(calls):
        function()
    return (time.process_time() - cpu) / calls * 1e6, (time.perf_counter() - wall) / calls * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docker-url", default="unix:///var/run/docker.sock")
    parser.add_argument("--polls", type=int, default=20000)
    args = parser.parse_args()
    beacon = load_beacon()
    beacon.__context__ = {}
    beacon.__opts__ = {"id": "bench"}
    beacon.__pillar__ = {"ccc": {"node": {"docker_url": args.docker_url}}}
    ccc_containers.__pillar__, ccc_containers.__grains__ = beacon.__pillar__, {"id": "bench"}
    beacon.__salt__ = {"ccc_containers.settings": ccc_containers.settings,
                       "ccc_containers.crash_rules": ccc_containers.crash_rules}
    config = [{"from_pillar": "ccc"}, {"interval": 1}, {"disable_during_state_run": False}, {"_beacon_name": "ccc_docker"}]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        beacon.beacon(config)
        watcher = beacon.__context__[beacon.CONTEXT_KEY]
        if watcher.answering:
            break
        time.sleep(0.05)
    else:
        raise SystemExit(f"the engine at {args.docker_url} did not answer the events stream")
    for name, function in (("EngineWatcher.poll", watcher.poll), ("beacon() from pillar", lambda: beacon.beacon(config))):
        cpu, wall = per_call(function, args.polls)
        print(f"{name:22s} {cpu:6.1f} µs CPU, {wall:6.1f} µs wall per idle poll "
              f"({cpu * 86400 / 1e6:.2f} s CPU per day at one poll a second)")
    beacon.close(config)


if __name__ == "__main__":
    main()
