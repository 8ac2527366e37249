"""A cluster role's files as the file server serves them (``salt/cluster/<role>/``), for the unit
tests of the role's rules: its ``schema.yaml`` and ``defaults.yaml`` as plain data."""

import pathlib

import yaml

CLUSTER = pathlib.Path(__file__).resolve().parents[2] / "salt" / "cluster"


def schema(role):
    """The role's schema, as ``ccc_role_settings.schema`` reads it."""
    return yaml.safe_load((CLUSTER / role / "schema.yaml").read_text())


def defaults(role):
    """The role's defaults (the mapping under its top-level key)."""
    return yaml.safe_load((CLUSTER / role / "defaults.yaml").read_text())[role]
