"""
States of the swarm cluster role (``salt/cluster/swarm/``): the node's swarm membership, the
stacks' overlay networks on the leader, and leaving when the role is ``absent``.

.. code-block:: yaml

    ccc-cluster-swarm-member:
      ccc_swarm.member:
        - settings: {leader: node1, leader_addr: 10.0.0.1, ...}

The settings come from the role's ``map.jinja``; the join tokens are read from secrets by the
execution module (never rendered into SLS). A node in another swarm, or one whose engine is
mid-join, fails with the reason and is left as it is.
"""

from salt.exceptions import CommandExecutionError

import ccc_agent_waiters
import _ccc_state_ret as ccc_state_ret

__virtualname__ = "ccc_swarm"


def __virtual__():
    return __virtualname__


def member(name, settings):
    """This node in the swarm: initialised on the leader, joined elsewhere (see the module docstring)."""
    test = bool(__opts__["test"])
    try:
        done = __salt__["ccc_swarm.member"](settings=settings, test=test)
    except CommandExecutionError as exc:
        return ccc_state_ret.result(name, False, {}, str(exc))
    if not done["changed"]:
        return ccc_state_ret.result(name, True, {}, done["reason"])
    verb = {"init": "swarm initialised", "join": "joined the swarm"}[done["action"]]
    return ccc_state_ret.result(name, None if test else True, {"swarm": verb},
                                ("would: " if test else "") + done["reason"])


def overlays(name, settings):
    """On the leader, the stacks' overlays: created for every stack that may run on a swarm node,
    removed (when unused) for stacks that are gone; elsewhere nothing to do."""
    test = bool(__opts__["test"])
    try:
        done = __salt__["ccc_swarm.overlays"](settings=settings, test=test)
    except CommandExecutionError as exc:
        return ccc_state_ret.result(name, False, {}, str(exc))
    if done["leader"] != __grains__["id"]:
        return ccc_state_ret.result(name, True, {}, f"overlays are created by the swarm leader {done['leader']}")
    changes = {key: done[key] for key in ("created", "removed", "encrypted") if done.get(key)}
    parts = [f"{'would be ' if test else ''}{key}: {', '.join(done[key])}" for key in ("created", "removed") if done[key]]
    if done.get("encrypted"):
        parts.append(f"{'would be ' if test else ''}made again encrypted: {', '.join(done['encrypted'])}")
    if done["in use"]:
        parts.append(f"kept while containers use them: {', '.join(done['in use'])}")
    if done.get("unencrypted"):
        parts.append(f"not encrypted (made before ccc-salt encrypted overlays), made again encrypted once no "
                     f"container uses them: {', '.join(done['unencrypted'])}")
    comment = "stack overlays " + ("; ".join(parts) if parts else "as wanted")
    return ccc_state_ret.result(name, None if (test and changes) else True, changes, comment)


def agent_overlay(name, container, wanted, settings):
    """The Portainer agent on the agents' overlay ``name`` (its swarm mode) or off it: created by
    the swarm leader only; a node that finds it missing says pending (its agent keeps running) and
    is applied again by the master once the leader made it."""
    test = bool(__opts__["test"])
    try:
        done = __salt__["ccc_swarm.agent_overlay"](container=container, network=name, wanted=wanted,
                                                   settings=settings, test=test)
    except CommandExecutionError as exc:
        return ccc_state_ret.result(name, False, {}, str(exc))
    would = "would be " if test else ""
    if not wanted:
        changes = {key: value for key, value in (("detached", container if done["detached"] else None),
                                                 ("overlay", "removed" if done["overlay"] == "removed" else None))
                   if value}
        comment = f"{container} {would + 'detached from' if done['detached'] else 'not on'} {name}"
        comment += {"removed": f"; {name} {would}removed", "in use": f"; {name} kept while other agents use it",
                    "foreign": f"; {name} was not made by ccc-salt: kept"}.get(done["overlay"], "")
        return ccc_state_ret.result(name, None if (test and changes) else True, changes, comment)
    aliases = ", ".join(done["aliases"])
    if done["status"] == "pending":
        return ccc_state_ret.result(name, True, {}, f"{name} pending: it does not exist yet; the swarm leader "
                                                    f"{done['leader']} creates it when its own agent joins it, then "
                                                    f"the master applies this state here again and {container} "
                                                    f"joins it ({ccc_agent_waiters.EVENT_PENDING})")
    if done["status"] == "no container":
        return ccc_state_ret.result(name, False, {}, f"{container} is not running: it cannot join {name}")
    if done["status"] == "attached":
        return ccc_state_ret.result(name, True, {}, f"{container} is on {name} as {aliases}")
    changes = {"attached": container, "aliases": done["aliases"],
               **({"network_created": name} if done["status"] == "created" else {})}
    return ccc_state_ret.result(name, None if test else True, changes,
                                f"{container} {would}attached to {name} as {aliases}"
                                + (" (created it: this node is the swarm leader)" if done["status"] == "created" else ""))


def left(name, settings):
    """The role is ``absent``: leave the swarm (never forced: a manager fails with why)."""
    test = bool(__opts__["test"])
    try:
        done = __salt__["ccc_swarm.leave"](settings=settings, test=test)
    except CommandExecutionError as exc:
        return ccc_state_ret.result(name, False, {}, str(exc))
    changes = {}
    if done["left"]:
        changes["swarm"] = "left"
    if (done["overlays"] or {}).get("removed"):
        changes["overlays_removed"] = done["overlays"]["removed"]
    comment = ("would leave the swarm" if test else "left the swarm") if done["left"] else "this node is in no swarm"
    return ccc_state_ret.result(name, None if (test and changes) else True, changes, comment)
