"""The schema shipped for editors (schema/container-settings.schema.json) is the one the
deployment validates with, written by scripts/write-settings-schema; the default settings file
is generated from the same schema and the cluster's settings, and docs/pillar.md's "Adding a
settings key" checklist names what exists."""

import importlib
import json
import pathlib
import re
import subprocess

import jsonschema
import yaml

import ccc_pillar  # noqa: E402
import ccc_report  # noqa: E402
import ccc_resolver  # noqa: E402
import ccc_schema  # noqa: E402
from support.site import sample_ccc

REPO = pathlib.Path(__file__).resolve().parents[2]
SCHEMA_FILE = REPO / "schema" / "container-settings.schema.json"


def _resolve(ccc, stack, node="node1"):
    facts = ccc_resolver.NodeFacts(node, compute_devices=ccc["node"]["compute_devices"], docker_gid=998)
    return ccc_resolver.resolve_container(ccc, stack, facts)


def _default_text(ccc, stack):
    result = _resolve(ccc, stack)
    assert result["settings_status"] == "missing"
    return result["default_settings_text"]


def _offered(text):
    """The keys the default settings file offers, one ``#  KEY: value`` line each."""
    return [line[3:].split(":")[0] for line in text.splitlines() if line.startswith("#  ") and not line.startswith("#   ")]


def test_shipped_schema_is_the_generated_text():
    assert SCHEMA_FILE.read_text(encoding="utf-8") == ccc_schema.schema_file_text(), \
        "run scripts/write-settings-schema"
    assert json.loads(SCHEMA_FILE.read_text()) == ccc_schema.USER_SETTINGS_SCHEMA


def test_the_schema_writer_checks_and_writes(tmp_path):
    """``--check`` passes on the checked-in file and fails, naming the command, on a stale copy;
    without it the command writes the generated text."""
    script = REPO / "scripts" / "write-settings-schema"
    assert subprocess.run([script, "--check"], capture_output=True, text=True).returncode == 0
    copy = tmp_path / "repo"
    (copy / "scripts").mkdir(parents=True)
    (copy / "schema").mkdir()
    (copy / "_utils").symlink_to(REPO / "_utils")
    (copy / "scripts" / "write-settings-schema").write_bytes(script.read_bytes())
    (copy / "scripts" / "write-settings-schema").chmod(0o755)
    stale = copy / "schema" / "container-settings.schema.json"
    stale.write_text("{}\n")
    checked = subprocess.run([copy / "scripts" / "write-settings-schema", "--check"], capture_output=True, text=True)
    assert checked.returncode == 1 and "run scripts/write-settings-schema" in checked.stderr
    subprocess.run([copy / "scripts" / "write-settings-schema"], check=True, capture_output=True)
    assert stale.read_text(encoding="utf-8") == ccc_schema.schema_file_text()
    assert sorted(p.name for p in (copy / "schema").iterdir()) == ["container-settings.schema.json"]


def test_default_settings_files_validate_against_the_shipped_schema():
    shipped = json.loads(SCHEMA_FILE.read_text())
    ccc = sample_ccc("node1")
    for entry in ccc["containers"]:
        result = _resolve(ccc, entry["STACK_NAME"])
        if result["settings_status"] != "missing":
            continue  # disabled, or its admin record is invalid
        text = result["default_settings_text"]
        document = yaml.safe_load(text)
        jsonschema.validate(document, shipped)
        assert document == {entry["STACK_NAME"]: None}
        # Uncommenting every line gives a file the deployment accepts as it is.
        uncommented = "\n".join(line[1:] if line.startswith("#  ") else line for line in text.splitlines())
        section = yaml.safe_load(uncommented)[entry["STACK_NAME"]]
        section = {k: v for k, v in section.items() if v not in ("", [])}
        jsonschema.validate({entry["STACK_NAME"]: section}, shipped)
        assert ccc_schema.validate_user_settings(section, entry["STACK_NAME"], {}) == []


def test_the_default_settings_file_shows_the_clusters_shm_default():
    """A user without a settings file is shown the SHM_SIZE they really get: the admin's
    ``ccc:cluster:shm_size_default``, not the shipped one."""
    ccc = sample_ccc("node1")
    ccc["cluster"]["shm_size_default"] = "8g"
    stack = next(entry["STACK_NAME"] for entry in ccc["containers"] if "SHM_SIZE" not in entry)
    result = _resolve(ccc, stack)
    assert '#  SHM_SIZE: "8g"' in result["default_settings_text"].splitlines()
    assert result["spec"]["shm_size"] == 8 * 1024 ** 3


def test_the_default_settings_file_shows_the_nodes_the_container_runs_on():
    """Without DEPLOYMENT_NODES in the admin's record the container runs on its user type's
    ``default_nodes``: the file shows those (uncommenting ``[]`` would be refused), kept to the
    allowed nodes as the placement keeps them."""
    ccc = sample_ccc("node1")
    stack = "ana-main"
    record, _ = ccc_pillar.container_record(ccc, stack)
    assert "DEPLOYMENT_NODES" not in record
    result = _resolve(ccc, stack)
    assert f"#  DEPLOYMENT_NODES: {json.dumps(result['placement'])}" in result["default_settings_text"].splitlines()
    assert result["placement"] == ccc_pillar.user_type_of(ccc, record)["default_nodes"]
    entry = next(entry for entry in ccc["containers"] if entry["STACK_NAME"] == stack)
    entry["DEPLOYMENT_NODES"] = ["node2", "elsewhere", "node1"]
    shown = [line for line in _default_text(ccc, stack).splitlines() if line.startswith("#  DEPLOYMENT_NODES:")]
    assert shown == ['#  DEPLOYMENT_NODES: ["node2", "node1"]']


def test_every_user_settable_key_is_offered_described_shipped_and_documented():
    """The schema's keys are the ones a user's file may hold (``USER_SETTABLE_KEYS``); each has a
    description, which the default settings file shows above it; the file offers each, in the
    schema's order, also for a container without FRP ports; the editors' schema holds each; and
    docs/pillar.md's record table marks exactly them ``user``."""
    schema_keys = list(ccc_schema.USER_SETTINGS_SCHEMA["additionalProperties"]["properties"])
    assert list(ccc_schema.USER_SETTABLE_KEYS) == schema_keys
    assert not set(schema_keys) & set(ccc_schema.ADMIN_ONLY_KEYS)
    ccc = sample_ccc("node1")
    for stack in ("ana-main", "bor-main"):
        text = _default_text(ccc, stack)
        assert _offered(text) == schema_keys, stack
        said = " ".join(line[2:] for line in text.splitlines() if line.startswith("# ") and not line.startswith("#  "))
        assert all(key in said.split("You may set: ")[1] for key in schema_keys)
        lines = text.splitlines()
        for key in schema_keys:
            description = ccc_schema.user_setting(key).get("description")
            assert description, f"{key} has no description in USER_SETTINGS_SCHEMA"
            at = next(index for index, line in enumerate(lines) if line.startswith(f"#  {key}:"))
            above = []
            for line in reversed(lines[:at]):
                if line.startswith("#  ") or not line.startswith("# "):
                    break
                above.insert(0, line[2:])
            assert " ".join(above) == " ".join(description.split()), key
    shipped = json.loads(SCHEMA_FILE.read_text())["additionalProperties"]["properties"]
    assert list(shipped) == schema_keys
    docs = (REPO / "docs" / "pillar.md").read_text().splitlines()
    marked_user = {line.split("`")[1].split(".")[0] for line in docs
                   if line.startswith("| `") and line.split("|")[2].strip().startswith("user")}
    assert marked_user == set(schema_keys)


def _checklist():
    text = (REPO / "docs" / "pillar.md").read_text()
    start = text.index("### Adding a settings key")
    return text[start:text.index("\n## ", start)]


def test_the_adding_a_settings_key_checklist_names_what_exists():
    """Every file and every ``module.name`` docs/pillar.md's checklist points to is there, so a
    rename that leaves the checklist behind fails here."""
    checklist = _checklist()
    named = re.findall(r"`([^`\s]+)`", checklist)
    files = [name for name in named if "/" in name and not name.startswith("ccc:")]
    assert {"_utils/ccc_schema.py", "scripts/write-settings-schema", "schema/container-settings.schema.json",
            "tests/unit/test_schema_file.py"} <= set(files)
    for name in files:
        assert (REPO / name).exists(), name
    attributes = [name for name in named if re.fullmatch(r"ccc_\w+\.\w+", name)]
    assert len(attributes) >= 6
    for name in attributes:
        module, attribute = name.split(".")
        assert hasattr(importlib.import_module(module), attribute), name
    assert "USER_SETTINGS_SCHEMA" in named and "description" in named
