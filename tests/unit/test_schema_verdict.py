"""The quick schema verdict (``ccc_schema_verdict``): a valid record or settings file is checked
without importing jsonschema (its import was about 40 ms of every redeploy and apply), and
whatever the verdict is not sure of still goes to jsonschema, whose messages users read."""

import json
import subprocess
import sys

import pytest

import ccc_schema  # noqa: E402
import ccc_schema_verdict  # noqa: E402
from support.site import REPO

SCHEMA = ccc_schema.USER_SETTINGS_SCHEMA
VALID = {
    "CONTAINER_IMAGE": "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1",
    "DEPLOYMENT_NODES": ["node1", "node2"],
    "SHM_SIZE": "8g",
    "USE_HOST_TIMEDATE": True,
    "FRP_PORTS": {"TCP": [22, "2222"], "HTTP": [{"port": 8080, "subdomain": "lab", "pass": "x",
                                                   "health_check": "true", "subdomain_hostname_prefix": False}]},
}


def test_a_valid_section_is_decided_without_jsonschema():
    assert ccc_schema_verdict.verdict({"ana-main": VALID}, SCHEMA) is True
    assert ccc_schema_verdict.verdict({"ana-main": None}, SCHEMA) is True  # an empty section


@pytest.mark.parametrize("section, why", [
    ({"SHM_SIZE": 0}, "below the minimum"),
    ({"FRP_PORTS": {"TCP": [22, 22]}}, "a repeated port"),
    ({"FRP_PORTS": {"HTTP": [{"port": 80}]}}, "a required key missing"),
    ({"USE_HOST_TIMEDATE": "yes"}, "the wrong type"),
    ({"DEPLOYMENT_NODES": ["node 1"]}, "a name the pattern refuses"),
    ({"NOT_A_KEY": 1}, "a key the schema does not have"),
    ({"FRP_PORTS": {"HTTP": [{"port": 80, "subdomain": "x", "health_check": "maybe"}]}}, "a word the enum lacks"),
])
def test_an_invalid_section_is_refused_by_both(section, why):
    assert ccc_schema_verdict.verdict({"ana-main": section}, SCHEMA) is False, why
    assert ccc_schema.validate_user_settings(section, "ana-main", {}), why


def test_one_of_means_exactly_one():
    """The settings schema's branches never overlap; the rule is still jsonschema's."""
    assert ccc_schema_verdict.verdict(5, {"oneOf": [{"type": "integer"}, {"minimum": 1}]}) is False
    assert ccc_schema_verdict.verdict(0, {"oneOf": [{"type": "integer"}, {"minimum": 1}]}) is True


@pytest.mark.parametrize("document, schema", [
    (2.0, {"type": "integer"}),  # jsonschema's integer may include 2.0
    ([True, 1], {"uniqueItems": True}),  # True and 1 differ in JSON, not in a Python set
    ({"a": 1}, {"patternProperties": {"^a$": {}}, "additionalProperties": False}),
    ("x", {"format": "email"}),  # a keyword the verdict does not know
], ids=["float-integer", "bool-and-int", "pattern-properties", "unknown-keyword"])
def test_what_the_verdict_is_not_sure_of_is_left_to_jsonschema(document, schema):
    assert ccc_schema_verdict.verdict(document, schema) is None


def test_a_port_written_as_a_float_gets_jsonschemas_answer():
    """``22.0`` may be an integer to jsonschema: undecided here, so the message is jsonschema's."""
    assert ccc_schema_verdict.verdict({"s": {"FRP_PORTS": {"TCP": [22.0]}}}, SCHEMA) is None
    assert ccc_schema.validate_user_settings({"FRP_PORTS": {"TCP": [22.0]}}, "s", {}) == []


def test_the_sample_sites_records_are_checked_without_importing_jsonschema():
    """What a run does for every container: check its admin record (and a valid user file). A
    key added to the schema with a keyword the verdict does not know fails here (each run would
    import jsonschema again): docs/pillar.md, "Adding a settings key"."""
    code = f"""
import json, sys, yaml
sys.path[:0] = [{str(REPO / "_utils")!r}]
sys.path.insert(0, {str(REPO / "tests")!r})
from support.site import sample_ccc
import ccc_pillar, ccc_schema
ccc = sample_ccc("node1")
problems = [p for entry in ccc["containers"] for p in ccc_pillar.container_record(ccc, entry["STACK_NAME"])[1]]
problems += ccc_schema.validate_user_settings(json.loads({json.dumps(VALID)!r}), "ana-main", {{}})
print(json.dumps([len(ccc["containers"]), problems, "jsonschema" in sys.modules]))
problems = ccc_schema.validate_user_settings({{"SHM_SIZE": 0}}, "ana-main", {{}})
print(json.dumps([problems, "jsonschema" in sys.modules]))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    checked, problems, imported = json.loads(proc.stdout.splitlines()[0])
    assert checked >= 3 and problems == [] and imported is False
    problems, imported = json.loads(proc.stdout.splitlines()[1])
    assert problems == ["SHM_SIZE: the value 0 has the wrong type or form"] and imported is True
