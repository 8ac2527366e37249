#!/usr/bin/env python3
"""Benchmark: the ccc_settings beacon with 1,000 watched settings files.

A synthetic site of 1,000 containers (one user and settings folder each, all allowed on this
node) in a temporary storage tree; the beacon runs as on a minion, from pillar (``from_pillar``
with ``immediate``), its file list from the real ``ccc_containers.watched_files``. Prints:

* start-up: the execution function, then the beacon's first call (1,000 inotify watches, 1,000
  lstat baselines, the dispatch thread);
* an idle call (what the minion pays every second), a call with the stat poll due (every
  ``poll_interval``, 30 s) and one with the file list due (the execution function again);
* the idle dispatch thread's CPU (it waits in poll()), and one edit's write -> fired time.

No Docker, no master:

    .venv/bin/python bench/beacon_scale.py [--files 1000] [--calls 2000] [--idle-seconds 5]

Smallest (the suite's smoke test): ``--files 10 --calls 100 --idle-seconds 1``, a few seconds.
"""

import argparse
import importlib.util
import pathlib
import resource
import statistics
import sys
import tempfile
import threading
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "_utils"), str(REPO / "_modules")]
sys.path.append(str(REPO / "_beacons"))
import ccc_containers  # noqa: E402



def _site(root, files):
    user_data = root / "user_data"
    users, containers = {}, []
    for index in range(files):
        email, stack = f"user{index:04d}@example.org", f"box-{index:04d}"
        users[email] = {"USER_NAME": f"user{index:04d}", "USER_FULLNAME": f"User {index}", "USER_TYPE": "researcher"}
        containers.append({"STACK_NAME": stack, "USER_EMAIL": email, "CONTAINER_IMAGE": "vicoslab/ccc:base"})
        folder = user_data / email / "container-settings"
        folder.mkdir(parents=True)
        (folder / f"{stack}.yml").write_text(f"{stack}: {{}}\n")
    return {"ccc": {"cluster": {"mount_points": {"nfs": {"user_data": str(user_data)}}},
                    "user_types": {"researcher": {"allowed_nodes": ["node1"], "default_nodes": ["node1"]}},
                    "users": users, "containers": containers}}, user_data


def _load_beacon(pillar, fired):
    spec = importlib.util.spec_from_file_location("ccc_settings_beacon", REPO / "_beacons" / "ccc_settings.py")
    beacon = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(beacon)
    ccc_containers.__pillar__, ccc_containers.__grains__ = pillar, {"id": "node1"}
    beacon.__context__, beacon.__opts__, beacon.__pillar__ = {}, {"id": "node1"}, pillar
    beacon.__salt__ = {"ccc_containers.watched_files": ccc_containers.watched_files,
                       "event.fire": lambda data, tag: fired.append((time.monotonic(), data)) or True}
    return beacon


def _cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _timed(function, repeat=1):
    """(median wall ms, CPU ms per call)."""
    walls, cpu = [], _cpu()
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        walls.append(1000 * (time.perf_counter() - started))
    return statistics.median(walls), 1000 * (_cpu() - cpu) / repeat


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000, help="watched settings files (default 1000)")
    parser.add_argument("--calls", type=int, default=2000, help="idle beacon calls timed (default 2000)")
    parser.add_argument("--idle-seconds", type=float, default=5, help="idle dispatch thread measured (default 5)")
    args = parser.parse_args()
    files, calls = args.files, args.calls
    with tempfile.TemporaryDirectory() as tmp:
        pillar, user_data = _site(pathlib.Path(tmp), files)
        fired = []
        beacon = _load_beacon(pillar, fired)
        config = [{"from_pillar": "ccc"}, {"immediate": True}]
        ask = _timed(ccc_containers.watched_files, repeat=5)
        start = _timed(lambda: beacon.beacon(config))
        state = beacon.__context__[beacon.CONTEXT_KEY]
        watcher = state["watcher"]
        assert len(watcher.files) == files and len(watcher.watched_dirs) == files
        idle = _timed(lambda: beacon.beacon(config), repeat=calls)

        def stat_poll():
            watcher.next_poll = 0
            beacon.beacon(config)

        def reconfigure():
            state["next_config"] = 0
            beacon.beacon(config)

        stat = _timed(stat_poll, repeat=20)
        listing = _timed(reconfigure, repeat=20)
        assert [t for t in threading.enumerate() if t.name == "ccc_settings-dispatch" and t.is_alive()]
        cpu_before, wall = _cpu(), time.monotonic()
        time.sleep(args.idle_seconds)
        beacon.beacon(config)  # Salt's call keeps the thread delivering
        thread_idle = 1000 * (_cpu() - cpu_before) / (time.monotonic() - wall)
        middle = files // 2
        path = user_data / f"user{middle:04d}@example.org" / "container-settings" / f"box-{middle:04d}.yml"
        written = time.monotonic()
        path.write_text(f"box-{middle:04d}: {{SHM_SIZE: 4g}}\n")
        deadline = written + 5
        while not fired and time.monotonic() < deadline:
            time.sleep(0.005)
        latency = 1000 * (fired[0][0] - written) if fired else float("nan")
        beacon.close(config)

    print(f"{files} watched settings files ({files} folders)")
    print(f"ccc_containers.watched_files           {ask[0]:8.1f} ms wall  {ask[1]:8.1f} ms CPU")
    print(f"beacon start-up (first call)           {start[0]:8.1f} ms wall  {start[1]:8.1f} ms CPU")
    print(f"idle call (every second)               {idle[0]:8.3f} ms wall  {idle[1]:8.3f} ms CPU  (median of {calls})")
    print(f"call with the stat poll (every 30 s)   {stat[0]:8.1f} ms wall  {stat[1]:8.1f} ms CPU")
    print(f"call with the file list (every 30 s)   {listing[0]:8.1f} ms wall  {listing[1]:8.1f} ms CPU")
    print(f"idle average incl. the 30 s work       {idle[1] + (stat[1] + listing[1]) / 30:8.3f} ms CPU per s")
    print(f"dispatch thread at idle                {thread_idle:8.3f} ms CPU per s (process, {args.idle_seconds:g} s)")
    print(f"one edit: write -> fired               {latency:8.1f} ms (quiet period 250 ms)")


if __name__ == "__main__":
    main()
