"""Load the agents' service scripts (agents/*.py, not importable packages) as modules."""

import importlib.util
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]


def load_agent(file_name):
    """Import ``agents/<file_name>`` under its stem as a module and return it."""
    path = REPO / "agents" / file_name
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
