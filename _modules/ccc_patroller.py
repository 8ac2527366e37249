"""
Execution module ``ccc_patroller``: what the patroller role runs on this node (rules in
``_utils/ccc_patroller.py``), as the role's SLS renders it.
"""

import ccc_frp
import ccc_patroller
import ccc_pillar
import ccc_role_settings
import ccc_secrets
from salt.exceptions import CommandExecutionError

__virtualname__ = "ccc_patroller"


def __virtual__():
    return __virtualname__


def _has_secret(ccc, path):
    try:
        ccc_secrets.lookup({"ccc": ccc}, *path)
    except (ccc_secrets.MissingSecret, ccc_secrets.InvalidSecret):
        return False
    return True


def _frp_problems(ccc, result, settings):
    """Where this node's FRP client publishes the role's services: the proxy network must be one
    it watches, and every credential the labels ask for must be in this node's secrets (frpc
    would otherwise get no usable basic auth)."""
    if not ccc_role_settings.enabled("frp_client", __pillar__):
        return []
    frp = ccc_role_settings.read("frp_client", __pillar__, __salt__["cp.get_file_str"])
    watched = [entry.get("network") for entry in frp.get("networks") or [] if isinstance(entry, dict)]
    problems = []
    if settings.get("proxy_network") not in watched:
        problems.append(f"proxy_network {settings.get('proxy_network')!r} is not watched by this node's FRP client "
                        f"(ccc:frp_client:networks: {', '.join(map(str, watched)) or 'none'}): "
                        "<node>-monitor would not be published")
    auths = ["monitor"] + (["patroller_webui"] if result["webui"] else [])
    for auth in auths:
        paths = [[*ccc_frp.AUTH[auth], part] for part in ("user", "password")]
        if not all(_has_secret(ccc, path) for path in paths):
            problems.append(f"FRP basic auth {auth} needs ccc:secrets:{':'.join(ccc_frp.AUTH[auth])}:user and "
                            ":password in this node's pillar (docs/secrets.md)")
    return problems


def plan(settings=None):
    """
    What the patroller role runs here: ``{"problems", "gpus", "claims", "webui", "webui_files",
    "webui_config"}`` (``ccc_patroller.plan``); the role changes nothing while ``problems`` is
    not empty. ``settings``: the role's merged settings (from the command line they are read
    through ``ccc_cluster.role_settings``).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_patroller.plan
    """
    settings, schema = ccc_role_settings.given("patroller", settings, __pillar__, __salt__["cp.get_file_str"])
    ccc = ccc_pillar.pillar_ccc(__pillar__)
    node = ccc_pillar.node_settings(ccc, __grains__["id"])
    try:
        result = ccc_patroller.plan(settings, ccc_pillar.cluster_settings(ccc), __grains__["id"],
                                    node["compute_devices"], schema)
    except (TypeError, AttributeError) as exc:
        raise CommandExecutionError(f"ccc:patroller cannot be read: {exc}") from exc
    problems = result["problems"] or _frp_problems(ccc, result, settings)
    if problems:
        return {**{key: None for key in result}, "problems": problems}
    return result


def services(settings=None):
    """
    The services the patroller role runs on this node with its settings (for ``ccc.status``).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_patroller.services
    """
    if settings is None:
        settings = ccc_role_settings.read("patroller", __pillar__, __salt__["cp.get_file_str"])
    return ccc_patroller.services(settings, __grains__["id"])
