"""
The node agents' delivery: which ``_utils`` modules they need on a node, computed from their code.

The agents (``agents/*.py``) import their library from ``PYTHONPATH`` (``/opt/ccc-agents/lib``
on a node). That folder must hold exactly the ``_utils`` modules the agents import, directly or
through each other: a hand-kept list would drift from the code, so the list is derived here from
the import statements (every ``import``/``from ... import`` anywhere in a file, including the
lazy imports inside functions). Pure: the caller hands in the sources (``salt://agents/`` and
``salt://_utils/`` through ``_modules/ccc_agents.py``, or files in a checkout for the tests).
"""

import ast

# Where an installed node keeps the agents (the units in agents/systemd/ use these paths).
ROOT = "/opt/ccc-agents"
BIN = f"{ROOT}/bin"
LIB = f"{ROOT}/lib"
VENV = f"{ROOT}/venv"
PYTHON = f"{VENV}/bin/python"


def imported_names(source, filename="<agent>"):
    """Top-level names of every module ``source`` imports (``a.b`` counts as ``a``); relative
    imports are ignored (the agents and their library are flat). ``SyntaxError`` names the file."""
    names = set()
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names


def library(agent_sources, read_module):
    """
    The ``_utils`` modules the agents need: the transitive closure of their imports over the
    modules ``read_module(name)`` knows (it returns a module's source, or ``None`` for a name that
    is not a ``_utils`` module: the standard library and packages such as ``yaml`` or ``pynvml``).
    ``agent_sources`` is ``{file name: source}``. Returns the sorted module names.
    """
    found, pending = {}, []
    for filename, source in sorted(agent_sources.items()):
        pending.extend(sorted(imported_names(source, filename)))
    while pending:
        name = pending.pop()
        if name in found:
            continue
        source = read_module(name)
        found[name] = source is not None
        if source is not None:
            pending.extend(sorted(imported_names(source, f"{name}.py") - set(found)))
    return sorted(name for name, known in found.items() if known)


def agent_files(paths):
    """The agent programs among file-server paths (``agents/<name>.py`` directly in ``agents/``)."""
    return sorted(path.split("/", 1)[1] for path in paths
                  if path.startswith("agents/") and path.count("/") == 1 and path.endswith(".py"))


def include_pattern(names):
    """A ``file.recurse`` ``include_pat`` matching exactly ``<name>.py`` for each name."""
    if not names:
        raise ValueError("the agents import no _utils module: nothing to install in lib/")
    return "E@^(" + "|".join(sorted(names)) + r")\.py$"
