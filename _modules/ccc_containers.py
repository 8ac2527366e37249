"""
Execution module ``ccc_containers``: the people-facing view of the containers pillar.
"""

import ccc_pillar

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


def selection(containers=None, users=None):
    """
    Show which containers a ``containers=``/``users=`` filter selects.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.selection containers=box1 users=alice@example.org
    """
    return ccc_pillar.select(_pillar_ccc(), containers, users)


def resolve(name):
    """
    Print what would run on this node for one container, and why, without changing anything
    (no pull, no files written).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.resolve box1
    """
    return __salt__["ccc_docker.redact"](__salt__["ccc_docker.plan"](name, pull=False))
