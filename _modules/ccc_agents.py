"""
Execution module ``ccc_agents``: what ``salt/cluster/agents/`` installs under ``/opt/ccc-agents``.

The agents and their library come from the Salt file server (``salt://agents/`` is the
repository's ``agents/``, ``salt://_utils/`` its ``_utils/``). The library a node gets is derived
from the agents' imports by ``ccc_agents.library`` each time the state renders, so a new import
in an agent reaches the nodes without anyone updating a list.
"""

import ccc_agents
from salt.exceptions import CommandExecutionError

__virtualname__ = "ccc_agents"


def __virtual__():
    return __virtualname__


def _source(path):
    text = __salt__["cp.get_file_str"](f"salt://{path}")
    if text is False or text is None:
        raise CommandExecutionError(f"salt://{path} cannot be read from the file server")
    return text


def agents():
    """
    The agent programs the file server offers (``salt://agents/<name>.py``), installed into
    ``/opt/ccc-agents/bin``.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_agents.agents
    """
    found = ccc_agents.agent_files(__salt__["cp.list_master"](prefix="agents/"))
    if not found:
        raise CommandExecutionError("salt://agents/ offers no agent (is the salt/agents link to ../agents there?)")
    return found


def library():
    """
    The ``_utils`` modules the agents import, directly or through each other (installed into
    ``/opt/ccc-agents/lib``, the agents' ``PYTHONPATH``).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_agents.library
    """
    offered = {path[len("_utils/"):-3] for path in __salt__["cp.list_master"](prefix="_utils/")
               if path.endswith(".py") and path.count("/") == 1}
    sources = {name: _source(f"agents/{name}") for name in agents()}
    try:
        return ccc_agents.library(sources, lambda name: _source(f"_utils/{name}.py") if name in offered else None)
    except SyntaxError as exc:
        raise CommandExecutionError(f"cannot read the imports of {exc.filename}: {exc}") from exc


def library_pattern():
    """
    ``library()`` as the ``include_pat`` of the ``file.recurse`` that fills ``/opt/ccc-agents/lib``.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_agents.library_pattern
    """
    try:
        return ccc_agents.include_pattern(library())
    except ValueError as exc:
        raise CommandExecutionError(str(exc)) from exc
