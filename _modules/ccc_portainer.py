"""
Execution module ``ccc_portainer``: the Portainer server container of the docker role
(``ccc:docker:portainer_ui``) as a spec for ``ccc_service_container.running``. Whether the agent
secret exists is decided here, by key, so the SLS never sees its value.
"""

import ccc_pillar
import ccc_portainer
import ccc_role_settings

__virtualname__ = "ccc_portainer"


def __virtual__():
    return __virtualname__


def ui_spec(settings=None):
    """
    ``{"spec": the Portainer server's container spec, "problem": None}``, or ``{"spec": None,
    "problem": what is wrong}`` (``settings``: the docker role's ``portainer_ui`` mapping as its
    ``map.jinja`` merged it). No Docker API: it manages nodes through their agents.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_portainer.ui_spec
    """
    if settings is None:
        settings = ccc_role_settings.read("docker", __pillar__, __salt__["cp.get_file_str"])["portainer_ui"]
    secrets = (ccc_pillar.pillar_ccc(__pillar__).get("secrets") or {}).get("portainer") or {}
    try:
        return {"spec": ccc_portainer.ui_spec(settings, isinstance(secrets, dict) and "agent_secret" in secrets),
                "problem": None}
    except ValueError as exc:
        return {"spec": None, "problem": str(exc)}
