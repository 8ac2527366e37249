"""The ``ccc_docker_daemon.config_managed`` state's own part: compare, test mode, result, comment
and changes. Boundary: ``__salt__`` is a dict of fakes that record their calls (``Fakes``), the
narrowest boundary of a state; the real ``dockerd`` check behind it is in test_docker_daemon_json.py."""

import json

import pytest
from salt.exceptions import CommandExecutionError
from support.salt_modules import Fakes, raises
from support.scripts import load_module

import ccc_docker_daemon

WANTED = {"log-driver": "json-file"}
CHECK = "ccc_docker_host.daemon_config_problem"


def state(test=False, config=None, problem=None):
    salt = Fakes({"ccc_docker_host.daemon_config": config or (lambda nvidia: dict(WANTED)),
                  CHECK: problem if callable(problem) else (lambda text, dockerd: problem)})
    return load_module("_states/ccc_docker_daemon.py", "ccc_docker_daemon_state", salt=salt, opts={"test": test}), salt


def test_test_mode_reports_the_would_be_changes_and_neither_checks_nor_writes(tmp_path):
    target = tmp_path / "daemon.json"
    target.write_text('{"log-driver": "local", "debug": true}\n')
    module, salt = state(test=True)
    result = module.config_managed(str(target))
    assert result == {"name": str(target), "result": None,
                      "changes": {"daemon.json": {"log-driver": {"old": "local", "new": "json-file"},
                                                  "removed keys": ["debug"]}},
                      "comment": f"{target} would be written (dockerd restarted)"}
    assert salt.called(CHECK) == [] and target.read_text() == '{"log-driver": "local", "debug": true}\n'


def test_written_after_the_check_then_a_second_run_with_the_same_text_changes_nothing(tmp_path):
    target = tmp_path / "etc" / "daemon.json"
    module, salt = state()
    first = module.config_managed(str(target), nvidia=True)
    assert (first["result"], first["comment"]) == (True, f"{target} written")
    assert first["changes"] == {"daemon.json": {"log-driver": {"old": None, "new": "json-file"}}}
    assert json.loads(target.read_text()) == WANTED
    assert salt.called() == [("ccc_docker_host.daemon_config", (True,)),
                             (CHECK, (ccc_docker_daemon.render(WANTED), "dockerd"))]

    module, salt = state()
    assert module.config_managed(str(target)) == {"name": str(target), "result": True, "changes": {},
                                                  "comment": f"{target} is up to date"}
    assert salt.called(CHECK) == []


@pytest.mark.parametrize("problem, comment", [
    (lambda text, dockerd: "unknown key bogus",
     "dockerd rejects it (the running engine is untouched): unknown key bogus"),
    (raises(CommandExecutionError("dockerd --validate did not answer in 60 s")),
     "dockerd could not check it (the running engine is untouched): dockerd --validate did not answer in 60 s"),
])
def test_a_rejected_or_unchecked_file_is_not_written_and_the_state_fails(tmp_path, problem, comment):
    target = tmp_path / "daemon.json"
    result = state(problem=problem)[0].config_managed(str(target))
    assert result == {"name": str(target), "result": False, "changes": {},
                      "comment": f"{target} not written, {comment}"}
    assert not target.exists()


def test_an_unusable_pillar_fails_with_the_execution_modules_reason(tmp_path):
    bad = raises(CommandExecutionError("ccc:docker:daemon must be a mapping of daemon.json keys, got list"))
    result = state(config=bad)[0].config_managed(str(tmp_path / "daemon.json"))
    assert result == {"name": str(tmp_path / "daemon.json"), "result": False, "changes": {},
                      "comment": "ccc:docker:daemon must be a mapping of daemon.json keys, got list"}
