"""
Execution module ``ccc_portainer``: the Portainer server container of the docker role
(``ccc:docker:portainer_ui``) as a spec for ``ccc_service_container.running``, and whether the
agent runs in swarm mode. Whether the agent secret exists is decided here, by key, so the SLS never
sees its value. Needs no Docker SDK: both SLS files that render it may run before it is installed.
"""

import ccc_pillar
import ccc_portainer
import ccc_role_settings
import ccc_swarm

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


def agent_swarm(agent=None):
    """
    Whether this node's Portainer agent runs in swarm mode (``ccc:docker:portainer_agent`` with
    ``enabled`` and ``swarm`` true, the swarm role on in ``ccc:roles``), and the environment the
    agent then needs: ``{"on": bool, "env": {"AGENT_CLUSTER_ADDR": <the agents' shared alias>}}``.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_portainer.agent_swarm
    """
    if agent is None:
        agent = ccc_role_settings.read("docker", __pillar__, __salt__["cp.get_file_str"])["portainer_agent"]
    on = ccc_swarm.agent_swarm_mode(ccc_pillar.plain(agent), ccc_swarm.role_on(ccc_pillar.pillar_ccc(__pillar__)))
    return {"on": on, "env": {"AGENT_CLUSTER_ADDR": ccc_swarm.AGENT_CLUSTER_ALIAS} if on else {}}
