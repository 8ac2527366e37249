"""The pillar watch compiles only what an edit can change (``ccc_pillar_watch.plan`` and
``to_compile``), and ``ccc.pillar_watch`` on a real pillar tree keeps the redeploy index right:
after an edit to one node's file it compiles that node alone, and a redeploy then reaches
exactly the nodes the placement names (moves, pins, removed stacks, a new minion)."""

import importlib.util
import json
import os
import pathlib
import time
import types

import pytest
import yaml

import support.site  # noqa: F401  (puts _utils on the path)

import ccc_pillar_watch  # noqa: E402
import ccc_redeploy_index  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
A, B, TOP, SITE, DATA = "/p/site/nodes/a.sls", "/p/site/nodes/b.sls", "/p/top.sls", "/p/site/init.sls", "/p/site/data.yaml"
FILES = {A: [1, 1], B: [1, 1], TOP: [1, 1], SITE: [1, 1], DATA: [1, 1], "/p/README": [1, 1]}
READS = {"a": [TOP, SITE, DATA, A], "b": [TOP, SITE, DATA, B]}


def _seen(files=FILES, reads=READS):
    return {"fingerprint": ccc_pillar_watch.map_fingerprint(files), "files": files, "reads": reads,
            "digests": {minion: "d" for minion in reads}}


@pytest.mark.parametrize("edit, expected", [
    ({A: [2, 1]}, ["a"]),                      # one node's file: that node
    ({B: [1, 2]}, ["b"]),                      # same size, another mtime
    ({DATA: [5, 5]}, ["a", "b"]),              # a file both compiles read (a Jinja import)
    ({TOP: [2, 2]}, ["a", "b"]),               # the top file
    ({"/p/site/nodes/c.sls": [1, 1]}, ["a", "b"]),  # a new file: a pattern may match it
    ({"/p/README": [3, 3]}, ["a", "b"]),       # a file no compile read: who reads it is not known
    ({}, []),                                  # nothing changed
])
def test_an_edit_compiles_the_minions_that_read_the_file(edit, expected):
    now = dict(FILES, **edit)
    assert ccc_pillar_watch.plan(_seen(), now, ["a", "b"], force=False, index_whole=True)[0] == expected


def test_a_removed_file_compiles_its_readers():
    now = {path: stat for path, stat in FILES.items() if path != A}
    assert ccc_pillar_watch.plan(_seen(), now, ["a", "b"], force=False, index_whole=True) == (["a"], True)


def test_a_new_minion_or_one_without_reads_is_compiled():
    assert ccc_pillar_watch.plan(_seen(), FILES, ["a", "b", "c"], False, True) == (["c"], False)
    reads = {"a": READS["a"]}  # b's compile recorded nothing (no cached grains, say): it may read anything
    assert ccc_pillar_watch.plan(_seen(reads=reads), dict(FILES, **{A: [9, 9]}), ["a", "b"], False, True)[0] == ["a", "b"]


@pytest.mark.parametrize("case", ["force", "external pillar", "older record", "index not whole"])
def test_every_minion_is_compiled_when_narrowing_cannot_be_trusted(case):
    seen, files, force, whole = _seen(), dict(FILES), False, True
    if case == "force":
        force = True
    elif case == "external pillar":
        files = None
    elif case == "older record":
        seen = {"fingerprint": "x", "digests": {"a": "d", "b": "d"}}  # a watch before the file map
    else:
        whole = False
    assert ccc_pillar_watch.plan(seen, files, ["a", "b"], force, whole)[0] == ["a", "b"]


# --- the runner's watch on a real pillar tree ---------------------------------------------------

class _Client:
    """The master's publisher: records jobs; every job has returned."""

    def __init__(self):
        self.jobs = []

    def run_job(self, minions, fun, **kwargs):
        self.jobs.append((fun, list(minions), kwargs))
        return {"jid": str(len(self.jobs)), "minions": list(minions)}

    def get_cache_returns(self, jid):
        fun, minions, _ = self.jobs[int(jid) - 1]
        return {minion: {"ret": {}} for minion in minions}

    def take(self, fun):
        found = [(minions, kwargs) for name, minions, kwargs in self.jobs if name == fun]
        self.jobs = []
        return found


def _site(containers):
    users = {"ana@example.org": {"USER_NAME": "ana", "USER_FULLNAME": "Ana", "USER_TYPE": "researcher"},
             "bor@example.org": {"USER_NAME": "bor", "USER_FULLNAME": "Bor", "USER_TYPE": "student"}}
    return {"ccc": {"user_types": {"researcher": {"allowed_nodes": ["gpu1", "gpu2"], "default_nodes": ["gpu1"]},
                                   "student": {"allowed_nodes": ["gpu3"], "default_nodes": ["gpu3"]}},
                    "users": users, "containers": containers}}


BOX = {"STACK_NAME": "box", "USER_EMAIL": "ana@example.org", "CONTAINER_IMAGE": "x"}
THESIS = {"STACK_NAME": "thesis", "USER_EMAIL": "bor@example.org", "CONTAINER_IMAGE": "x"}


@pytest.fixture
def master(tmp_path, monkeypatch):
    """A master (cachedir, keys, cached grains, pillar roots: the repository's top file and a
    site root) of minions gpu1..gpu3, and the ccc runner on it."""
    import salt.cache
    import salt.client
    import salt.config

    site = tmp_path / "site"
    (site / "site" / "nodes").mkdir(parents=True)
    (site / "site" / "init.sls").write_text("{% import_yaml 'site/data.yaml' as data %}\n"
                                            + yaml.safe_dump(_site([BOX, THESIS])))
    (site / "site" / "data.yaml").write_text("x: 1\n")
    opts = salt.config.master_config(None)
    opts.update(cachedir=str(tmp_path / "cache"), pki_dir=str(tmp_path / "pki"), minion_data_cache=True,
                cache="localfs", conf_file=str(tmp_path / "master"), ext_pillar=[],
                pillar_roots={"base": [str(REPO / "pillar"), str(site)]})
    cache = salt.cache.factory(opts)
    for number in (1, 2, 3):
        _node_file(site, number, {})
        cache.store("grains", f"gpu{number}.lab", {"id": f"gpu{number}.lab"})
        _accept(tmp_path, f"gpu{number}.lab", cache)
    spec = importlib.util.spec_from_file_location("ccc_runner_watch", REPO / "_runners" / "ccc.py")
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    runner.__opts__ = opts
    client = _Client()
    monkeypatch.setattr(salt.client, "get_local_client", lambda *_args, **_kwargs: client)
    compiled = []
    compile_pillar = ccc_pillar_watch._RecordingPillar.compile_pillar

    def counted(self, *args, **kwargs):
        compiled.append(self.minion_id)
        return compile_pillar(self, *args, **kwargs)

    monkeypatch.setattr(ccc_pillar_watch._RecordingPillar, "compile_pillar", counted)
    return runner, client, site, compiled, tmp_path


def _node_file(site, number, extra):
    (site / "site" / "nodes" / f"gpu{number}_lab.sls").write_text(
        yaml.safe_dump({"ccc": {"node": dict({"name": f"gpu{number}"}, **extra)}}))


def _accept(root, minion, cache):
    folder = root / "pki" / "minions"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / minion).write_text("key\n")
    past = time.time() - 60  # keys accepted a minute ago (a fresh change is not trusted yet)
    os.utime(folder, (past, past))


def _watch(runner, compiled):
    compiled.clear()
    result = runner.pillar_watch()
    return sorted(compiled), result


def _edit(path, text):
    """Write ``path`` with a modification time of its own (a second later than its last)."""
    old = path.stat().st_mtime if path.exists() else time.time()
    path.write_text(text)
    os.utime(path, (old + 1, old + 1))


def _placement(runner, stack):
    """Where a redeploy of ``stack`` goes, and whether the index said so (no pillar read)."""
    master = runner._Master()
    found = master.placement(stack)
    return found, master._cccs is None


def test_an_edit_to_one_node_file_compiles_that_node_alone(master):
    runner, client, site, compiled, _ = master
    assert _watch(runner, compiled)[0] == ["gpu1.lab", "gpu2.lab", "gpu3.lab"]  # the first run: all
    # it asks each node to refresh (the pillar they hold is not known) and reconciles none
    assert [(fun, minions) for fun, minions, _ in client.jobs] == [
        ("saltutil.refresh_pillar", [minion]) for minion in ("gpu1.lab", "gpu2.lab", "gpu3.lab")]
    client.jobs = []
    assert _watch(runner, compiled) == ([], {"compiled": False, "refreshed": []})
    _node_file(site, 2, {"gpu_group": "a"})
    os.utime(site / "site" / "nodes" / "gpu2_lab.sls", (time.time() + 5,) * 2)
    names, result = _watch(runner, compiled)
    assert names == ["gpu2.lab"] and result["refreshed"] == ["gpu2.lab"]
    assert [minions for minions, _ in client.take("saltutil.refresh_pillar")] == [["gpu2.lab"]]
    _edit(site / "site" / "data.yaml", "x: 2\n")  # imported by site/init.sls: every minion read it
    assert _watch(runner, compiled)[0] == ["gpu1.lab", "gpu2.lab", "gpu3.lab"]


def test_a_file_one_node_imports_compiles_that_node_alone(master):
    """The reads include Jinja imports (else a change to the imported file would compile all)."""
    runner, client, site, compiled, _ = master
    (site / "site" / "gpu3.yaml").write_text("group: a\n")
    _edit(site / "site" / "nodes" / "gpu3_lab.sls", "{% import_yaml 'site/gpu3.yaml' as extra %}\n"
          "ccc: {node: {name: gpu3, gpu_group: {{ extra.group }}}}\n")
    _watch(runner, compiled)
    _edit(site / "site" / "gpu3.yaml", "group: b\n")
    names, result = _watch(runner, compiled)
    assert names == ["gpu3.lab"] and result["refreshed"] == ["gpu3.lab"]


def test_after_the_watch_a_redeploy_reaches_exactly_the_nodes_the_placement_names(master):
    runner, client, site, compiled, root = master
    assert _placement(runner, "box")[1] is False  # no index yet: every cached pillar is read
    _watch(runner, compiled)
    assert _placement(runner, "box") == ((["gpu1.lab", "gpu2.lab"], "ana@example.org"), True)
    assert _placement(runner, "thesis") == ((["gpu3.lab"], "bor@example.org"), True)
    # a node renamed in its own file: it no longer takes box; box pinned to gpu3 as well; thesis removed
    _node_file(site, 2, {"name": "gpu9"})
    os.utime(site / "site" / "nodes" / "gpu2_lab.sls", (time.time() + 5,) * 2)
    assert _watch(runner, compiled)[0] == ["gpu2.lab"]
    assert _placement(runner, "box") == ((["gpu1.lab"], "ana@example.org"), True)
    _edit(site / "site" / "init.sls", yaml.safe_dump(_site([dict(BOX, ALLOWED_NODES=["gpu3"])])))
    _watch(runner, compiled)
    assert _placement(runner, "box") == ((["gpu1.lab", "gpu3.lab"], "ana@example.org"), True)
    assert _placement(runner, "thesis")[0] == ([], None)  # gone from pillar: nowhere
    runner.__opts__["ccc_redeploy"] = {"max_applies": 100}
    client.take("state.apply")
    assert runner.redeploy("box", version="1:1:1:1")["targets"] == ["gpu1.lab", "gpu3.lab"]
    assert [minions for minions, _ in client.take("state.apply")] == [["gpu1.lab", "gpu3.lab"]]


def test_a_new_minion_is_read_from_the_pillar_cache_until_the_watch_has_compiled_it(master):
    import salt.cache

    runner, client, site, compiled, root = master
    _node_file(site, 4, {"name": "gpu2"})  # a new file: a top file's pattern may match it
    assert _watch(runner, compiled)[0] == ["gpu1.lab", "gpu2.lab", "gpu3.lab"]
    cache = salt.cache.factory(runner.__opts__)
    cache.store("grains", "gpu4.lab", {"id": "gpu4.lab"})
    cache.store("pillar", "gpu4.lab", _site([BOX]) | {"ccc": dict(_site([BOX])["ccc"], node={"name": "gpu2"})})
    (root / "pki" / "minions" / "gpu4.lab").write_text("key\n")  # accepted just now
    found, from_index = _placement(runner, "box")
    assert not from_index and "gpu4.lab" in found[0]  # the index is distrusted: every cached pillar read
    past = time.time() - 30
    os.utime(root / "pki" / "minions", (past, past))
    assert _watch(runner, compiled)[0] == ["gpu4.lab"]
    assert _placement(runner, "box") == ((["gpu1.lab", "gpu2.lab", "gpu4.lab"], "ana@example.org"), True)
    os.unlink(root / "pki" / "minions" / "gpu4.lab")  # its key deleted
    os.utime(root / "pki" / "minions", (past + 1, past + 1))
    assert _placement(runner, "box")[1] is False
    _watch(runner, compiled)
    assert _placement(runner, "box") == ((["gpu1.lab", "gpu2.lab"], "ana@example.org"), True)


def test_a_broken_pillar_keeps_the_minions_last_placement(master):
    runner, client, site, compiled, _ = master
    _watch(runner, compiled)
    _edit(site / "site" / "nodes" / "gpu1_lab.sls", "ccc: [unclosed\n")
    names, result = _watch(runner, compiled)
    assert names == ["gpu1.lab"] and result["refreshed"] == []  # not refreshed: it keeps its last good pillar
    assert _placement(runner, "box") == ((["gpu1.lab", "gpu2.lab"], "ana@example.org"), True)


def test_a_watch_already_running_makes_another_return_at_once(master):
    import fcntl

    runner, _, _, compiled, root = master
    folder = pathlib.Path(runner.__opts__["cachedir"]) / "ccc-redeploy"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "watch.lock", "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert runner.pillar_watch() == {"compiled": False, "refreshed": [], "busy": True}
    assert compiled == []


def test_the_watch_record_is_replaced_through_the_one_atomic_writer(master):
    """``ccc-pillar-watch.json`` is written by ``ccc_safefs.replace_file`` (a fresh O_EXCL name):
    a link planted at the fixed temporary name the runner used to write through is never
    followed, and the record is root's alone."""
    runner, _, _, compiled, root = master
    cachedir = pathlib.Path(runner.__opts__["cachedir"])
    cachedir.mkdir(parents=True, exist_ok=True)
    victim = root / "victim"
    victim.write_text("keep\n")
    (cachedir / "ccc-pillar-watch.json.tmp").symlink_to(victim)
    assert _watch(runner, compiled)[0] == ["gpu1.lab", "gpu2.lab", "gpu3.lab"]
    assert victim.read_text() == "keep\n"
    record = cachedir / "ccc-pillar-watch.json"
    assert set(json.loads(record.read_text())) == {"fingerprint", "digests", "files", "reads", "refreshed"}
    assert oct(record.stat().st_mode & 0o777) == "0o600"
    assert sorted(name for name in os.listdir(cachedir) if "pillar-watch" in name) == [
        "ccc-pillar-watch.json", "ccc-pillar-watch.json.tmp"]


def _published(runner, client, minions, notice=None):
    """The job one publish of ``box`` to ``minions`` sends: ``(fun, arg, kwarg)``."""
    client.jobs = []
    runner._Master().publish("box", minions, notice)
    (fun, _, kwargs), = client.jobs
    return fun, kwargs.get("arg"), kwargs.get("kwarg")


def _clock(runner, monkeypatch):
    """The runner's clock, set by the test (``clock.now``)."""
    clock = types.SimpleNamespace(now=time.time())
    monkeypatch.setattr(runner, "time", types.SimpleNamespace(time=lambda: clock.now))
    return clock


def test_a_redeploy_uses_the_nodes_pillar_in_memory_only_while_the_watch_knows_it_is_current(master, monkeypatch):
    """The fast redeploy (no pillar compile) goes out once the watch has seen the pillar files
    as they are and the nodes' refreshes it asked for have settled; an admin's edit it has not
    acted on yet, or a refresh under way, sends the state run that compiles a fresh pillar."""
    runner, client, site, compiled, _ = master
    clock = _clock(runner, monkeypatch)
    _watch(runner, compiled)  # the first run asks every node to refresh: which pillar they hold is not known
    assert _published(runner, client, ["gpu1.lab"])[0] == "state.apply"  # that refresh may be under way
    clock.now += ccc_pillar_watch.REFRESH_SETTLE
    assert _published(runner, client, ["gpu1.lab", "gpu2.lab"]) == ("ccc_docker.redeploy", ["box"], {})
    assert _published(runner, client, ["gpu1.lab"], notice="held") == ("ccc_docker.redeploy", ["box"], {"notice": "held"})

    _node_file(site, 2, {"gpu_group": "b"})  # the admin's edit, before the watch's next run
    os.utime(site / "site" / "nodes" / "gpu2_lab.sls", (time.time() + 5,) * 2)
    fun, arg, kwarg = _published(runner, client, ["gpu1.lab"])
    assert (fun, arg, kwarg["pillar"]) == ("state.apply", ["containers"], {"containers": "box"})
    assert _watch(runner, compiled)[1]["refreshed"] == ["gpu2.lab"]
    assert _published(runner, client, ["gpu1.lab"])[0] == "ccc_docker.redeploy"
    assert _published(runner, client, ["gpu1.lab", "gpu2.lab"])[0] == "state.apply"  # gpu2's refresh is under way
    clock.now += ccc_pillar_watch.REFRESH_SETTLE
    assert _published(runner, client, ["gpu1.lab", "gpu2.lab"])[0] == "ccc_docker.redeploy"


def test_a_node_the_watch_could_not_ask_to_refresh_gets_state_runs(master, monkeypatch):
    runner, client, site, compiled, _ = master
    clock = _clock(runner, monkeypatch)
    run_job = client.run_job

    def refresh_fails(minions, fun, **kwargs):
        if fun == "saltutil.refresh_pillar" and "gpu3.lab" in minions:
            raise OSError("publisher down")
        return run_job(minions, fun, **kwargs)

    client.run_job = refresh_fails
    _watch(runner, compiled)
    clock.now += ccc_pillar_watch.REFRESH_SETTLE
    assert _published(runner, client, ["gpu1.lab"])[0] == "ccc_docker.redeploy"
    assert _published(runner, client, ["gpu3.lab"])[0] == "state.apply"  # it may hold any pillar


def test_the_watchs_compiles_log_no_error_about_the_configured_ext_pillar(master, caplog):
    """The configured ext_pillar list runs from the master's config; handed to the compile as an
    on-demand pillar too (as Salt's own live compile does), it logged an ERROR on every compile
    that an admin reading the master log would chase."""
    runner, _client, _site, compiled, _ = master
    runner.__opts__["ext_pillar"] = [{"ccc_no_such_ext_pillar": {}}]  # any configured ext pillar
    with caplog.at_level("ERROR"):
        assert _watch(runner, compiled)[0] == ["gpu1.lab", "gpu2.lab", "gpu3.lab"]
    assert not [record.getMessage() for record in caplog.records if "On-demand pillar" in record.getMessage()]
