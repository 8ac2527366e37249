"""
Execution module ``ccc_cluster``: which cluster roles a node runs, and each role's settings.

``salt/cluster/init.sls`` and every role's ``init.sls``/``map.jinja`` read through here, so the
role rules (``ccc_roles``) and the defaults-then-pillar merge (``ccc_pillar.deep_merge``) have
one definition.
"""

import yaml

import ccc_pillar
import ccc_roles
from salt.exceptions import CommandExecutionError

__virtualname__ = "ccc_cluster"


def __virtual__():
    return __virtualname__


def _ccc():
    return ccc_pillar.pillar_ccc(__pillar__)


def _role(role):
    """``role`` in our spelling, or the error an admin reads (the roles there are)."""
    try:
        return ccc_roles.role_name(role)
    except ValueError as exc:
        raise CommandExecutionError(str(exc)) from exc


def roles():
    """
    What ``state.apply cluster`` does on this node, in role order: the roles it applies, the
    roles it cleans (``ccc:roles:<role>: absent``) and the ones it skips, with why.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_cluster.roles

    """
    ccc = _ccc()
    try:
        return ccc_roles.select(ccc.get("roles"), ccc.get("only_roles"))
    except ValueError as exc:
        raise CommandExecutionError(str(exc)) from exc


def role_enabled(role):
    """
    True when ``state.apply cluster`` would apply ``role`` on this node (``ccc:roles``,
    ``ccc:only_roles``); a role's own ``init.sls`` asks this, so ``cluster.<role>`` respects a
    node's switches too.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_cluster.role_enabled docker
    """
    name = _role(role)
    return name in roles()["apply"]


def role_settings(role, defaults=None):
    """
    The settings of ``role``: pillar ``ccc:<role>`` merged over the role's defaults (the
    ``<role>`` mapping of ``salt://cluster/<role>/defaults.yaml``, which the role's
    ``map.jinja`` passes in; from the command line they are read from the file server). Per-node
    values come from the node's pillar file, which Salt merges over the site's.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_cluster.role_settings docker
    """
    name = _role(role)
    if defaults is None:
        text = __salt__["cp.get_file_str"](f"salt://cluster/{name}/defaults.yaml")
        if not text:
            raise CommandExecutionError(f"salt://cluster/{name}/defaults.yaml is not on the file server")
        defaults = yaml.safe_load(text)
    defaults = ccc_pillar.plain(defaults)
    if isinstance(defaults, dict) and set(defaults) == {name}:
        defaults = defaults[name]
    override = _ccc().get(name)
    if override is None:
        override = {}
    if not isinstance(override, dict):
        raise CommandExecutionError(f"ccc:{name} must be a mapping of settings, got {type(override).__name__}")
    return ccc_pillar.deep_merge(defaults or {}, override)
