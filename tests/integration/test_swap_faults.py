"""The minion killed in the middle of a recreate, for real, at every step of the swap.

An apply runs in a forked child whose Docker client SIGKILLs the child just before (or just
after) the call that follows the kill point; the container is left exactly as a killed
salt-minion leaves it. Then the test process applies normally, as the next reconcile would, and
the stack must have exactly one container, named STACK_NAME, running, with the wanted spec hash,
no ``.ccc-new``/``.ccc-old`` leftover, reported running by ``managed_containers``, and the
user's home intact. A test-mode apply in between changes nothing and reports the settling.
Driven through ``ccc_plan`` and ``ccc_apply`` without Salt (see test_bad_settings.py), one
stack: ana-main."""

import contextlib
import json
import logging
import multiprocessing
import os
import pathlib
import signal

import pytest
import yaml

from support.site import node_ccc

import ccc_apply
import ccc_docker_networks
import ccc_engine
import ccc_node_record
import ccc_pillar
import ccc_plan

pytestmark = pytest.mark.docker

STACK, ANA = "ana-main", "ana.novak@example.org"
NOTE = "ana's work, not to be lost\n"

NEW, OLD = f"{STACK}.ccc-new", f"{STACK}.ccc-old"
# kill point -> (the Docker API method around it, which call of it, kill before or after it,
#                {name: status} the kill leaves)
RECREATE_KILL_POINTS = {
    "created-not-yet-recorded": ("create_container", 1, "after", {STACK: "running", NEW: "created"}),
    "after-create": ("connect_container_to_network", 1, "before", {STACK: "running", NEW: "created"}),
    "after-connecting-networks": ("stop", 1, "before", {STACK: "running", NEW: "created"}),
    "after-stopping-old": ("rename", 1, "before", {STACK: "exited", NEW: "created"}),
    "after-renaming-old-to-ccc-old": ("rename", 2, "before", {OLD: "exited", NEW: "created"}),
    "after-renaming-new-to-stack": ("start", 1, "before", {OLD: "exited", STACK: "created"}),
    "after-starting-new": ("start", 1, "after", {OLD: "exited", STACK: "running"}),
    "before-removing-old": ("remove_container", 1, "before", {OLD: "exited", STACK: "running"}),
    "old-removed-not-yet-unrecorded": ("remove_container", 1, "after", {STACK: "running"}),
}
# A first create makes the container under its own name (nothing to keep running meanwhile).
CREATE_KILL_POINTS = {
    "created-not-yet-recorded": ("create_container", 1, "after", {STACK: "created"}),
    "after-create": ("connect_container_to_network", 1, "before", {STACK: "created"}),
    "after-connecting-networks": ("start", 1, "before", {STACK: "created"}),
}


@pytest.fixture(autouse=True)
def engine_logs(caplog, monkeypatch):
    """The engine modules' logs go to caplog only, not to Salt's deferred handler (printed at exit)."""
    for name in ("ccc_swap", "ccc_node_record", "ccc_apply"):
        logger = logging.getLogger(name)
        monkeypatch.setattr(logger, "propagate", False)
        monkeypatch.setattr(logger, "handlers", [caplog.handler])


class Node:
    """node1 of the sample site on its private dockerd, applying only ana-main."""

    def __init__(self, daemon, storage):
        self.ccc = node_ccc("node1", storage, daemon.url)
        self.node = ccc_pillar.node_settings(self.ccc, "node1")
        self.client = ccc_engine.client(self.node)
        self.cluster = ccc_pillar.cluster_settings(self.ccc)
        self.user_dir = pathlib.Path(storage) / "shared" / "user_data" / ANA
        for name, definition in self.cluster["networks"].items():
            ccc_docker_networks.ensure(self.client, name, definition)

    def plan(self, client):
        return ccc_plan.plan(ccc_plan.read_inputs(self.ccc, "node1", lambda: client), STACK)

    def apply(self, client=None, test=False):
        client = client or self.client
        return ccc_apply.apply(client, self.cluster, self.node, self.plan(client), test=test)

    def wanted_hash(self):
        spec = self.plan(self.client)["spec"]
        return ccc_apply.pin_spec(self.node["binds_dir"], spec, create=False)[0]["labels"]["ccc.spec-hash"]

    def stack_containers(self):
        """{name: inspect data} of every container of the stack, recorded or not."""
        found = self.client.api.containers(all=True, filters={"label": f"ccc.stack={STACK}"})
        return {c["Names"][0].lstrip("/"): self.client.api.inspect_container(c["Id"]) for c in found}

    def statuses(self):
        return {name: attrs["State"]["Status"] for name, attrs in self.stack_containers().items()}

    def record(self):
        path = pathlib.Path(self.node["state_dir"]) / ccc_node_record.RECORD_FILE
        return set(json.loads(path.read_text())["containers"])

    def apply_killed_at(self, method, nth, when):
        """Apply in a forked child that SIGKILLs itself at the ``nth`` call of ``method``; returns
        the child's exit code. The child has its own client: the parent's connections stay clean."""
        def child():
            client = ccc_engine.client(self.node)
            real, calls = getattr(client.api, method), []

            def killing(*args, **kwargs):
                calls.append(method)
                if len(calls) == nth and when == "before":
                    os.kill(os.getpid(), signal.SIGKILL)
                result = real(*args, **kwargs)
                if len(calls) == nth and when == "after":
                    os.kill(os.getpid(), signal.SIGKILL)
                return result

            setattr(client.api, method, killing)
            self.apply(client)

        process = multiprocessing.get_context("fork").Process(target=child)
        process.start()
        process.join(60)
        with contextlib.suppress(ValueError):
            process.kill()
        return process.exitcode


def write_settings(node, body):
    settings = node.user_dir / "container-settings" / f"{STACK}.yml"
    settings.write_text(yaml.safe_dump({STACK: body}))
    os.chown(settings, 1000, 1000)


def assert_settled(node):
    """What every kill point must come back to after one normal apply."""
    containers = node.stack_containers()
    assert list(containers) == [STACK], sorted(containers)
    attrs = containers[STACK]
    assert attrs["State"]["Running"], attrs["State"]
    assert attrs["Config"]["Labels"]["ccc.spec-hash"] == node.wanted_hash()
    assert ccc_node_record.is_managed(node.client, attrs)
    assert not any(entry.startswith(ccc_node_record.CREATING) for entry in node.record())
    managed = ccc_node_record.managed_containers(node.client)
    assert managed[STACK]["Id"] == attrs["Id"] and managed[STACK]["State"] == "running"
    assert (node.user_dir / STACK / "notes.txt").read_text() == NOTE
    seen = node.client.containers.get(STACK).exec_run(["cat", "/home/ana/notes.txt"])
    assert (seen.exit_code, seen.output.decode()) == (0, NOTE)
    again = node.apply()
    assert again.problem is None and again.changes == {} and again.settled == {}, again


def check_kill_and_settle(node, method, nth, when, left, creating=NEW):
    assert node.apply_killed_at(method, nth, when) == -signal.SIGKILL, "the kill point was never reached"
    assert node.statuses() == left
    if method == "create_container":  # killed before the id was recorded: the name was
        assert ccc_node_record.CREATING + creating in node.record()
    preview = node.apply(test=True)
    assert node.statuses() == left, "a test run changed Docker"
    result = node.apply()
    assert result.problem is None, result
    if set(left) != {STACK}:  # a pending change in test mode: the state reports it as one
        assert preview.problem is None and preview.settled, preview
        assert result.settled == preview.settled, (preview, result)
        # Undone (the old container back as STACK_NAME) exactly when the new one never started.
        undone = OLD in left and left.get(STACK) != "running"
        assert ("restored" in result.settled) == undone, result
    assert_settled(node)


@pytest.fixture
def node(clean_node1, storage):
    node = Node(clean_node1, storage)
    first = node.apply()
    assert first.problem is None and "created" in first.changes, first
    (node.user_dir / STACK / "notes.txt").write_text(NOTE)
    return node


@pytest.mark.parametrize("method, nth, when, left", RECREATE_KILL_POINTS.values(), ids=RECREATE_KILL_POINTS.keys())
def test_a_recreate_killed_at_any_step_is_finished_or_undone_by_the_next_apply(node, method, nth, when, left):
    old_hash = node.client.api.inspect_container(STACK)["Config"]["Labels"]["ccc.spec-hash"]
    write_settings(node, {"SHM_SIZE": "4g"})
    assert node.wanted_hash() != old_hash
    check_kill_and_settle(node, method, nth, when, left)
    assert node.client.api.inspect_container(STACK)["HostConfig"]["ShmSize"] == 4 * 1024 ** 3
    # the user reads what runs, also when the killed run had started the new container and the
    # next one, finishing the swap, changed nothing itself
    report = (node.user_dir / "container-settings" / f"{STACK}.deploy").read_text()
    assert "shm_size: 4g" in report and "NOT " not in report, report


@pytest.mark.parametrize("method, nth, when, left", CREATE_KILL_POINTS.values(), ids=CREATE_KILL_POINTS.keys())
def test_a_first_create_killed_at_any_step_is_finished_by_the_next_apply(node, method, nth, when, left):
    node.client.api.remove_container(STACK, force=True)  # the home (and notes) stay
    check_kill_and_settle(node, method, nth, when, left, creating=STACK)
