"""
Execution module ``ccc_cluster``: which cluster roles a node runs, and each role's settings.

``salt/cluster/init.sls`` and every role's ``init.sls``/``map.jinja`` read through here; the rules live in
``ccc_roles`` and ``ccc_role_settings`` (which the role modules use directly), so the selection and
the defaults-then-pillar merge have one definition.
"""

import subprocess

import ccc_engine
import ccc_pillar
import ccc_role_services
import ccc_role_settings
import ccc_service_health

__virtualname__ = "ccc_cluster"


def __virtual__():
    return __virtualname__


def _ccc():
    return ccc_pillar.pillar_ccc(__pillar__)


def roles():
    """
    What ``state.apply cluster`` does on this node, in role order: the roles it applies, the
    roles it cleans (``ccc:roles:<role>: absent``) and the ones it skips, with why.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_cluster.roles

    """
    return ccc_role_settings.selection(__pillar__)


def role_enabled(role):
    """
    True when ``state.apply cluster`` would apply ``role`` on this node (``ccc:roles``,
    ``ccc:only_roles``); a role's own ``init.sls`` asks this, so ``cluster.<role>`` respects a
    node's switches too.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_cluster.role_enabled docker
    """
    return ccc_role_settings.enabled(role, __pillar__)


def role_settings(role, defaults=None):
    """
    The settings of ``role``: pillar ``ccc:<role>`` (``ccc:fans`` for superfan_gpu and
    ``ccc:monitoring`` for monitoring_agent: ``ccc_roles.SETTINGS_KEYS``) merged over the role's defaults (the
    ``<role>`` mapping of ``salt://cluster/<role>/defaults.yaml``, which the role's
    ``map.jinja`` passes in; from the command line they are read from the file server). Per-node
    values come from the node's pillar file, which Salt merges over the site's.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_cluster.role_settings docker
    """
    if defaults is None:
        return ccc_role_settings.read(role, __pillar__, __salt__["cp.get_file_str"])
    return ccc_role_settings.merge(role, defaults, _ccc())


def role_check(role, settings=None):
    """
    ``{"problems": [...]}``: what is wrong with ``role``'s settings by its
    ``salt://cluster/<role>/schema.yaml`` (``ccc_role_schema``). The role scaffold
    (``salt/cluster/macros.jinja``) asks this for the roles that have no rules beyond their
    schema; the others' plan functions run the same check first. ``settings`` default to the
    role's effective settings on this node.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_cluster.role_check timezone
    """
    if settings is None:
        settings = role_settings(role)
    return {"problems": ccc_role_settings.problems(role, settings, __salt__["cp.get_file_str"])}


def _unit_state(name):
    """One unit's state from ``systemctl show`` (read directly: ``service.status`` says only
    running or not, and ``__salt__`` may pick another service provider on this node)."""
    try:
        shown = subprocess.run(["systemctl", "show", "--property=" + ",".join(ccc_service_health.UNIT_PROPERTIES),
                                "--", name], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"systemd does not answer: {exc}"
    if shown.returncode:
        return f"systemd does not answer: {(shown.stderr or '').strip()[:120]}"
    return ccc_service_health.unit_state(ccc_service_health.parse_show(shown.stdout))


def _container_state(node, name, role):
    """One container's state from its inspect data through the node's Docker engine."""
    if ccc_engine.docker is None:
        return "cannot tell: the docker Python SDK is missing on this node"
    try:
        attrs = ccc_engine.inspect(ccc_engine.context_clients(__context__, node)(), name)
    except Exception as exc:  # noqa: BLE001 - an engine that does not answer is the state
        problem = ccc_engine.engine_problem(exc, node["docker_url"])
        if problem is None:
            raise
        return problem
    return ccc_service_health.container_state(attrs, role)


def services():
    """
    The services of the cluster roles this node applies (``ccc_role_services``) and how each
    is doing: ``{role: {service: "ok" | why not}}``. Units are read with ``systemctl show``,
    containers through the node's Docker engine; the ``ccc.status`` runner asks every node this.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_cluster.services
    """
    ccc = _ccc()
    node = ccc_pillar.node_settings(ccc, __grains__["id"])
    result = {}
    for role in roles()["apply"]:
        if not ccc_role_services.has_services(role):
            continue
        for service in ccc_role_services.services(role, role_settings(role), __grains__["id"], ccc):
            if service["kind"] == "unit":
                state = _unit_state(service["name"])
            else:
                state = _container_state(node, service["name"], role)
            result.setdefault(role, {})[ccc_service_health.label(service)] = state
    return result

