"""daemon.json of the docker role (``_utils/ccc_docker_daemon.py``, ``_states/ccc_docker_daemon.py``):
the file an admin finds (sorted keys, 0644, the nvidia runtime on toolkit nodes), written only when
its text changes (so dockerd restarts only then), and a file dockerd rejects never installed.

The state runs with the real ``ccc_docker_host.daemon_config_problem`` behind ``__salt__`` (what
``dockerd`` says) and the pillar side (``ccc_docker_host.daemon_config``) given as its data.
Boundary: ``dockerd`` is a FAKE (a small script given to the state as its ``dockerd``) that
records its calls and, when told it supports ``--validate``, refuses a config with the key
``"bogus"`` as Docker 23+ does for unknown keys. The host's dockerd (20.10) has no ``--validate``."""

import json

import pytest
from support import role_files
from support.salt_modules import functions
from support.scripts import load_module

import ccc_docker_daemon
import ccc_role_schema

FAKE_DOCKERD = """#!/bin/sh
echo "$*" >> {log}
if [ "$1" = "--help" ]; then
    echo "Usage: dockerd [OPTIONS]"
    {validate_help}
    exit 0
fi
if [ "$1" = "--validate" ]; then
    if grep -q bogus "$3"; then echo "unable to configure the Docker daemon with file $3: the following directives don't match any configuration option: bogus" >&2; exit 1; fi
    echo "configuration OK"; exit 0
fi
exit 2
"""


def test_the_nvidia_runtime_is_added_and_made_default_only_on_toolkit_nodes():
    daemon = {"log-driver": "json-file", "runtimes": {"kata": {"path": "kata-runtime"}}}
    assert ccc_docker_daemon.config(daemon, nvidia=False) == daemon
    with_gpu = ccc_docker_daemon.config(daemon, nvidia=True)
    assert with_gpu["runtimes"] == {"kata": {"path": "kata-runtime"},
                                    "nvidia": {"path": "nvidia-container-runtime", "runtimeArgs": []}}
    assert with_gpu["default-runtime"] == "nvidia"
    assert daemon == {"log-driver": "json-file", "runtimes": {"kata": {"path": "kata-runtime"}}}  # not mutated
    text = ccc_docker_daemon.render(with_gpu)
    assert text.index('"default-runtime"') < text.index('"log-driver"') < text.index('"runtimes"')
    assert ccc_docker_daemon.config(None, nvidia=False) == {}


def test_the_schema_refuses_a_daemon_that_is_no_mapping_and_config_runtimes_that_are_none():
    """``ccc:docker:daemon`` a mapping is the docker role's schema.yaml's rule (ccc_role_schema);
    its runtimes, where the nvidia runtime is added, ``config``'s."""
    settings = dict(role_files.defaults("docker"), daemon=["not", "a", "mapping"])
    assert ccc_role_schema.problems("docker", settings, role_files.schema("docker")) == [
        "ccc:docker:daemon must be a mapping of daemon.json keys, got ['not', 'a', 'mapping']"]
    for daemon in ({"runtimes": None}, {"runtimes": {"nvidia": "nvidia-container-runtime"}}):
        assert ccc_docker_daemon.config(daemon, nvidia=False) == daemon  # dockerd's to judge
        with pytest.raises(ValueError, match="ccc:docker:daemon:runtimes must be a mapping of runtime name"):
            ccc_docker_daemon.config(daemon, nvidia=True)


@pytest.fixture
def fake_dockerd(tmp_path):
    def make(validate):
        path = tmp_path / "dockerd"
        path.write_text(FAKE_DOCKERD.format(log=tmp_path / "dockerd.log",
                                            validate_help='echo "      --validate   Validate daemon configuration and exit"' if validate else ""))
        path.chmod(0o755)
        return str(path)
    return make


def state(daemon, test=False):
    pillar_side = {"ccc_docker_host.daemon_config": lambda nvidia: ccc_docker_daemon.config(daemon, nvidia)}
    return load_module("_states/ccc_docker_daemon.py", "ccc_docker_daemon_state", opts={"test": test},
                       salt=functions("_modules/ccc_docker_host.py", salt=pillar_side))


def test_written_once_then_unchanged_then_changed_keys_reported(tmp_path, fake_dockerd):
    target = tmp_path / "etc" / "docker" / "daemon.json"
    dockerd = fake_dockerd(validate=True)
    preview = state({"log-driver": "json-file"}, test=True).config_managed(str(target), nvidia=True, dockerd=dockerd)
    assert preview["result"] is None and not target.exists()
    assert preview["comment"] == f"{target} would be written (dockerd restarted)"

    first = state({"log-driver": "json-file"}).config_managed(str(target), nvidia=True, dockerd=dockerd)
    assert first["result"] is True and first["comment"] == f"{target} written"
    assert set(first["changes"]["daemon.json"]) == {"default-runtime", "log-driver", "runtimes"}
    assert json.loads(target.read_text())["default-runtime"] == "nvidia"
    assert oct(target.stat().st_mode & 0o777) == "0o644"
    assert "--validate --config-file" in (tmp_path / "dockerd.log").read_text()

    second = state({"log-driver": "json-file"}).config_managed(str(target), nvidia=True, dockerd=dockerd)
    assert (second["result"], second["changes"], second["comment"]) == (True, {}, f"{target} is up to date")

    changed = state({"log-driver": "local"}).config_managed(str(target), nvidia=False, dockerd=dockerd)
    assert changed["changes"] == {"daemon.json": {"log-driver": {"old": "json-file", "new": "local"},
                                                  "removed keys": ["default-runtime", "runtimes"]}}


def test_a_file_dockerd_rejects_is_not_installed_and_the_state_fails(tmp_path, fake_dockerd):
    target = tmp_path / "daemon.json"
    target.write_text('{"log-driver": "json-file"}\n')
    result = state({"bogus": True}).config_managed(str(target), nvidia=False, dockerd=fake_dockerd(validate=True))
    assert result["result"] is False and result["changes"] == {}
    assert result["comment"].startswith(f"{target} not written, dockerd rejects it (the running engine is untouched): ")
    assert "don't match any configuration option: bogus" in result["comment"]
    assert target.read_text() == '{"log-driver": "json-file"}\n'


def test_without_validate_support_the_file_is_written_unvalidated(tmp_path, fake_dockerd):
    target = tmp_path / "daemon.json"
    result = state({"bogus": True}).config_managed(str(target), nvidia=False, dockerd=fake_dockerd(validate=False))
    assert result["result"] is True and json.loads(target.read_text()) == {"bogus": True}
    assert "--validate" not in (tmp_path / "dockerd.log").read_text().replace("--help", "")
