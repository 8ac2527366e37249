"""Every cluster role is complete, as docs/roles.md "Adding a role" lists it: its five files in
``salt/cluster/<role>/``, a section in docs/roles.md, an ``init.sls`` on the shared scaffold
(``salt/cluster/macros.jinja``), and a schema that is itself well formed, declares exactly the keys
of the role's defaults, and passes those defaults."""

import pathlib
import re

import pytest
import yaml

from support import site  # noqa: F401  (puts _utils on sys.path)

import ccc_role_schema
import ccc_roles

REPO = pathlib.Path(__file__).resolve().parents[2]
CLUSTER = REPO / "salt" / "cluster"
FILES = ("init.sls", "clean.sls", "defaults.yaml", "map.jinja", "schema.yaml")
DOCS = (REPO / "docs" / "roles.md").read_text()


def _load(role, name):
    data = yaml.safe_load((CLUSTER / role / name).read_text())
    assert isinstance(data, dict) and list(data) == [role], f"{role}/{name} must hold one mapping under {role}:"
    return data[role]


def _key_differences(spec, defaults, path):
    """Where the schema's declared keys and the defaults' keys differ (both ways), recursively
    wherever the schema declares ``keys``."""
    found = []
    if "keys" in spec and defaults is not None:  # null: off by default, its keys in defaults.yaml's comment
        if not isinstance(defaults, dict):
            return [f"{path}: the schema declares keys, the default is {defaults!r}"]
        declared, given = set(spec["keys"]), set(defaults)
        found += [f"{path}:{key} is in the schema, not in defaults.yaml" for key in sorted(declared - given)]
        found += [f"{path}:{key} is in defaults.yaml, not in the schema" for key in sorted(given - declared)]
        for key in sorted(declared & given):
            found += _key_differences(spec["keys"][key], defaults[key], f"{path}:{key}")
    return found


@pytest.mark.parametrize("role", ccc_roles.ORDER)
def test_every_role_has_its_files_and_a_docs_section(role):
    missing = [name for name in FILES if not (CLUSTER / role / name).is_file()]
    assert missing == [], f"salt/cluster/{role}/ lacks {missing}"
    assert f"\n## `{role}`\n" in DOCS, f"docs/roles.md has no section ## `{role}`"


@pytest.mark.parametrize("role", ccc_roles.ORDER)
def test_every_schema_is_well_formed_and_matches_its_defaults(role):
    schema, defaults = _load(role, "schema.yaml"), _load(role, "defaults.yaml")
    assert ccc_role_schema.spec_problems(schema, role) == []
    assert schema.get("type") == "mapping" and "keys" in schema
    assert _key_differences(schema, defaults, role) == []
    # required keys may default to null: the admin sets them where the role runs
    assert ccc_role_schema.problems(role, defaults, schema, require=False) == []


@pytest.mark.parametrize("role", ccc_roles.ORDER)
def test_every_role_uses_the_scaffold(role):
    text = (CLUSTER / role / "init.sls").read_text()
    assert '{%- from "cluster/macros.jinja" import role with context %}' in text
    assert re.search(r'\{%- call\(\w+\) role\("' + role + r'", ', text), f"{role}/init.sls does not call role()"
    assert text.rstrip().endswith("{%- endcall %}")
    assert "ccc_cluster.role_enabled" not in text  # the macro asks, once


def test_the_checklist_names_what_the_tests_hold():
    section = DOCS.split("\n## Adding a role\n", 1)[1].split("\n## ", 1)[0]
    for name in FILES + ("_utils/ccc_roles.py", "salt/cluster/macros.jinja", "tests/unit/test_role_files.py"):
        assert name in section, f"the checklist does not name {name}"
    assert (REPO / "_utils" / "ccc_roles.py").is_file() and (CLUSTER / "macros.jinja").is_file()


def test_a_schema_typo_is_caught():
    assert ccc_role_schema.spec_problems({"type": "mapping", "keys": {"a": {"tpye": "string"}, "b": {"type": "int"},
                                                                       "c": {"format": "mail"}}}) == [
        "schema:a: unknown spec key 'tpye'", "schema:b: unknown type 'int'", "schema:c: unknown format 'mail'"]


def test_a_key_missing_from_either_side_is_named():
    spec = {"type": "mapping", "keys": {"a": {}, "b": {"type": "mapping", "keys": {"x": {}}}}}
    assert _key_differences(spec, {"a": 1, "b": {"y": 2}, "c": 3}, "r") == [
        "r:c is in defaults.yaml, not in the schema", "r:b:x is in the schema, not in defaults.yaml",
        "r:b:y is in defaults.yaml, not in the schema"]
