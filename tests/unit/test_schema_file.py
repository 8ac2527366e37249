"""The schema shipped for editors (schema/container-settings.schema.json) is the one the
deployment validates with, and it accepts the default settings file the deployment writes."""

import json
import pathlib

import jsonschema
import yaml

import ccc_pillar  # noqa: E402
import ccc_report  # noqa: E402
import ccc_resolver  # noqa: E402
import ccc_schema  # noqa: E402
from support.site import sample_ccc

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_shipped_schema_matches_the_validator():
    shipped = json.loads((REPO / "schema" / "container-settings.schema.json").read_text())
    assert shipped == ccc_schema.USER_SETTINGS_SCHEMA


def test_default_settings_files_validate_against_the_shipped_schema():
    shipped = json.loads((REPO / "schema" / "container-settings.schema.json").read_text())
    ccc = sample_ccc("node1")
    for entry in ccc["containers"]:
        record, _ = ccc_pillar.container_record(ccc, entry["STACK_NAME"])
        text = ccc_report.default_settings_text(record, ccc_pillar.cluster_settings(ccc)["shm_size_default"])
        document = yaml.safe_load(text)
        jsonschema.validate(document, shipped)
        assert document == {entry["STACK_NAME"]: None}
        # Uncommenting every line gives a file the deployment accepts as it is.
        uncommented = "\n".join(line[1:] if line.startswith("#  ") else line for line in text.splitlines())
        section = yaml.safe_load(uncommented)[entry["STACK_NAME"]]
        jsonschema.validate({entry["STACK_NAME"]: {k: v for k, v in section.items() if v not in ("", [])}}, shipped)


def test_the_default_settings_file_shows_the_clusters_shm_default():
    """A user without a settings file is shown the SHM_SIZE they really get: the admin's
    ``ccc:cluster:shm_size_default``, not the shipped one."""
    ccc = sample_ccc("node1")
    ccc["cluster"]["shm_size_default"] = "8g"
    stack = ccc["containers"][0]["STACK_NAME"]
    facts = ccc_resolver.NodeFacts("node1", compute_devices=ccc["node"]["compute_devices"], docker_gid=998)
    result = ccc_resolver.resolve_container(ccc, stack, facts)
    assert result["settings_status"] == "missing"
    assert '#  SHM_SIZE: "8g"' in result["default_settings_text"].splitlines()
    assert result["spec"]["shm_size"] == 8 * 1024 ** 3


def test_the_user_settable_keys_are_one_list():
    """The schema's keys are the ones a user's file may hold (``USER_SETTABLE_KEYS``), the default
    settings file offers each of them, and docs/pillar.md's record table marks exactly them
    ``user``."""
    schema_keys = list(ccc_schema.USER_SETTINGS_SCHEMA["additionalProperties"]["properties"])
    assert list(ccc_schema.USER_SETTABLE_KEYS) == schema_keys
    assert not set(schema_keys) & set(ccc_schema.ADMIN_ONLY_KEYS)
    ccc = sample_ccc("node1")
    record, _ = ccc_pillar.container_record(ccc, "ana-main")
    text = ccc_report.default_settings_text(record, "2g")
    offered = [line[3:].split(":")[0] for line in text.splitlines()
               if line.startswith("#  ") and not line.startswith("#   ")]
    assert offered == schema_keys
    said = " ".join(line[2:] for line in text.splitlines() if line.startswith("# ") and not line.startswith("#  "))
    assert all(key in said.split("You may set: ")[1] for key in schema_keys)
    docs = (REPO / "docs" / "pillar.md").read_text().splitlines()
    marked_user = {line.split("`")[1].split(".")[0] for line in docs
                   if line.startswith("| `") and line.split("|")[2].strip().startswith("user")}
    assert marked_user == set(schema_keys)
