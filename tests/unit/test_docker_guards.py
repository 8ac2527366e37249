"""The guards of the engine side without Docker: what counts as a managed container (label AND
the node's record, ``ccc_node_record``), the orphan-removal guard (``ccc_orphans``), and the one
redaction rule for everything displayed (``ccc_redact``). A fake engine stands in for Docker: it
only lists, inspects and removes containers."""

import json
import logging
import os

import docker.errors
import pytest

from support.scripts import load_module
from support.site import sample_ccc

import ccc_engine
import ccc_node_record
import ccc_orphans
import ccc_pillar
import ccc_redact
import ccc_resolver

MANAGED_LABELS = {"ccc.managed-by": "ccc-salt"}
TOKEN, PASSWORD, USER_PASSWORD = "hf_S3cretT0ken", "change-me", "users-own-pw"


class FakeApi:
    def __init__(self, containers):
        self.containers_by_id = {c["Id"]: c for c in containers}
        self.removed = []

    def containers(self, all=False, filters=None):
        key, _, value = (filters or {}).get("label", "=").partition("=")
        return [dict(c) for c in self.containers_by_id.values() if not key or c["Labels"].get(key) == value]

    def inspect_container(self, name):
        for container in self.containers_by_id.values():
            if name in (container["Id"], container["Names"][0].lstrip("/")):
                return {"Id": container["Id"], "Config": {"Labels": container["Labels"]}, "State": {"Running": False}}
        raise docker.errors.NotFound(name)

    def remove_container(self, container_id, v=False, force=False):
        self.removed.append(self.containers_by_id.pop(container_id)["Names"][0].lstrip("/"))


class FakeClient:
    def __init__(self, containers, state_dir):
        self.api = FakeApi(containers)
        self.ccc_state_dir = str(state_dir)


def container(number, stack, labels=MANAGED_LABELS):
    return {"Id": f"{number:064x}", "Names": [f"/{stack}"], "State": "running",
            "Labels": dict(labels, **{"ccc.stack": stack})}


@pytest.fixture(autouse=True)
def ccc_node_record_log(caplog, monkeypatch):
    """ccc_node_record's log goes to caplog only, not to Salt's deferred handler (printed at exit)."""
    logger = logging.getLogger("ccc_node_record")
    monkeypatch.setattr(logger, "propagate", False)
    monkeypatch.setattr(logger, "handlers", [caplog.handler])
    monkeypatch.setattr(logger, "level", logging.INFO)


def record(state_dir):
    return json.loads((state_dir / ccc_node_record.RECORD_FILE).read_text())["containers"]


# ---------------------------------------------------------------------------------------------
# Managed = label AND recorded


def test_the_first_run_adopts_the_labelled_containers_once_and_says_so(tmp_path, caplog):
    state_dir = tmp_path / "state"
    client = FakeClient([container(1, "ana-main"), container(2, "bor-main"), container(3, "mine", labels={})], state_dir)
    assert set(ccc_node_record.managed_containers(client)) == {"ana-main", "bor-main"}
    assert "adopted the 2 labelled container(s) ['ana-main', 'bor-main']" in caplog.text
    assert record(state_dir) == [f"{1:064x}", f"{2:064x}"]
    assert oct(os.stat(state_dir / ccc_node_record.RECORD_FILE).st_mode & 0o777) == "0o600"
    assert oct(os.stat(state_dir).st_mode & 0o777) == "0o700"

    # Labelled later (an image's labels, or a user with Docker access): never managed.
    client.api.containers_by_id[f"{4:064x}"] = container(4, "ghost")
    caplog.clear()
    assert set(ccc_node_record.managed_containers(client)) == {"ana-main", "bor-main"}
    assert "adopted" not in caplog.text
    assert not ccc_node_record.is_managed(client, client.api.inspect_container("ghost"))
    assert ccc_node_record.is_managed(client, client.api.inspect_container("ana-main"))


def test_created_ids_are_recorded_and_removed_ones_dropped(tmp_path):
    state_dir = tmp_path / "state"
    client = FakeClient([container(1, "ana-main")], state_dir)
    ccc_node_record.change(client, add=[f"{9:064x}"])
    assert record(state_dir) == [f"{1:064x}", f"{9:064x}"]
    ccc_engine.stop_and_remove(client, client.api.inspect_container("ana-main"))
    assert record(state_dir) == [f"{9:064x}"]


@pytest.mark.parametrize("spoil, problem", [
    (lambda path: path.chmod(0o666), "writable by nobody else"),
    (lambda path: path.write_text("[1, 2]"), "is not a record of container ids"),
    (lambda path: path.write_text("{nope"), "is not a record of container ids"),
])
def test_an_untrustworthy_record_refuses_instead_of_guessing(tmp_path, spoil, problem):
    state_dir = tmp_path / "state"
    client = FakeClient([container(1, "ana-main")], state_dir)
    ccc_node_record.recorded_ids(client)
    spoil(state_dir / ccc_node_record.RECORD_FILE)
    with pytest.raises(Exception, match=problem):
        ccc_node_record.managed_containers(client)


def test_a_client_without_a_state_dir_manages_nothing():
    client = FakeClient([container(1, "ana-main")], "")
    with pytest.raises(Exception, match="no node state dir"):
        ccc_node_record.is_managed(client, client.api.inspect_container("ana-main"))


def test_the_node_state_dir_is_a_node_setting():
    assert ccc_pillar.node_settings({}, "node1")["state_dir"] == "/var/lib/ccc-salt"
    assert ccc_pillar.node_settings({"node": {"state_dir": "/srv/s"}}, "node1")["state_dir"] == "/srv/s"


# ---------------------------------------------------------------------------------------------
# Orphans: never a mass deletion by accident


@pytest.mark.parametrize("orphans, managed, share, force, errors, refused", [
    (0, 3, 0.5, False, None, False),
    (1, 1, 0.5, False, None, False),     # one container is never a mass deletion
    (1, 3, 0.0, False, None, False),
    (2, 4, 0.5, False, None, False),     # exactly the share: allowed
    (2, 3, 0.5, False, None, True),
    (3, 3, 0.5, False, None, True),      # ccc:containers: [] on a node with 3
    (3, 3, 1.0, False, None, False),
    (3, 3, 0.5, True, None, False),      # the admin's ccc_force_orphans
    (1, 3, 0.5, True, ["site.containers: boom"], True),  # render errors: even forced
    (2, 2, "half", True, None, True),    # a bad max_share refuses
    (2, 2, 1.5, False, None, True),
])
def test_orphan_guard_rule(orphans, managed, share, force, errors, refused):
    names = [f"s{i}" for i in range(orphans)]
    reason = ccc_orphans.refusal(names, managed, share, force=force, pillar_errors=errors)
    assert (reason is not None) == refused, reason


def test_an_empty_container_list_removes_nothing_unless_forced(tmp_path):
    client = FakeClient([container(1, "ana-main"), container(2, "bor-main"), container(3, "ana-jupyter")],
                        tmp_path / "state")
    preview = ccc_orphans.remove(client, set(), test=True)
    assert preview["orphans"] == ["ana-jupyter", "ana-main", "bor-main"] and "3 of the 3" in preview["refused"]
    outcome = ccc_orphans.remove(client, set())
    assert outcome["refused"] and client.api.removed == []
    outcome = ccc_orphans.remove(client, set(), pillar_errors=["site: render error"], force=True)
    assert "render errors" in outcome["refused"] and client.api.removed == []
    outcome = ccc_orphans.remove(client, set(), force=True)
    assert outcome["refused"] is None and sorted(client.api.removed) == ["ana-jupyter", "ana-main", "bor-main"]
    assert record(tmp_path / "state") == []


def load_state_module(outcome, test):
    return load_module("_states/ccc_container.py", "ccc_container_state",
                       salt={"ccc_docker.remove_orphans": lambda test: outcome}, opts={"test": test})


@pytest.mark.parametrize("test", [True, False])
def test_the_orphans_state_fails_on_a_refusal_in_test_mode_too(test):
    outcome = {"orphans": ["a", "b"], "managed": 2, "refused": "2 of the 2 managed containers ..."}
    result = load_state_module(outcome, test).orphans_absent("ccc-containers-orphans")
    assert result["result"] is False and result["changes"] == {}
    assert result["comment"].startswith("refusing to remove 2 orphaned container(s) (a, b): 2 of the 2")


# ---------------------------------------------------------------------------------------------
# Secrets: one redaction rule for plans, resolve and diffs


def secret_resolution():
    ccc = sample_ccc("node1")
    for entry in ccc["containers"]:
        if entry["STACK_NAME"] == "ana-main":
            entry["EXTRA_ENVS"] = {"HF_TOKEN": TOKEN}
    facts = ccc_resolver.NodeFacts(
        "node1", compute_devices=ccc["node"]["compute_devices"], docker_gid=998, host_timezone_files=[],
        image_lookup=lambda ref, credentials: ({"id": "sha256:1", "labels": {}}, None),
        github_keys=lambda login: ([], None))
    settings = ("ana-main:\n  FRP_PORTS:\n    HTTP:\n"
                f"      - {{port: 6006, subdomain: ana-tb, pass: {USER_PASSWORD}}}\n")
    resolution = ccc_resolver.resolve_container(ccc, "ana-main", facts, settings_text=settings)
    assert resolution["action"] == "run", resolution
    return resolution


def test_a_plan_shows_no_token_and_no_password():
    resolution = secret_resolution()
    raw = json.dumps(resolution)
    assert TOKEN in raw and PASSWORD in raw and USER_PASSWORD in raw  # what would leak
    shown = ccc_redact.redact(resolution)
    text = json.dumps(shown)
    assert TOKEN not in text and PASSWORD not in text and USER_PASSWORD not in text
    assert shown["spec"]["environment"]["HF_TOKEN"] == "***"
    assert shown["record"]["EXTRA_ENVS"] == {"HF_TOKEN": "***"}
    assert shown["spec"]["labels"]["frp.6006.http.password"] == "***"
    assert shown["spec"]["environment"]["USER_NAME"] == "ana"      # the contract stays readable
    assert shown["spec"]["labels"]["frp.6006.http.username"] == "ana"
    assert ccc_redact.redact(shown) == shown


def test_every_contract_variable_stays_readable():
    """``SHOWN_ENV`` lists every variable the resolver sets itself (else it would be masked)."""
    ccc = sample_ccc("node1")
    for entry in ccc["containers"]:
        if entry["STACK_NAME"] == "ana-main":
            entry["ENABLE_DOCKER_ACCESS"] = True
    facts = ccc_resolver.NodeFacts(
        "node1", compute_devices=ccc["node"]["compute_devices"], docker_gid=998, host_timezone_files=[],
        image_lookup=lambda ref, credentials: ({"id": "sha256:1", "labels": {}}, None),
        github_keys=lambda login: ([], None))
    spec = ccc_resolver.resolve_container(ccc, "ana-main", facts)["spec"]
    assert set(spec["environment"]) <= ccc_redact.SHOWN_ENV


def test_a_test_run_diff_shows_that_a_secret_changed_but_not_its_value():
    new = secret_resolution()["spec"]
    old = json.loads(json.dumps(new))
    old["environment"]["HF_TOKEN"] = "hf_OldT0ken"
    old["labels"]["frp.6006.http.password"] = "old-pw"
    del old["environment"]["INSTALL_PACKAGES"]
    diff = ccc_engine.spec_diff(old, new)
    text = json.dumps(diff)
    assert TOKEN not in text and "hf_OldT0ken" not in text and USER_PASSWORD not in text and "old-pw" not in text
    assert diff["environment"]["HF_TOKEN"] == {"old": "***", "new": "***"}
    assert diff["labels"]["frp.6006.http.password"] == {"old": "***", "new": "***"}
    assert diff["environment"]["INSTALL_PACKAGES"] == {"old": None, "new": ""}
