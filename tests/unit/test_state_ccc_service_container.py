"""The ``ccc_service_container`` states' own part: compare a role container's spec with what the
engine reports, test mode, result, comment and changes, and a failing engine as one clean line.
Boundary: ``__salt__`` is a dict of fakes that record their calls (``Fakes``), the narrowest
boundary of a state; the engine's facts are given as ``ccc_service_container.inspect``/``image``
return them. The real engine behind it is in tests/integration/test_service_container_engine.py."""

import copy

import pytest
from salt.exceptions import CommandExecutionError
from support.salt_modules import Fakes, raises
from support.scripts import load_module

import ccc_service_containers as svc

NAME = "frp-lab-client"
SPEC = {"image": "lukacu/frpc:1", "role": "frp_client", "env": {"FRPC_NETWORK": "lab"}, "networks": [{"name": "lab"}]}
IMAGE = {"id": "sha256:1", "config": {"Entrypoint": ["/frpc"], "Cmd": None, "Env": [], "Labels": {}}}
# What ``docker inspect`` shows for SPEC made from IMAGE, running.
ATTRS = {
    "Id": "c0ffee", "Name": f"/{NAME}", "Image": "sha256:1", "State": {"Running": True, "Pid": 42},
    "Config": {"Image": "lukacu/frpc:1", "Env": ["FRPC_NETWORK=lab"], "Labels": {"ccc.cluster-role": "frp_client"},
               "Entrypoint": ["/frpc"], "Cmd": None, "Hostname": "c0ffee", "ExposedPorts": None},
    "HostConfig": {"Binds": None, "PortBindings": {}, "PidMode": "", "Privileged": False, "DeviceRequests": None,
                   "RestartPolicy": {"Name": "always"}, "LogConfig": {"Type": "json-file", "Config": {}},
                   "ExtraHosts": None},
    "NetworkSettings": {"Networks": {"lab": {"Aliases": ["c0ffee"]}}},
}
ACTING = tuple(f"ccc_service_container.{name}" for name in (
    "pull", "create", "start", "remove", "write_env_file", "remove_env_file", "proxy_ensure", "proxy_remove"))


def attrs(**changes):
    found = copy.deepcopy(ATTRS)
    for key, value in changes.items():
        found[key] = {**found[key], **value} if isinstance(value, dict) else value
    return found


def state(test=False, container=None, image=IMAGE, **functions):
    """The state with fakes for every function it may call: ``container`` and ``image`` are the
    facts ``inspect`` and ``image`` return; ``functions`` replace fakes by name."""
    fakes = {"inspect": lambda name: container, "image": lambda name: image, "pull": lambda name: IMAGE,
             "create": lambda want: "new-id", "start": lambda name: True, "remove": lambda name: True,
             "of_role": lambda role: [], "write_env_file": lambda name, values: svc.env_file_path(name),
             "remove_env_file": lambda name: True, "proxy_pending": lambda name, profile: [],
             "proxy_ensure": lambda name, profile: [], "proxy_stale": lambda name, pid: False,
             "proxy_present": lambda name: False, "proxy_remove": lambda name: True}
    fakes.update(functions)
    salt = Fakes({f"ccc_service_container.{key}": function for key, function in fakes.items()})
    pillar = {"ccc": {"secrets": {"frp": {"token": "t0k3n-secret"}}}}
    module = load_module("_states/ccc_service_container.py", "ccc_service_container_state", salt=salt,
                         opts={"test": test}, pillar=pillar, grains={"id": "node1"})
    return module, salt


@pytest.fixture(autouse=True)
def secret_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(svc, "SECRET_DIR", str(tmp_path / "secrets"))


@pytest.mark.parametrize("container, image, changes, comment", [
    (None, IMAGE, {"created": NAME}, f"{NAME} would be created"),
    (None, None, {"image": "lukacu/frpc:1 would be pulled", "created": NAME},
     f"{NAME} would be created once image lukacu/frpc:1 is pulled"),
    (attrs(Config={"Env": ["FRPC_NETWORK=old"]}), IMAGE, {"recreated": NAME, "differences": ["env FRPC_NETWORK"]},
     f"{NAME} would be recreated"),
    (attrs(State={"Running": False}), IMAGE, {"started": NAME}, f"{NAME} is stopped and would be started"),
])
def test_test_mode_reports_the_would_be_changes_and_acts_on_nothing(container, image, changes, comment):
    module, salt = state(test=True, container=container, image=image)
    assert module.running(NAME, SPEC) == {"name": NAME, "result": None, "changes": changes, "comment": comment}
    assert salt.called(*ACTING) == []


def test_created_then_a_second_run_with_matching_facts_changes_nothing():
    module, salt = state()
    assert module.running(NAME, SPEC) == {"name": NAME, "result": True, "changes": {"created": NAME},
                                          "comment": f"{NAME} created"}
    [(_, (want,))] = salt.called(*ACTING)
    assert (want["name"], want["entrypoint"], want["labels"]) == (NAME, ["/frpc"], {"ccc.cluster-role": "frp_client"})

    module, salt = state(container=attrs())
    assert module.running(NAME, SPEC) == {"name": NAME, "result": True, "changes": {},
                                          "comment": f"{NAME} runs as configured"}
    assert salt.called(*ACTING) == []


def test_a_changed_container_is_removed_and_made_again_a_stopped_one_started():
    module, salt = state(container=attrs(Config={"Env": ["FRPC_NETWORK=old"]}))
    assert module.running(NAME, SPEC)["changes"] == {"recreated": NAME, "differences": ["env FRPC_NETWORK"]}
    assert [key for key, _ in salt.called(*ACTING)] == ["ccc_service_container.remove", "ccc_service_container.create"]

    module, salt = state(container=attrs(State={"Running": False}))
    assert module.running(NAME, SPEC)["comment"] == f"{NAME} was stopped and is started"
    assert salt.called(*ACTING) == [("ccc_service_container.start", ("c0ffee",))]


def test_a_secret_env_file_is_written_through_the_module_and_its_values_never_shown():
    spec = dict(SPEC, secret_env={"FRPC_AUTH_TOKEN": ["frp", "token"]})
    module, salt = state()
    result = module.running(NAME, spec)
    assert result["result"] is True and "t0k3n-secret" not in repr(result)
    assert salt.called("ccc_service_container.write_env_file") == [
        ("ccc_service_container.write_env_file", (NAME, {"FRPC_AUTH_TOKEN": "t0k3n-secret"}))]


@pytest.mark.parametrize("functions, comment", [
    ({"inspect": raises(CommandExecutionError("the Docker engine of this node does not answer (unix:///x.sock)"))},
     "the Docker engine of this node does not answer (unix:///x.sock)"),
    ({"create": raises(CommandExecutionError("the Docker engine refused: token t0k3n-secret: no space left"))},
     "the Docker engine refused: token ***: no space left"),
    ({"proxy_ensure": raises(CommandExecutionError("systemctl enable --now x.socket failed: no such unit"))},
     "systemctl enable --now x.socket failed: no such unit"),
])
def test_a_failing_execution_function_fails_the_state_with_one_masked_line(functions, comment):
    spec = dict(SPEC, docker_api="frpc") if "proxy_ensure" in functions else SPEC
    result = state(**functions)[0].running(NAME, spec)
    assert (result["result"], result["changes"]) == (False, {})
    assert result["comment"] == comment


def test_a_foreign_container_is_left_alone():
    module, salt = state(container=attrs(Config={"Labels": {"ccc.cluster-role": "someone-else"}}))
    for result in (module.running(NAME, SPEC), module.absent(NAME, "frp_client")):
        assert result["result"] is False and result["comment"].startswith(f"a container named {NAME} exists")
    assert salt.called(*ACTING) == []


def test_absent_in_test_mode_then_removed_then_nothing_there():
    module, salt = state(test=True, container=attrs())
    assert module.absent(NAME, "frp_client") == {"name": NAME, "result": None, "changes": {"removed": NAME},
                                                 "comment": f"{NAME} would be removed"}
    assert salt.called(*ACTING) == []
    module, salt = state(container=attrs())
    assert module.absent(NAME, "frp_client")["comment"] == f"{NAME} removed"
    assert salt.called(*ACTING) == [("ccc_service_container.remove", ("c0ffee",))]
    module, salt = state()
    assert module.absent(NAME, "frp_client") == {"name": NAME, "result": True, "changes": {},
                                                 "comment": f"{NAME} is not there"}


def test_pruned_in_test_mode_then_for_real_then_nothing_left():
    listed = {"of_role": lambda role: [["frp-old", "id-old"], [NAME, "c0ffee"]]}
    module, salt = state(test=True, **listed)
    assert module.pruned("prune", "frp_client", keep=[NAME]) == {
        "name": "prune", "result": None, "changes": {"removed": ["frp-old"]}, "comment": "would remove frp-old"}
    assert salt.called(*ACTING) == []
    module, salt = state(**listed)
    assert module.pruned("prune", "frp_client", keep=[NAME])["comment"] == "removed frp-old"
    assert salt.called(*ACTING) == [("ccc_service_container.remove", ("id-old",)),
                                    ("ccc_service_container.remove_env_file", ("frp-old",))]
    assert state()[0].pruned("prune", "frp_client") == {"name": "prune", "result": True, "changes": {},
                                                          "comment": "no other frp_client containers"}


def test_a_docker_api_proxy_is_only_asked_about_in_test_mode():
    pending = {"proxy_pending": lambda name, profile: ["frp-lab-client-docker-api.socket enabled and started"]}
    module, salt = state(test=True, **pending)
    result = module.running(NAME, dict(SPEC, docker_api="frpc"))
    assert (result["result"], result["changes"]) == (None, {
        "created": NAME, "docker api proxy": ["frp-lab-client-docker-api.socket enabled and started"]})
    assert salt.called("ccc_service_container.proxy_pending") == [
        ("ccc_service_container.proxy_pending", (NAME, "frpc"))]
    assert salt.called(*ACTING) == []
