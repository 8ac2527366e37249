"""Load files that are not importable packages as modules: the agents' service scripts
(agents/*.py) and Salt's custom modules with the dunders Salt would inject."""

import importlib.util
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]


def load_module(path, name, **dunders):
    """Import the repository file ``path`` as module ``name``; each keyword becomes a dunder
    (``salt=...`` sets ``__salt__``), as Salt's loader injects them. The file's folder is on
    ``sys.path`` (last) while it runs, as Salt's loader puts it there: a state imports the
    states' private helpers (``_states/_ccc_*.py``) by name."""
    spec = importlib.util.spec_from_file_location(name, REPO / path)
    module = importlib.util.module_from_spec(spec)
    folder = str((REPO / path).parent)
    added = folder not in sys.path
    if added:
        sys.path.append(folder)
    try:
        spec.loader.exec_module(module)
    finally:
        if added:
            sys.path.remove(folder)
    for key, value in dunders.items():
        setattr(module, f"__{key}__", value)
    return module


def load_agent(file_name):
    """Import ``agents/<file_name>`` under its stem as a module and return it."""
    return load_module(pathlib.Path("agents") / file_name, pathlib.Path(file_name).stem)
