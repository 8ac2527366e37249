#!/usr/bin/env python3
"""Benchmark: the master's work per settings edit by cluster size (issue 21, point 4).

Three parts, each on a synthetic master (temporary cachedir, pki_dir and pillar roots; no master
process, no Docker): every minion's grains and pillar in Salt's own cache (``localfs``), the same
site on each (S containers of S researchers, allowed on every node) plus the node's ``ccc:node``;
the publisher and job cache are a fake ``LocalClient`` (jobs are published and return at once).

1. **One edit** (``ccc.redeploy`` of a stack the record does not know, on an idle master: the
   path that publishes), per size M minions x S stacks: the whole call, and the runner's work
   before it publishes (``to publish``: until the publisher is called), split into where a stack
   goes (``placement``: the redeploy index, or every minion's cached pillar when the tree has no
   index or the index cannot be trusted), reading the redeploy record (lock, load) and the rest
   (``decide``); after it, the (fake) publish and writing the record. Also ``ccc.targets``. With
   the index, the time to build it from the M pillars is shown (the pillar watch builds it as it
   compiles).
2. **Pillar watch** with W minions, a real pillar tree (the repository's ``pillar/top.sls`` and a
   site root with ``site/init.sls`` and one ``site/nodes/<id>.sls`` per minion): the first run
   (compiles every minion), a run with nothing changed, and a run after an edit to one node's
   file: time and pillars compiled.
3. **Record** after E edits: edits of random stacks (S stacks, 10 minions) on a simulated clock
   (0.5 s apart; a flush, as the job-return reactor's, every 10 edits), the default limits: the
   size of the redeploy record as the edits go on (it must stay bounded).

Usage (from the repository root)::

    .venv/bin/python bench/runner_scale.py                  # 10x10, 100x1000, 500x5000; watch 500x100; 10,000 edits
    .venv/bin/python bench/runner_scale.py --minions 2 --stacks 2 --edits 20 --repeat 1   # smallest: a few seconds
    .venv/bin/python bench/runner_scale.py --tree /tmp/before   # the runner and _utils of another checkout

Smallest (the suite's smoke test): ``--minions 2 --stacks 2 --edits 20 --repeat 1``, about a second.

``--minions M --stacks S``: every part at that one size (one edit at MxS, the watch with M
minions and S stacks, the record with S stacks). ``--edits E``: edits for part 3 (default 10000).
``--repeat R``: edits timed per size in part 1 (default 5; 3 at 500x5000), median shown.
``--tree DIR``: load ``_runners/ccc.py`` and ``_utils`` from DIR (a ``git worktree`` of an older
commit) to compare before and after back to back. Prints ``uptime`` first.
"""

import argparse
import contextlib
import importlib
import importlib.util
import json
import os
import pathlib
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

REPO = pathlib.Path(__file__).resolve().parent.parent
SIZES = ((10, 10), (100, 1000), (500, 5000))
WATCH = (500, 100)
RECORD_MINIONS = 10
RECORD_STACKS = 200


def _arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minions", type=int, help="one size: M minions (with --stacks)")
    parser.add_argument("--stacks", type=int, help="one size: S stacks (with --minions)")
    parser.add_argument("--edits", type=int, default=10000, help="edits for the record part (default 10000)")
    parser.add_argument("--repeat", type=int, help="edits timed per size (default 5, 3 at 500x5000)")
    parser.add_argument("--tree", type=pathlib.Path, default=REPO, help="checkout whose runner and _utils run")
    arguments = parser.parse_args()
    if (arguments.minions is None) != (arguments.stacks is None):
        parser.error("--minions and --stacks go together")
    if arguments.minions is not None and (arguments.minions < 1 or arguments.stacks < 1):
        parser.error("--minions and --stacks must be at least 1")
    return arguments


def _load(tree):
    """The runner module of ``tree`` (its ``_utils`` first on the path) and its ``ccc_redeploy``."""
    sys.path[:0] = [str(tree / "_utils")]
    import salt.cache  # noqa: F401 - loaded before the runner, as on a master
    spec = importlib.util.spec_from_file_location("ccc_runner", tree / "_runners" / "ccc.py")
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    try:
        index = importlib.import_module("ccc_redeploy_index")
    except ImportError:
        index = None
    return runner, importlib.import_module("ccc_redeploy"), index


def _site(stacks, minions):
    users, entries = {}, []
    for number in range(stacks):
        email = f"user{number:04d}@example.org"
        users[email] = {"USER_NAME": f"user{number:04d}", "USER_FULLNAME": f"User {number}", "USER_TYPE": "researcher"}
        entries.append({"STACK_NAME": f"box-{number:04d}", "USER_EMAIL": email, "CONTAINER_IMAGE": "vicoslab/ccc:base",
                        "FRP_PORTS": {"TCP": [22]}, "INSTALL_PACKAGES": "htop nano"})
    nodes = [_node(number) for number in range(minions)]
    return {"user_types": {"researcher": {"allowed_nodes": nodes, "default_nodes": nodes[:1]}},
            "users": users, "containers": entries}


def _node(number):
    return f"gpu{number:03d}"


def _minion(number):
    return f"{_node(number)}.lab"


def _opts(root, **extra):
    import salt.config

    opts = salt.config.master_config(None)
    opts.update(cachedir=str(root / "cache"), pki_dir=str(root / "pki"), minion_data_cache=True, cache="localfs",
                conf_file=str(root / "master"), ext_pillar=[], **extra)
    return opts


def _keys(root, minions):
    """Accepted keys, their folder's timestamp set back (as on a master whose keys are not
    being accepted right now)."""
    folder = root / "pki" / "minions"
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(minions):
        (folder / _minion(number)).write_text("key\n")
    past = time.time() - 60
    os.utime(folder, (past, past))


def _cached_master(root, minions, stacks):
    import salt.cache

    opts = _opts(root)
    _keys(root, minions)
    cache, site = salt.cache.factory(opts), _site(stacks, minions)
    for number in range(minions):
        cache.store("grains", _minion(number), {"id": _minion(number)})
        cache.store("pillar", _minion(number), {"ccc": dict(site, node={"name": _node(number)})})
    return opts


class _FakeClient:
    """The master's publisher and job cache: every job is published to the minions asked and
    has returned from all of them."""

    def __init__(self):
        self.jobs = {}

    def run_job(self, minions, fun, **_):
        jid = f"{len(self.jobs):020d}"
        self.jobs[jid] = list(minions) if isinstance(minions, (list, tuple)) else [minions]
        return {"jid": jid, "minions": self.jobs[jid]}

    def get_cache_returns(self, jid):
        return {minion: {"ret": {}} for minion in self.jobs.get(jid, ())}


class _Timer:
    """Time spent in wrapped functions by category; a call inside another timed call counts once."""

    def __init__(self):
        self.spent, self.depth, self.calls = {}, 0, set()

    def wrap(self, category, function):
        def timed(*args, **kwargs):
            self.calls.add(function.__name__)
            if self.depth:
                return function(*args, **kwargs)
            self.depth += 1
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.spent[category] = self.spent.get(category, 0.0) + time.perf_counter() - started
                self.depth -= 1
        return timed

    def context(self, entering, leaving, manager):
        @contextlib.contextmanager
        def timed(*args, **kwargs):
            started = time.perf_counter()
            with manager(*args, **kwargs) as value:
                self.spent[entering] = self.spent.get(entering, 0.0) + time.perf_counter() - started
                yield value
                started = time.perf_counter()
            self.spent[leaving] = self.spent.get(leaving, 0.0) + time.perf_counter() - started
        return timed


@contextlib.contextmanager
def _instrumented(runner, redeploy):
    """Where a stack goes and the record, wrapped with one ``_Timer`` (restored afterwards)."""
    timer, originals = _Timer(), []
    for owner, names in ((redeploy, ("targets_for", "user_for", "placement_from")), (runner._Master, ("cccs", "placement"))):
        for name in names:
            if hasattr(owner, name):
                originals.append((owner, name, getattr(owner, name)))
                setattr(owner, name, timer.wrap("placement", getattr(owner, name)))
    originals.append((redeploy, "open_record", redeploy.open_record))
    redeploy.open_record = timer.context("record read", "record write", redeploy.open_record)
    try:
        yield timer
    finally:
        for owner, name, value in originals:
            setattr(owner, name, value)


def _build_index(opts, index, minions):
    """The redeploy index from the cached pillars, minion by minion (what the watch's compiles give)."""
    import salt.cache

    cache, summaries = salt.cache.factory(opts), {}
    for number in range(minions):
        pillar = cache.fetch("pillar", _minion(number))
        summaries[_minion(number)] = index.summary(pillar["ccc"], _minion(number))
    stamp = index.keys_stamp(opts["pki_dir"])
    index.write(index.folder(opts["cachedir"]), summaries, (), stamp, every=True)


def one_edit(modules, sizes, repeat):
    runner, redeploy, index = modules
    import salt.client

    print(f"1. one settings edit (ccc.redeploy, idle master, publishes); median of the timed edits (ms); "
          f"index: {'yes' if index else 'no (this tree has none)'}")
    print(f"{'minions':>7} {'stacks':>6} {'index build':>11} {'ccc.targets':>11} {'edit':>7} | {'to publish':>10} "
          f"{'placement':>9} {'record rd':>9} {'decide':>6} | {'publish':>7} {'record wr':>9}  read from")
    for minions, stacks in sizes:
        times = repeat or (3 if minions * stacks >= 500 * 5000 else 5)
        with tempfile.TemporaryDirectory() as tmp:
            opts = _cached_master(pathlib.Path(tmp), minions, stacks)
            opts["ccc_redeploy"] = {"max_applies": 10 ** 6, "window": 60, "job_timeout": 300}
            runner.__opts__ = opts
            client = _FakeClient()
            salt.client.get_local_client = lambda *_args, **_kwargs: client
            build = float("nan")
            timer, run_job, reached = _Timer(), client.run_job, []
            client.run_job = timer.wrap("publish", lambda *args, **kwargs: (reached.append(time.perf_counter()),
                                                                           run_job(*args, **kwargs))[1])
            if index:
                started = time.perf_counter()
                _build_index(opts, index, minions)
                build = 1000 * (time.perf_counter() - started)
            target_walls = []
            for turn in range(times):
                started = time.perf_counter()
                found = runner.targets(f"box-{turn % stacks:04d}")
                target_walls.append(1000 * (time.perf_counter() - started))
                assert len(found) == minions, (len(found), minions)
            rows, sources = [], set()
            for turn in range(times):
                record = pathlib.Path(opts["cachedir"]) / "ccc-redeploy" / "record.json"
                record.unlink(missing_ok=True)
                with _instrumented(runner, redeploy) as wrapped:
                    wrapped.spent, wrapped.calls, timer.spent = {}, set(), {}
                    reached.clear()
                    started = time.perf_counter()
                    result = runner.redeploy(f"box-{turn % stacks:04d}", version=f"{turn + 1}:1:1:1")
                    total = 1000 * (time.perf_counter() - started)
                spent = {key: 1000 * value for key, value in dict(wrapped.spent, **timer.spent).items()}
                assert result["action"] == "apply" and len(result["targets"]) == minions, result
                before = 1000 * (reached[0] - started)
                rows.append((total, before, spent.get("placement", 0.0), spent.get("record read", 0.0),
                             before - spent.get("placement", 0.0) - spent.get("record read", 0.0),
                             spent.get("publish", 0.0), spent.get("record write", 0.0)))
                sources.add("pillar cache" if "cccs" in wrapped.calls else "index")
        total, before, placement, read, decide, publish, write = (statistics.median(column) for column in zip(*rows))
        print(f"{minions:>7} {stacks:>6} {build:11.1f} {statistics.median(target_walls):11.2f} {total:7.2f} | "
              f"{before:10.2f} {placement:9.2f} {read:9.2f} {decide:6.2f} | {publish:7.2f} {write:9.2f}  "
              f"{', '.join(sorted(sources))}")


def _pillar_tree(root, minions, stacks):
    site = root / "site-pillar"
    (site / "site" / "nodes").mkdir(parents=True)
    (site / "site" / "init.sls").write_text(yaml.safe_dump({"ccc": _site(stacks, minions)}))
    for number in range(minions):
        (site / "site" / "nodes" / f"{_minion(number).replace('.', '_')}.sls").write_text(
            yaml.safe_dump({"ccc": {"node": {"name": _node(number)}}}))
    return [str(REPO / "pillar"), str(site)]


def pillar_watch(modules, minions, stacks):
    runner = modules[0]
    import salt.cache
    import salt.client
    import salt.pillar

    print(f"\n2. ccc.pillar_watch, {minions} minions, {stacks} stacks in site/init.sls, one site/nodes/<id>.sls each")
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        opts = _opts(root, pillar_roots={"base": _pillar_tree(root, minions, stacks)})
        _keys(root, minions)
        cache = salt.cache.factory(opts)
        for number in range(minions):
            cache.store("grains", _minion(number), {"id": _minion(number)})
        runner.__opts__ = opts
        client = _FakeClient()
        salt.client.get_local_client = lambda *_args, **_kwargs: client
        compiles = [0]
        compile_pillar = salt.pillar.Pillar.compile_pillar

        def counted(self, *args, **kwargs):
            compiles[0] += 1
            return compile_pillar(self, *args, **kwargs)

        salt.pillar.Pillar.compile_pillar = counted
        node_file = root / "site-pillar" / "site" / "nodes" / f"{_minion(minions // 2).replace('.', '_')}.sls"
        print(f"{'run':>28} {'seconds':>8} {'compiled':>9} {'refreshed':>9}")
        for name, change in (("first (no record)", None), ("nothing changed", None),
                             (f"one node's file ({_minion(minions // 2)})", node_file)):
            if change:
                change.write_text(yaml.safe_dump({"ccc": {"node": {"name": _node(minions // 2), "gpu_group": "a"}}}))
            compiles[0] = 0
            started = time.perf_counter()
            result = runner.pillar_watch()
            wall = time.perf_counter() - started
            print(f"{name:>28} {wall:8.2f} {compiles[0]:>9} {len(result.get('refreshed') or ()):>9}")
        salt.pillar.Pillar.compile_pillar = compile_pillar


def record_size(modules, stacks, edits):
    runner, _, index = modules
    import salt.client

    print(f"\n3. the redeploy record over {edits} edits of random stacks ({RECORD_MINIONS} minions, {stacks} stacks, "
          "0.5 s apart on a simulated clock, default limits, a flush every 10 edits)")
    print(f"{'edits':>7} {'record bytes':>12} {'stacks':>7} {'users':>6} {'versions':>9} {'median edit ms':>15}")
    with tempfile.TemporaryDirectory() as tmp:
        opts = _cached_master(pathlib.Path(tmp), RECORD_MINIONS, stacks)
        if index:
            _build_index(opts, index, RECORD_MINIONS)
        runner.__opts__ = opts
        client = _FakeClient()
        salt.client.get_local_client = lambda *_args, **_kwargs: client
        clock = [1_000_000.0]
        runner.time = _Clock(clock)
        chooser, walls = random.Random(4), []
        marks = {max(1, edits * part // 5) for part in range(1, 6)}
        path = pathlib.Path(opts["cachedir"]) / "ccc-redeploy" / "record.json"
        for edit in range(1, edits + 1):
            clock[0] += 0.5
            started = time.perf_counter()
            runner.redeploy(f"box-{chooser.randrange(stacks):04d}", version=f"{edit}:1:1:1")
            walls.append(1000 * (time.perf_counter() - started))
            if edit % 10 == 0:
                runner.flush()
            if edit in marks:
                record = json.loads(path.read_text())
                print(f"{edit:>7} {path.stat().st_size:>12} {len(record['stacks']):>7} {len(record['users']):>6} "
                      f"{sum(len(items) for items in record['versions'].values()):>9} "
                      f"{statistics.median(walls):15.2f}")
        runner.time = time


class _Clock:
    """``time`` for the runner with ``time()`` on a simulated clock."""

    def __init__(self, clock):
        self._clock = clock

    def time(self):
        return self._clock[0]

    def __getattr__(self, name):
        return getattr(time, name)


def main():
    arguments = _arguments()
    print(subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip())
    print(f"tree: {arguments.tree}")
    tree = arguments.tree.resolve()
    one = arguments.minions is not None
    sizes = [(arguments.minions, arguments.stacks)] if one else list(SIZES)
    modules = _load(tree)
    one_edit(modules, sizes, arguments.repeat)
    pillar_watch(modules, *((arguments.minions, arguments.stacks) if one else WATCH))
    record_size(modules, arguments.stacks if one else RECORD_STACKS, arguments.edits)
    shutil.rmtree(REPO / "bench" / "__pycache__", ignore_errors=True)


if __name__ == "__main__":
    main()
