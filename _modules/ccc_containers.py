"""
Execution module ``ccc_containers``: the people-facing view of the containers pillar.
"""

import ccc_engine
import ccc_pillar
import ccc_plan
import ccc_problems
import ccc_report
import ccc_rules
from salt.exceptions import CommandExecutionError

__virtualname__ = "ccc_containers"


def __virtual__():
    return __virtualname__


def _pillar_ccc():
    return ccc_pillar.pillar_ccc(__pillar__)


def settings():
    """
    Show the effective cluster and node settings (pillar merged over the defaults).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.settings
    """
    ccc = _pillar_ccc()
    return {"cluster": ccc_pillar.cluster_settings(ccc), "node": ccc_pillar.node_settings(ccc, __grains__["id"])}


def crash_rules():
    """
    What tells a compute container's crash from a stop, as data for the ``ccc_docker`` beacon
    (beacons are loaded without ``_utils``): the label of the containers ccc-salt manages (its
    events filter), the label and pattern of their STACK_NAME (a tag part), and the exit codes of
    a stop (``ccc_problems.STOP_EXIT_CODES``: not a crash).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.crash_rules
    """
    return {"managed_by": [ccc_rules.MANAGED_BY_LABEL, ccc_rules.MANAGED_BY_VALUE],
            "stack_label": ccc_rules.STACK_LABEL, "stack_pattern": ccc_rules.STACK_NAME_PATTERN.pattern,
            "stop_exit_codes": list(ccc_problems.STOP_EXIT_CODES)}


def selection(containers=None, users=None):
    """
    Show which containers a ``containers=``/``users=`` filter selects.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.selection containers=box1 users=alice@example.org
    """
    return ccc_pillar.select(_pillar_ccc(), containers, users)


def resolve(name, raw=False):
    """
    Show what would run on this node for one container, and why, without changing anything
    (no pull, no files written): read like the ``.deploy`` report (placement and why, image,
    GPUs, mounts, ports, messages), or with ``raw=True`` the whole resolution as data. Secrets
    are masked either way.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.resolve box1
        salt-call ccc_containers.resolve box1 raw=True
    """
    ccc = _pillar_ccc()
    clients = ccc_engine.context_clients(__context__, ccc_pillar.node_settings(ccc, __grains__["id"]))
    shown = ccc_plan.display(ccc, __grains__["id"], name, clients)
    return shown if raw else ccc_report.plan_text(shown)


def watched_files(files=None):
    """
    Show the settings files whose edits this node's ``ccc_settings`` beacon reports: those of
    the containers that may run here and are not ``DISABLED``, with the beacon's site tunables
    (``ccc:cluster:beacon``) and the pillar's render errors; or, given ``files`` (a beacon
    configured with its own ``[{"stack", "path"}]`` list), the entries of that list that name a
    valid STACK_NAME, and a problem for each other one. The beacon asks for this because it is
    loaded without the shared code. A pillar with render errors still gives its list:
    ``pillar_errors`` tells the beacon to keep its last good one instead.

    Returns ``{"files": [{"stack", "path"}], "beacon": {...}, "pillar_errors": [...],
    "problems": [...]}``; raises ``CommandExecutionError`` when no file can be named (the user
    data root is not an absolute path).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.watched_files
        salt-call ccc_containers.watched_files files='[{"stack": "box1", "path": "/data/box1.yml"}]'
    """
    if files is not None:
        entries = [item for item in files if isinstance(item, dict)] if isinstance(files, list) else []
        return {"files": [item for item in entries if ccc_rules.is_stack_name(item.get("stack"))], "beacon": {},
                "pillar_errors": [], "problems": [f"files entry: invalid STACK_NAME {item.get('stack')!r}"
                                                  for item in entries if not ccc_rules.is_stack_name(item.get("stack"))]}
    ccc = _pillar_ccc()
    try:
        found = ccc_pillar.watched_files(ccc, ccc_pillar.node_settings(ccc, __grains__["id"])["name"])
    except ValueError as exc:
        raise CommandExecutionError(str(exc)) from None
    beacon = (ccc.get("cluster") or {}).get("beacon") if isinstance(ccc.get("cluster"), dict) else None
    errors = __pillar__.get("_errors") or []
    return {"files": found, "beacon": beacon if isinstance(beacon, dict) else {},
            "pillar_errors": [str(error) for error in (errors if isinstance(errors, list) else [errors])],
            "problems": []}
