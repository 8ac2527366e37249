"""The ``ccc_docker_registry`` states' own part: compare with root's Docker config file, test
mode, result, comment and changes, and no secret in any of them. Boundary: ``__salt__`` is a dict
of fakes that record their calls (``Fakes``), the narrowest boundary of a state; the real login
against a registry is in tests/integration/test_docker_registry_login.py."""

import json

from salt.exceptions import CommandExecutionError
from support.salt_modules import Fakes, raises
from support.scripts import load_module

import ccc_docker_auth

HOST, USER, PASSWORD = "registry.example.org", "robot", "s3cret-pw"
LOGIN = "ccc_docker_host.registry_login"


def state(test=False, login=None):
    salt = Fakes({LOGIN: login or (lambda registry, username, password: True)})
    pillar = {"ccc": {"secrets": {"registries": {HOST: {"username": USER, "password": PASSWORD}}}}}
    module = load_module("_states/ccc_docker_registry.py", "ccc_docker_registry_state",
                         salt=salt, opts={"test": test}, pillar=pillar)
    return module, salt


def test_test_mode_would_log_in_and_neither_checks_nor_writes(tmp_path):
    config = tmp_path / "config.json"
    module, salt = state(test=True)
    assert module.logged_in(HOST, config=str(config)) == {
        "name": HOST, "result": None, "changes": {"login": f"{HOST} ({config})"}, "comment": f"would log in to {HOST}"}
    assert salt.called() == [] and not config.exists()


def test_checked_then_written_then_a_second_run_changes_nothing(tmp_path):
    config = tmp_path / "config.json"
    module, salt = state()
    assert module.logged_in(HOST, config=str(config))["changes"] == {"login": f"{HOST} ({config})"}
    assert salt.called() == [(LOGIN, (HOST, USER, PASSWORD))]
    assert ccc_docker_auth.logged_in(json.loads(config.read_text()), HOST, USER, PASSWORD)

    module, salt = state()
    assert module.logged_in(HOST, config=str(config)) == {"name": HOST, "result": True, "changes": {},
                                                          "comment": f"logged in to {HOST}"}
    assert salt.called() == []


def test_a_refused_login_fails_with_the_reason_masked_and_writes_nothing(tmp_path):
    config = tmp_path / "config.json"
    refused = raises(CommandExecutionError(f"the Docker engine refused: unauthorized: {USER}:{PASSWORD} rejected"))
    result = state(login=refused)[0].logged_in(HOST, config=str(config))
    assert (result["result"], result["changes"]) == (False, {})
    assert result["comment"].startswith(
        f"login to {HOST} refused, nothing written: the Docker engine refused: unauthorized")
    assert PASSWORD not in json.dumps(result) and not config.exists()


def test_logins_absent_in_test_mode_then_for_real_then_nothing_left(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(ccc_docker_auth.render(ccc_docker_auth.with_login({}, HOST, USER, PASSWORD)))
    preview = state(test=True)[0].logins_absent("clean", hosts=[HOST], config=str(config))
    assert (preview["result"], preview["changes"]) == (None, {"logged out": [HOST]})
    assert HOST in json.loads(config.read_text())["auths"]
    assert state()[0].logins_absent("clean", hosts=[HOST], config=str(config))["result"] is True
    assert state()[0].logins_absent("clean", hosts=[HOST], config=str(config)) == {
        "name": "clean", "result": True, "changes": {}, "comment": "no registry logins to remove"}
