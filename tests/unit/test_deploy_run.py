"""A run over many containers without Docker (``ccc_deploy``, ``ccc_images``, ``ccc_keys``,
``ccc_hostkeys``): images looked up and pulled once per run however many containers and threads
ask, at most ``create_parallelism`` containers at once, one container's failure never another's,
GitHub keys falling back to the node's cached copy, and host keys sshd can read."""

import logging
import os
import shutil
import stat
import subprocess
import threading
import time
import urllib.error

import docker.errors
import pytest

import ccc_apply
import ccc_deploy
import ccc_hostkey_maker
import ccc_hostkey_spares
import ccc_hostkeys
import ccc_images
import ccc_keys
import ccc_pillar
import ccc_plan


@pytest.fixture(autouse=True)
def deploy_log(caplog, monkeypatch):
    """ccc_deploy's log goes to caplog only, not to Salt's deferred handler (printed at exit)."""
    logger = logging.getLogger("ccc_deploy")
    monkeypatch.setattr(logger, "propagate", False)
    monkeypatch.setattr(logger, "handlers", [caplog.handler])


class FakeImages:
    """``client.images`` of an engine that has ``present`` and can pull ``pullable`` (slowly)."""

    def __init__(self, present=(), pullable=()):
        self.present, self.pullable = set(present), set(pullable)
        self.gets, self.pulls = [], []
        self.lock = threading.Lock()

    def get(self, ref):
        with self.lock:
            self.gets.append(ref)
            if ref not in self.present:
                raise docker.errors.ImageNotFound(ref)
        return type("Image", (), {"id": f"sha256:{ref}", "attrs": {"Config": {"Labels": {"from": ref}}}})()

    def pull(self, repository, tag=None, auth_config=None):
        time.sleep(0.05)  # long enough for every other thread to ask meanwhile
        ref = f"{repository}:{tag}"
        with self.lock:
            self.pulls.append((ref, auth_config))
            if ref not in self.pullable:
                raise docker.errors.APIError(f"pull access denied for {repository}")
            self.present.add(ref)
        return self.get(ref)


def ask_from_threads(lookup, refs, threads=8):
    answers = []
    barrier = threading.Barrier(threads)

    def ask(ref):
        barrier.wait()
        answers.append((ref, lookup(ref, True)))

    workers = [threading.Thread(target=ask, args=(refs[i % len(refs)],)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return answers


def test_each_image_is_pulled_once_per_run_however_many_containers_ask_at_once():
    images = FakeImages(present={"lab/base:1"}, pullable={"lab/new:2"})
    client = type("Client", (), {"images": images})()
    lookup = ccc_images.ImageLookup(lambda: client, pull=True)
    answers = ask_from_threads(lookup, ["lab/new:2", "lab/base:1"], threads=8)
    assert images.pulls == [("lab/new:2", None)]
    assert sorted(images.gets) == ["lab/base:1", "lab/new:2", "lab/new:2"]  # one look each, one after the pull
    assert {ref: info["labels"] for ref, (info, error) in answers} == {"lab/new:2": {"from": "lab/new:2"},
                                                                      "lab/base:1": {"from": "lab/base:1"}}


def test_a_failed_pull_is_one_answer_for_the_whole_run_and_user_images_pull_anonymously():
    images = FakeImages()
    lookup = ccc_images.ImageLookup(lambda: type("Client", (), {"images": images})(), pull=True)
    first = lookup("user/own:latest", False)
    assert first == (None, "pull failed: pull access denied for user/own")
    assert lookup("user/own:latest", False) == first
    assert images.pulls == [("user/own:latest", {})]  # {}: no registry login of the node


def test_without_pull_a_missing_image_is_only_noted():
    lookup = ccc_images.ImageLookup(lambda: type("Client", (), {"images": FakeImages()})(), pull=False)
    info, error = lookup("lab/base:1", True)
    assert error is None and info["id"] is None and info["note"] == ccc_images.NOT_PULLED


@pytest.mark.parametrize("ref, parts", [
    ("vicoslab/ccc:base", ("vicoslab/ccc", "base")),
    ("registry:5000/lab/img", ("registry:5000/lab/img", "latest")),
    ("registry:5000/lab/img:7", ("registry:5000/lab/img", "7")),
    ("lab/img@sha256:abc", ("lab/img", "sha256:abc")),
    ("busybox", ("busybox", "latest")),
])
def test_image_references_split_into_repository_and_tag(ref, parts):
    assert ccc_images.split_reference(ref) == parts


# ---------------------------------------------------------------------------------------------
# ccc_deploy: bounded, isolated


@pytest.mark.parametrize("value", [0, -1, 1.5, "4", True, None])
def test_create_parallelism_must_be_a_whole_number_of_at_least_one(value):
    with pytest.raises(ValueError, match="ccc:node:create_parallelism must be a whole number of at least 1"):
        ccc_deploy.parallelism({"create_parallelism": value})


def test_create_parallelism_default_is_four():
    assert ccc_deploy.parallelism(ccc_pillar.node_settings({}, "node1")) == 4


def test_a_run_applies_at_most_workers_at_once_and_one_failure_stays_that_containers(monkeypatch, caplog):
    running, peak, lock = [0], [0], threading.Lock()

    def plan(inputs, stack):
        return {"stack": stack}

    def apply(client, cluster, node, resolution, test=False, **kwargs):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.03)
        with lock:
            running[0] -= 1
        if resolution["stack"] == "s3":
            raise OSError(28, "No space left on device")
        return ccc_apply.Applied(resolution["stack"], "run", done=f"running, unchanged ({client})")

    monkeypatch.setattr(ccc_plan, "plan", plan)
    monkeypatch.setattr(ccc_apply, "apply", apply)
    monkeypatch.setattr(ccc_deploy, "_existing", lambda clients: None)  # no engine to list
    monkeypatch.setattr(ccc_hostkey_maker, "for_run", lambda cluster, stacks, test: ccc_hostkey_maker.Maker(0))
    monkeypatch.setattr(ccc_hostkey_spares, "top_up_later", lambda cluster, stacks: False)
    inputs = ccc_plan.Inputs(ccc={}, cluster={}, node={}, facts=None, stored={}, notices={})
    stacks = [f"s{index}" for index in range(10)]
    outcomes = ccc_deploy.deploy(inputs, stacks + ["s1"], lambda: threading.current_thread().name.split("_")[0],
                                 workers=3)
    assert list(outcomes) == stacks  # the order of the selection, each stack once
    assert peak[0] == 3
    assert outcomes["s3"] == ccc_apply.Applied("s3", "failed",
                                               problem="s3: OSError: [Errno 28] No space left on device")
    assert all(outcomes[stack].problem is None for stack in stacks if stack != "s3")
    assert outcomes["s0"].done == "running, unchanged (ccc-deploy)"  # a thread of the run's pool
    assert "applying s3 failed" in caplog.text and "No space left on device" in caplog.text  # the traceback, for admins


def test_containers_already_running_as_wanted_are_checked_here_while_the_pool_applies_the_rest(monkeypatch, caplog):
    """A no-op check is CPU-bound: threads only slowed it (ccc_deploy). The list of the run says
    which containers run their wanted spec; those are applied in the calling thread, the others
    in the pool, and a failure in either lane, or in a plan, stays that container's."""
    listed = {f"s{index}": {"State": "running"} for index in range(6)}

    def plan(inputs, stack):
        if stack == "s7":
            raise ValueError("a plan that fails")
        return {"stack": stack, "action": "run"}

    def looks_settled(node, resolution, summary):
        return summary is not None and resolution["stack"] not in ("s1", "s2")  # s1, s2: new settings

    def apply(client, cluster, node, resolution, test=False, existing=None, **kwargs):
        assert existing is listed  # settle asks only for the leftovers the list shows
        if resolution["stack"] in ("s4", "s8"):
            raise OSError(28, "No space left on device")
        return ccc_apply.Applied(resolution["stack"], "run", done=threading.current_thread().name)

    monkeypatch.setattr(ccc_plan, "plan", plan)
    monkeypatch.setattr(ccc_apply, "looks_settled", looks_settled)
    monkeypatch.setattr(ccc_apply, "apply", apply)
    monkeypatch.setattr(ccc_deploy, "_existing", lambda clients: listed)
    monkeypatch.setattr(ccc_hostkey_maker, "for_run", lambda cluster, stacks, test: ccc_hostkey_maker.Maker(0))
    monkeypatch.setattr(ccc_hostkey_spares, "top_up_later", lambda cluster, stacks: False)
    inputs = ccc_plan.Inputs(ccc={}, cluster={}, node={}, facts=None, stored={}, notices={})
    stacks = [f"s{index}" for index in range(10)]
    outcomes = ccc_deploy.deploy(inputs, stacks, lambda: None, workers=4)
    assert list(outcomes) == stacks
    here = {stack for stack, facts in outcomes.items() if facts.done == threading.current_thread().name}
    pooled = {stack for stack, facts in outcomes.items() if facts.done.startswith("ccc-deploy")}
    assert here == {"s0", "s3", "s5"} and pooled == {"s1", "s2", "s6", "s9"}
    assert outcomes["s4"].problem == "s4: OSError: [Errno 28] No space left on device"  # here
    assert outcomes["s8"].problem == "s8: OSError: [Errno 28] No space left on device"  # pooled
    assert outcomes["s7"].problem == "s7: ValueError: a plan that fails"
    assert "applying s7 failed" in caplog.text


def test_without_a_list_of_the_engine_every_container_goes_to_the_pool(monkeypatch):
    """The engine did not answer the list: no hint, every container applied (and failing) as before."""
    monkeypatch.setattr(ccc_plan, "plan", lambda inputs, stack: {"stack": stack, "action": "run"})
    monkeypatch.setattr(ccc_apply, "apply", lambda client, cluster, node, resolution, **kwargs: ccc_apply.Applied(
        resolution["stack"], "run", done=threading.current_thread().name))
    monkeypatch.setattr(ccc_deploy, "_existing", lambda clients: None)
    monkeypatch.setattr(ccc_hostkey_maker, "for_run", lambda cluster, stacks, test: ccc_hostkey_maker.Maker(0))
    monkeypatch.setattr(ccc_hostkey_spares, "top_up_later", lambda cluster, stacks: False)
    inputs = ccc_plan.Inputs(ccc={}, cluster={}, node={}, facts=None, stored={}, notices={})
    outcomes = ccc_deploy.deploy(inputs, ["a", "b"], lambda: None, workers=4)
    assert all(facts.done.startswith("ccc-deploy") for facts in outcomes.values())


@pytest.mark.parametrize("resolution, summary", [
    pytest.param({"action": "remove", "spec": {}}, {"State": "running"}, id="remove"),
    pytest.param({"action": "hold", "spec": {}}, {"State": "running"}, id="hold"),
    pytest.param({"action": "run", "spec": {}}, None, id="not-listed"),
    pytest.param({"action": "run", "spec": {}, "storage_missing": True}, {"State": "running"}, id="storage-missing"),
    pytest.param({"action": "run", "spec": {"name": "s1", "mounts": [{"pin": {"name": "home", "root": "/nonexistent",
                                                                           "parts": ["x"]}}], "labels": {}}},
                 {"State": "running"}, id="source-unreadable"),
])
def test_only_a_run_whose_pins_can_be_read_and_that_the_list_shows_is_a_quick_check(resolution, summary):
    """``looks_settled`` never raises: a source it cannot read makes it say no, and the apply reports it."""
    assert ccc_apply.looks_settled({"binds_dir": "/nonexistent-binds"}, resolution, summary) is False


def test_a_container_running_its_spec_is_a_quick_check_until_the_user_replaces_a_pinned_folder(tmp_path):
    """The hint reads the pins as the apply does: a folder the user swapped for a new one (another
    inode, so another pin set and spec hash) makes the container one to recreate, in the pool."""
    (tmp_path / "users" / "ana" / "home").mkdir(parents=True)
    pin = {"name": "home", "root": str(tmp_path / "users"), "parts": ["ana", "home"]}
    spec = {"name": "s1", "image": "ccc:1", "mounts": [{"pin": pin, "target": "/home/ana"}], "labels": {}}
    node = {"binds_dir": str(tmp_path / "binds")}
    running = ccc_apply.pin_spec(node["binds_dir"], spec, create=False)[0]["labels"]  # what its create stored
    summary = {"State": "running", "Labels": running}
    resolution = {"action": "run", "spec": spec}
    assert ccc_apply.looks_settled(node, resolution, summary) is True
    assert ccc_apply.looks_settled(node, dict(resolution, image_id="sha256:new"), summary) is False
    (tmp_path / "users" / "ana" / "home").rename(tmp_path / "users" / "ana" / "old-home")
    (tmp_path / "users" / "ana" / "home").mkdir()
    assert ccc_apply.looks_settled(node, resolution, summary) is False
    (tmp_path / "users" / "ana" / "home").rmdir()
    (tmp_path / "users" / "ana" / "home").symlink_to(tmp_path / "users" / "ana" / "old-home")
    assert ccc_apply.looks_settled(node, resolution, summary) is False  # no link followed, no error raised


# ---------------------------------------------------------------------------------------------
# ccc_keys: GitHub, or the node's copy


def test_github_keys_are_cached_and_used_when_github_cannot_be_reached(tmp_path, monkeypatch):
    good = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeSampleKeyForAnaOnly0000000000000000000 ana@laptop"

    class Response:
        def __init__(self, text):
            self.text = text

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def read(self, limit):
            return self.text.encode()[:limit]

    monkeypatch.setattr(ccc_keys.urllib.request, "urlopen", lambda url, timeout: Response(f"{good}\nnot a key\n"))
    cache = tmp_path / "github-keys"
    keys = ccc_keys.GitHubKeys("https://github.com/{login}.keys", True, str(cache))
    assert keys("ana") == ([good], None)
    assert (cache / "ana.keys").read_text() == good + "\n"

    def unreachable(url, timeout):
        raise urllib.error.URLError("timed out")

    monkeypatch.setattr(ccc_keys.urllib.request, "urlopen", unreachable)
    next_run = ccc_keys.GitHubKeys("https://github.com/{login}.keys", True, str(cache))  # max_age 0: fetch again
    assert next_run("ana") == ([good], "could not fetch the keys of GitHub user 'ana' (<urlopen error timed out>); "
                                       "the keys fetched earlier are used")
    assert next_run("bor") == ([], "could not fetch the keys of GitHub user 'bor' (<urlopen error timed out>)")
    offline = ccc_keys.GitHubKeys("https://github.com/{login}.keys", False, str(cache))
    assert offline("ana") == ([good], None) and offline("bor") == ([], None)


# ---------------------------------------------------------------------------------------------
# Host keys: made in-process (no ssh-keygen per key), in OpenSSH's own formats


def test_host_keys_of_new_stacks_are_made_in_worker_processes_and_written_as_before(tmp_path, monkeypatch):
    # RSA generation holds the GIL: a deploy makes new stacks' sets in forked workers, and each
    # set still lands in the store and the node copy, complete and private.
    sshd, store = tmp_path / "sshd", tmp_path / "state"
    sshd.mkdir()
    assert ccc_hostkey_maker.missing(str(sshd), str(store), ["box", "bar"]) == ["box", "bar"]
    made_in = []
    with monkeypatch.context() as patch:  # pytest's own threads run; salt-call has none
        patch.setattr(ccc_hostkey_maker.threading, "active_count", lambda: 1)
        maker = ccc_hostkey_maker.Maker(2)
    with maker:
        def material(stack, rsa_bits):
            made_in.append(os.getpid())
            return maker(stack, rsa_bits)

        assert ccc_hostkeys.ensure(str(sshd), str(store), "box", 1024, make=material) is True
        workers = {process.pid for process in maker._pool._processes.values()}
    assert workers and os.getpid() not in workers  # forked before any thread; the thread only waited
    keys = sshd / "stacks" / "box" / "keys"
    assert sorted(os.listdir(keys)) == sorted(ccc_hostkeys.key_files())
    assert stat.S_IMODE((keys / "ssh_host_rsa_key").stat().st_mode) == 0o600
    assert (keys / "ssh_host_ed25519_key.pub").read_text().endswith(" ccc-salt box\n")
    assert ccc_hostkey_maker.missing(str(sshd), str(store), ["box", "bar"]) == ["bar"]
    # with threads already running no process is forked: the set is made in the calling thread
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        with ccc_hostkey_maker.Maker(1) as maker:
            assert maker._pool is None
            assert sorted(maker("bar", 1024)) == sorted(ccc_hostkeys.key_files())
    finally:
        stop.set()
        other.join()


@pytest.mark.skipif(not shutil.which("ssh-keygen"), reason="needs ssh-keygen to read the keys back")
def test_host_keys_are_openssh_key_pairs_of_the_usual_types(tmp_path):
    ccc_hostkeys._generate(str(tmp_path), "box", 2048)
    assert sorted(os.listdir(tmp_path)) == sorted(ccc_hostkeys.key_files())
    for kind, bits in (("rsa", "2048"), ("ecdsa", "256"), ("ed25519", "256")):
        private = tmp_path / f"ssh_host_{kind}_key"
        assert stat.S_IMODE(private.stat().st_mode) == 0o600
        derived = subprocess.run(["ssh-keygen", "-y", "-f", str(private)], capture_output=True, text=True, check=True)
        public = (tmp_path / f"ssh_host_{kind}_key.pub").read_text()
        assert public.split()[:2] == derived.stdout.split()[:2] and public.endswith(" ccc-salt box\n")
        shown = subprocess.run(["ssh-keygen", "-l", "-f", str(private) + ".pub"], capture_output=True, text=True,
                               check=True).stdout.split()
        assert shown[0] == bits and shown[-1] == f"({kind.upper()})"
