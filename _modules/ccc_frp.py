"""
Execution module ``ccc_frp``: the frpc containers of this node (role frp_client), as specs for
``ccc_service_container.running``. Which FRP credentials exist in the node's secrets is decided
here, by key, so the SLS never sees a secret value.
"""

import ccc_frp_client
import ccc_pillar
import ccc_role_settings
import ccc_secrets

__virtualname__ = "ccc_frp"


def __virtual__():
    return __virtualname__


def _present(path):
    """True when ``ccc:secrets:<path>`` is set (an unusable value counts: the state then fails on it)."""
    try:
        ccc_secrets.lookup({"ccc": ccc_pillar.pillar_ccc(__pillar__)}, *path)
    except ccc_secrets.MissingSecret:
        return False
    except ccc_secrets.InvalidSecret:
        return True
    return True


def client_specs(settings=None):
    """
    The frpc containers this node runs: ``{"problems": [...], "specs": [...]}``, the spec of each
    (``ccc:frp_client``; ``settings``: the role's merged settings, as the role's ``map.jinja`` has
    them), none while ``problems`` is not empty. Secrets appear as pillar paths only.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_frp.client_specs
    """
    settings, schema = ccc_role_settings.given("frp_client", settings, __pillar__, __salt__["cp.get_file_str"])
    problems = ccc_frp_client.check(settings, schema)
    if problems:
        return {"problems": problems, "specs": []}
    return {"problems": [], "specs": ccc_frp_client.container_specs(settings, __grains__["id"], _present)}
