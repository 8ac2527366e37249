"""The fast redeploy of one stack after a settings edit: the job the master sends for each path
(``ccc_redeploy.job``) and how event readers tell its stack (``job_stack``), when the master may
trust a node's in-memory pillar (``ccc_pillar_watch.holds_current``), and the node lock that
keeps it apart from a state run changing containers (``ccc_node_lock``, taken by ``ccc_docker``)."""

import fcntl
import os
import threading

import pytest

import support.site  # noqa: F401  (puts _utils on the path)
from support.scripts import load_module
from support.site import sample_ccc

import ccc_node_lock  # noqa: E402
import ccc_pillar_watch  # noqa: E402
import ccc_redeploy  # noqa: E402

FILES = {"/p/top.sls": [1, 1], "/p/site/nodes/a.sls": [2, 2]}
NOW = 10_000.0


def _seen(files=FILES, digests=("a", "b"), refreshed=None):
    return {"fingerprint": ccc_pillar_watch.map_fingerprint(files), "files": files,
            "digests": {minion: "d" for minion in digests}, "refreshed": refreshed or {}}


def test_the_fast_job_names_the_stack_and_the_state_job_limits_the_apply_to_it():
    assert ccc_redeploy.job("box", None, fast=True) == ("ccc_docker.redeploy", ["box"], {})
    assert ccc_redeploy.job("box", "held back", fast=True) == ("ccc_docker.redeploy", ["box"], {"notice": "held back"})
    assert ccc_redeploy.job("box", "held back", fast=False) == (
        "state.apply", ["containers"], {"queue": True, "pillar": {"containers": "box", "ccc_notice": {"box": "held back"}}})
    assert ccc_redeploy.job("box", None, fast=False)[2] == {"queue": True, "pillar": {"containers": "box"}}


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("notice", [None, "held back"])
def test_an_event_reader_tells_the_stack_of_either_job_as_salt_passes_it(fast, notice):
    fun, arg, kwarg = ccc_redeploy.job("box", notice, fast)
    published = arg + ([dict(kwarg, __kwarg__=True)] if kwarg else [])  # salt/job/<jid>/new "arg", ret "fun_args"
    assert ccc_redeploy.job_stack(fun, published) == "box"


@pytest.mark.parametrize("fun, args", [
    ("state.apply", ["containers"]),                                     # a full reconcile
    ("state.apply", ["containers", {"sync_mods": "all", "__kwarg__": True}]),
    ("state.apply", ["containers", {"pillar": {"containers": ["a", "b"]}}]),  # not one stack
    ("test.ping", []), ("ccc_docker.redeploy", []), ("ccc_docker.redeploy", [{"name": 3}]), (None, None),
])
def test_other_jobs_have_no_stack(fun, args):
    assert ccc_redeploy.job_stack(fun, args) is None


def test_a_node_holds_a_current_pillar_once_the_watch_saw_the_files_and_its_refresh_settled():
    settled = NOW - ccc_pillar_watch.REFRESH_SETTLE
    assert ccc_pillar_watch.holds_current(_seen(refreshed={"a": settled}), FILES, ["a", "b"], NOW)
    assert ccc_pillar_watch.holds_current(_seen(), FILES, ["a"], NOW)


@pytest.mark.parametrize("case", ["file edited", "external pillar", "no record", "not compiled", "refresh under way",
                                  "refresh not asked", "no minions"])
def test_a_node_whose_pillar_may_be_stale_gets_a_state_run(case):
    seen, files, minions = _seen(), dict(FILES), ["a", "b"]
    if case == "file edited":  # an admin's edit the watch has not acted on yet
        files["/p/site/nodes/a.sls"] = [3, 3]
    elif case == "external pillar":  # no file tells about it
        files = None
    elif case == "no record":  # the watch has not run since the master started
        seen = {}
    elif case == "not compiled":  # accepted since the watch last compiled
        minions = ["a", "c"]
    elif case == "refresh under way":
        seen["refreshed"] = {"b": NOW - 1}
    elif case == "refresh not asked":  # the ask failed: b may hold any pillar
        seen["refreshed"] = {"b": None}
    else:
        minions = []
    assert not ccc_pillar_watch.holds_current(seen, files, minions, NOW)


def test_the_watch_forgets_settled_refreshes_but_not_failed_asks():
    before = {"a": NOW - ccc_pillar_watch.REFRESH_SETTLE, "b": NOW - 1, "c": None, "gone": None, "d": "junk"}
    assert ccc_pillar_watch.refreshes_kept(before, {"e": NOW}, ["a", "b", "c", "d", "e"], NOW) == {
        "b": NOW - 1, "c": None, "e": NOW}
    assert ccc_pillar_watch.refreshes_kept(before, {"c": NOW}, ["c"], NOW) == {"c": NOW}  # asked again, and it went
    assert ccc_pillar_watch.refreshes_kept(None, {}, ["a"], NOW) == {}


def test_the_node_lock_is_one_across_processes_and_gone_with_its_holder(tmp_path):
    with ccc_node_lock.held(str(tmp_path)):
        pid = os.fork()
        if pid == 0:  # another job process: it cannot take the lock while this one holds it
            fd = os.open(tmp_path / ccc_node_lock.LOCK_NAME, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                os._exit(1)
            except BlockingIOError:
                os._exit(0)
        assert os.waitpid(pid, 0)[1] == 0
    fd = os.open(tmp_path / ccc_node_lock.LOCK_NAME, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released
    os.close(fd)
    assert oct(os.stat(tmp_path / ccc_node_lock.LOCK_NAME).st_mode & 0o777) == "0o600"


def test_the_node_lock_never_follows_a_link(tmp_path):
    (tmp_path / "elsewhere").write_text("")
    (tmp_path / ccc_node_lock.LOCK_NAME).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError):
        with ccc_node_lock.held(str(tmp_path)):
            pass


DEAD_ENGINE = "tcp://127.0.0.1:9"


def _module(tmp_path, pillar=None):
    ccc = sample_ccc("node1")
    ccc["node"].update(docker_url=DEAD_ENGINE, state_dir=str(tmp_path / "state"), binds_dir=str(tmp_path / "binds"))
    return load_module("_modules/ccc_docker.py", "ccc_docker_fast", pillar=pillar or {"ccc": ccc},
                       grains={"id": "node1"}, context={}, salt={}, opts={"cachedir": str(tmp_path / "cache")})


@pytest.mark.parametrize("call", ["redeploy", "deploy_many", "remove", "remove_orphans", "private_mounts"])
def test_every_function_that_changes_containers_waits_for_the_node_lock(tmp_path, call):
    """A state run holds the lock (here: this test); the fast redeploy, or another state run's
    step, acts only once it is released. Test mode only looks and does not wait."""
    module = _module(tmp_path)
    args = {"redeploy": ("ana-main",), "deploy_many": (["ana-main"],), "remove": ("ana-main",)}.get(call, ())
    done = threading.Event()

    def act():
        try:
            getattr(module, call)(*args)
        except Exception:  # noqa: BLE001 - the engine does not answer: what matters is when it ran
            pass
        done.set()

    with ccc_node_lock.held(str(tmp_path / "cache")):
        worker = threading.Thread(target=act)
        worker.start()
        assert not done.wait(1.0), f"{call} acted while the node lock was held"
        if call != "redeploy":
            looked = threading.Event()
            threading.Thread(target=lambda: (_call_quietly(getattr(module, call), *args, test=True), looked.set())).start()
            assert looked.wait(60), f"{call}(test=True) waited for the lock"
    assert done.wait(60)
    worker.join()


def _call_quietly(function, *args, **kwargs):
    try:
        function(*args, **kwargs)
    except Exception:  # noqa: BLE001 - the engine does not answer
        pass


def test_the_fast_redeploy_refuses_with_a_broken_pillar_or_an_unknown_stack(tmp_path):
    from salt.exceptions import CommandExecutionError

    broken = _module(tmp_path, pillar={"ccc": sample_ccc("node1"), "_errors": ["Rendering SLS 'site' failed"]})
    with pytest.raises(CommandExecutionError, match="^ana-main was not redeployed: this node's pillar has render errors"):
        broken.redeploy("ana-main")
    with pytest.raises(CommandExecutionError, match="^nobody was not redeployed: no container of that name"):
        _module(tmp_path).redeploy("nobody")
    assert not (tmp_path / "cache" / ccc_node_lock.LOCK_NAME).exists()  # refused before it waited for anything
