"""
Master-side ccc-salt helpers (runner ``ccc``), used by the reactor.

A settings edit must be applied on every node where its container may run: the node it leaves
removes it and the node it moves to starts it. Which nodes those are follows from pillar
(``ccc_containers.allowed_nodes``); the master reads it from its cache of the minions' pillar, so
reacting costs no pillar compilation.
"""

import os
import sys

import salt.client
import salt.utils.master

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_modules"))
import ccc_containers  # noqa: E402  (the repository's _modules/, beside this _runners/)

__virtualname__ = "ccc"


def __virtual__():
    return __virtualname__


def targets_for(pillars, stack):
    """
    The minions on which ``stack`` may run, from a map minion id -> pillar.

    CLI Example:

    .. code-block:: bash

        salt-run ccc.targets ana-main
    """
    targets = []
    for minion_id, pillar in sorted((pillars or {}).items()):
        ccc = ccc_containers.pillar_ccc(pillar)
        node = ccc_containers.node_settings(ccc, minion_id)["name"]
        if node in ccc_containers.allowed_nodes(ccc, stack):
            targets.append(minion_id)
    return targets


def _cached_pillars():
    util = salt.utils.master.MasterPillarUtil(
        "*", "glob", use_cached_grains=True, grains_fallback=False,
        use_cached_pillar=True, pillar_fallback=False, opts=__opts__,
    )
    return util.get_minion_pillar()


def targets(stack):
    """
    Show the minions a settings edit of ``stack`` is applied on.

    CLI Example:

    .. code-block:: bash

        salt-run ccc.targets ana-main
    """
    return targets_for(_cached_pillars(), stack)


def redeploy(stack):
    """
    Apply ``containers`` limited to ``stack`` on every minion where it may run (queued behind a
    running state job, never failing because one runs).

    CLI Example:

    .. code-block:: bash

        salt-run ccc.redeploy ana-main
    """
    if not isinstance(stack, str) or not ccc_containers.STACK_NAME_PATTERN.match(stack):
        return {"stack": stack, "targets": [], "error": "not a STACK_NAME"}
    minions = targets(stack)
    if not minions:
        return {"stack": stack, "targets": [], "jid": None}
    client = salt.client.get_local_client(__opts__["conf_file"])
    jid = client.cmd_async(
        minions, "state.apply", arg=["containers"], tgt_type="list",
        kwarg={"queue": True, "pillar": {"containers": stack}},
    )
    return {"stack": stack, "targets": minions, "jid": jid}
