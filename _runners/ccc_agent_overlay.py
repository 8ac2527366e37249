"""
Master-side wake-up of the Portainer agents waiting for the agents' swarm overlay (runner
``ccc_agent_overlay``, called by ``reactor/swarm_agent_overlay.sls``).

A node whose agent finds the overlay missing reports ``ccc/swarm/agent_overlay/pending``
(``pending``); the swarm leader reports each overlay its agent creates with
``ccc/swarm/agent_overlay/created`` (``created``), and every node waiting then gets one queued
apply of the agent's overlay state. The decisions and the record are ``_utils/ccc_agent_waiters.py``;
this file checks what the events carry, reads the record and publishes.

The node id comes from the event (the minion id the master's request channel verified against the
minion's key); it is checked here as ``ccc.node_start`` checks it: the id pattern, an accepted
key looked up alone, and for ``created`` that the node's own cached pillar names it
``ccc:swarm:leader``.
"""

import logging

import ccc_agent_waiters
import ccc_pillar
import ccc_rules
import ccc_swarm
import salt.client
import salt.key
import salt.utils.master

__virtualname__ = "ccc_agent_overlay"
log = logging.getLogger(__name__)



def __virtual__():
    return __virtualname__


def _accepted(node):
    """Whether ``node`` is an accepted minion key (that key alone is looked up)."""
    return node in (salt.key.get_key(__opts__).list_match([node]).get("minions") or ())


def _checked(node):
    """The reason ``node`` (event data) is not acted on, ``None`` when it may be."""
    if not ccc_rules.is_minion_id(node):
        return "not a minion id"
    if not _accepted(node):
        return "not an accepted minion"
    return None


def _cached_ccc(node):
    """``node``'s own ``ccc`` pillar from the master's cache (nothing compiled, no other minion read)."""
    util = salt.utils.master.MasterPillarUtil(
        [node], "list", use_cached_grains=True, grains_fallback=False,
        use_cached_pillar=True, pillar_fallback=False, opts=__opts__,
    )
    return ccc_pillar.pillar_ccc(util.get_minion_pillar().get(node) or {})


def _apply(nodes):
    """One queued ``state.sls_id`` of the agent's overlay state on each of ``nodes``: ``{node: jid}``."""
    state_id, sls = ccc_agent_waiters.AGENT_STATE
    client = salt.client.get_local_client(__opts__["conf_file"])
    jids = {}
    try:
        for node in nodes:
            try:
                pub = client.run_job([node], "state.sls_id", arg=[state_id, sls], tgt_type="list",
                                     kwarg={"queue": True})
            except Exception as exc:  # noqa: BLE001 - that node's next apply (or report) tries again
                log.warning("ccc: could not apply %s on %s: %s", state_id, node, exc)
                pub = None
            jids[node] = (pub or {}).get("jid")
    finally:
        client.destroy()
    return jids


def pending(node):
    """
    Minion ``node``'s Portainer agent waits for the agents' overlay (event
    ``ccc/swarm/agent_overlay/pending``): it is applied again once the leader reports the overlay,
    or now when the leader reported one since ``node`` was last applied for it.

    CLI Example:

    .. code-block:: bash

        salt-run ccc_agent_overlay.pending gpu2
    """
    problem = _checked(node)
    if problem:
        return {"node": node, "action": None, "error": problem}
    with ccc_agent_waiters.open_record(__opts__["cachedir"]) as holder:
        holder["record"], wake = ccc_agent_waiters.pending(holder["record"], node)
    if not wake:
        return {"node": node, "action": "waiting"}
    return {"node": node, "action": "applied", "jids": _apply([node])}


def created(node):
    """
    The swarm leader ``node`` created the agents' overlay (event
    ``ccc/swarm/agent_overlay/created``): every node waiting for it gets one queued apply of the
    agent's overlay state. A report from any other node than ``ccc:swarm:leader`` (its own cached
    pillar) changes nothing.

    CLI Example:

    .. code-block:: bash

        salt-run ccc_agent_overlay.created gpu1
    """
    problem = _checked(node)
    if problem is None and not ccc_swarm.is_leader((_cached_ccc(node).get("swarm") or {}), node):
        problem = "not the swarm leader"
    if problem:
        return {"node": node, "action": None, "error": problem}
    accepted = set(salt.key.get_key(__opts__).list_status("accepted").get("minions") or ())
    with ccc_agent_waiters.open_record(__opts__["cachedir"]) as holder:
        holder["record"], nodes = ccc_agent_waiters.created(holder["record"], accepted.__contains__)
    return {"node": node, "action": "applied" if nodes else "none waiting", "jids": _apply(nodes)}


def waiting():
    """
    Show the record: how many overlays the leader reported, the nodes waiting, and for which
    report each node was last applied.

    CLI Example:

    .. code-block:: bash

        salt-run ccc_agent_overlay.waiting
    """
    with ccc_agent_waiters.open_record(__opts__["cachedir"]) as holder:
        return holder["record"]
