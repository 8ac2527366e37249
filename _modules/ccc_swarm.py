"""
Execution module ``ccc_swarm``: this node's Docker Swarm membership and the stacks' overlay
networks, for the swarm cluster role (``_states/ccc_swarm.py``), the master's overlay requests
(runner ``ccc.swarm_overlay``) and admins. Rules in ``_utils/ccc_swarm.py``, the engine side in
``_utils/ccc_swarm_engine.py``; this module reads pillar, grains and secrets.

Every function takes the role's ``settings`` (``ccc_cluster.role_settings swarm``, which it
reads itself when none are passed). Join tokens are read here from
``ccc:secrets:swarm:{manager_token,worker_token}`` and never returned or logged.
"""

import logging

from salt.exceptions import CommandExecutionError

import ccc_agent_waiters
import ccc_engine
import ccc_pillar
import ccc_role_settings
import ccc_secrets
import ccc_swarm
import ccc_swarm_engine

__virtualname__ = "ccc_swarm"
log = logging.getLogger(__name__)


def __virtual__():
    if ccc_engine.docker is None:
        return False, "ccc_swarm needs the docker Python SDK (salt-pip install docker)"
    return __virtualname__


def _settings(settings):
    settings = ccc_role_settings.read("swarm", __pillar__, __salt__["cp.get_file_str"]) if settings is None else ccc_pillar.plain(settings)
    errors = ccc_role_settings.problems("swarm", settings, __salt__["cp.get_file_str"])
    if errors:
        raise CommandExecutionError("; ".join(errors))
    return settings


def _node():
    return ccc_pillar.node_settings(ccc_pillar.pillar_ccc(__pillar__), __grains__["id"])


def status(settings=None):
    """
    This node's swarm state and what the role would do about it: ``{"state", "manager",
    "managers", "action", "reason"}``.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_swarm.status
    """
    settings = _settings(settings)
    with ccc_engine.session(_node(), CommandExecutionError) as client:
        swarm = ccc_swarm_engine.swarm_info(client)
    decision = ccc_swarm.membership(settings, __grains__["id"], swarm)
    return {"state": swarm.get("LocalNodeState"), "manager": bool(swarm.get("ControlAvailable")),
            "managers": [m.get("Addr") for m in swarm.get("RemoteManagers") or []],
            "action": decision["action"], "reason": decision["reason"]}


def member(settings=None, test=False):
    """
    Make this node a member of the swarm: init on the leader, join elsewhere (token from
    secrets), nothing for a member; never leave or force. Returns ``{"action", "reason",
    "changed"}``; raises ``CommandExecutionError`` when the node cannot be made a member.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_swarm.member test=True
    """
    settings = _settings(settings)
    with ccc_engine.session(_node(), CommandExecutionError) as client:
        decision = ccc_swarm.membership(settings, __grains__["id"], ccc_swarm_engine.swarm_info(client))
        if decision["action"] == "fail":
            raise CommandExecutionError(decision["reason"])
        if decision["action"] == "join":
            token = _token(decision["manager"])  # also in test mode: a missing token fails there too
            if not test:
                try:
                    ccc_swarm_engine.join(client, settings, decision["remote"], token)
                except RuntimeError as exc:
                    raise CommandExecutionError(str(exc)) from None
        elif decision["action"] == "init" and not test:
            ccc_swarm_engine.init(client, settings)
    return {"action": decision["action"], "reason": decision["reason"], "changed": decision["action"] != "none"}


def _token(manager):
    path = ccc_swarm.TOKEN_SECRETS[bool(manager)]
    try:
        return ccc_secrets.lookup({"ccc": ccc_pillar.pillar_ccc(__pillar__)}, *path)
    except (ccc_secrets.MissingSecret, ccc_secrets.InvalidSecret) as exc:
        raise CommandExecutionError(
            f"{exc}; on the leader, `docker swarm join-token -q {path[1].split('_')[0]}` prints it: put it into "
            f"{ccc_secrets.key_name(*path)} (docs/roles.md, swarm)") from None


def overlays(settings=None, test=False):
    """
    On the leader: an (encrypted) overlay for every stack that may run on a swarm node, and this
    role's overlays of stacks gone (or DISABLED) removed once nothing uses them (waiting a little
    for other nodes' endpoints that are leaving). An unencrypted overlay of a wanted stack is made
    again, encrypted, once nothing uses it. Elsewhere nothing. Returns ``{"created", "removed",
    "in use", "encrypted", "unencrypted", "leader"}`` (encrypted: made again with encryption;
    unencrypted: still without, in use).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_swarm.overlays test=True
    """
    settings = _settings(settings)
    done = {"created": [], "removed": [], "in use": [], "encrypted": [], "unencrypted": [], "leader": settings["leader"]}
    if not ccc_swarm.is_leader(settings, __grains__["id"]):
        return done
    wanted = ccc_swarm.wanted_stacks(ccc_pillar.pillar_ccc(__pillar__), settings)
    state_dir = _node()["state_dir"]
    with ccc_engine.session(_node(), CommandExecutionError) as client:
        if ccc_swarm_engine.swarm_info(client).get("LocalNodeState") != "active":
            if test:
                done["created"] = [ccc_swarm.overlay_name(stack) for stack in wanted]
                return done  # the swarm is initialised first in a real run
            raise CommandExecutionError("this node is not in an active swarm: no overlays can be made")
        encrypted = ccc_swarm.encrypted(settings)
        for stack in wanted:
            if ccc_swarm_engine.ensure_overlay(client, stack, state_dir, test=test, encrypted=encrypted) == "created":
                done["created"].append(ccc_swarm.overlay_name(stack))
                continue
            if not encrypted:
                continue
            status = ccc_swarm_engine.encrypt(client, stack, state_dir, test=test)
            if status in ("recreated", "in use"):
                done["encrypted" if status == "recreated" else "unencrypted"].append(ccc_swarm.overlay_name(stack))
        done.update(ccc_swarm_engine.prune(client, wanted, test=test))
    return done


def overlay_present(stack, settings=None):
    """
    On the leader: the overlay of ``stack`` (created when missing; the master asks when a worker
    lacks it). Returns ``"present"`` or ``"created"``.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_swarm.overlay_present ana-main
    """
    settings = _settings(settings)
    if not ccc_swarm.is_leader(settings, __grains__["id"]):
        raise CommandExecutionError(f"only the swarm leader ({settings['leader']}) creates overlays")
    if stack not in ccc_swarm.wanted_stacks(ccc_pillar.pillar_ccc(__pillar__), settings):
        raise CommandExecutionError(f"{stack!r} is no active stack of the pillar that may run on a swarm node")
    with ccc_engine.session(_node(), CommandExecutionError) as client:
        return ccc_swarm_engine.ensure_overlay(client, stack, _node()["state_dir"], encrypted=ccc_swarm.encrypted(settings))


def agent_overlay(container, network, wanted, settings=None, test=False):
    """
    The Portainer agent ``container`` on the agents' overlay ``network`` (its swarm mode,
    ``ccc:docker:portainer_agent:swarm``), with its aliases ``<node>_agent`` and the agents'
    shared one: attached when ``wanted`` (the leader creates the overlay when missing and tells the
    master; elsewhere ``"pending"``, told to the master, which applies this node's agent state
    again once the leader's agent made it: ``ccc_agent_waiters``), else detached, and on the leader
    the overlay removed once no agent uses it. Returns ``{"status", "network", "aliases", "leader"}``
    (status: attached, connected, created, pending, detached, absent; ``overlay``: what became of
    the network when detached).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_swarm.agent_overlay portainer-agent portainer-agent-network True test=True
    """
    settings = _settings(settings)
    leader = ccc_swarm.is_leader(settings, __grains__["id"])
    aliases = [ccc_swarm.agent_alias(__grains__["id"]), ccc_swarm.AGENT_CLUSTER_ALIAS]
    done = {"network": network, "aliases": aliases, "leader": settings["leader"]}
    state_dir = _node()["state_dir"]
    with ccc_engine.session(_node(), CommandExecutionError) as client:
        if not wanted:
            return dict(done, **ccc_swarm_engine.agent_detached(client, container, network, leader, test=test))
        if ccc_swarm_engine.swarm_info(client).get("LocalNodeState") != "active":
            if test:
                return dict(done, status="connected")  # the swarm is joined first in a real run
            raise CommandExecutionError("this node is not in an active swarm: its Portainer agent cannot join "
                                        f"{network} (the swarm role's state says why)")
        attrs = ccc_engine.inspect(client, container)
        if attrs is None:
            return dict(done, status="connected" if test else "no container")
        overlay = {"network": network, "aliases": aliases, "alias": aliases[0], "creator": leader,
                   "definition": ccc_swarm.agent_overlay_definition(network, ccc_swarm.encrypted(settings))}
        if test:
            joining = ccc_swarm_engine.would_join({"overlay": overlay}, attrs)
            return dict(done, status="connected" if joining else "attached")
        try:
            status = ccc_swarm_engine.attach(client, container, overlay, state_dir)
        except ccc_engine.docker.errors.APIError as exc:
            raise CommandExecutionError(f"{container} could not join {network}: {exc.explanation or exc}") from None
    if status in ("created", "pending"):
        _tell_master(ccc_agent_waiters.EVENT_CREATED if status == "created" else ccc_agent_waiters.EVENT_PENDING)
    return dict(done, status=status)


def _tell_master(tag):
    """The agent's overlay was made here (the leader) or is missing (another node): tell the master,
    which applies the waiting nodes' agent state once the leader made it. Masterless: nothing listens."""
    if __opts__.get("file_client") == "local":
        return
    try:
        __salt__["event.send"](tag, {})
    except Exception as exc:  # noqa: BLE001 - the node's next apply reports again
        log.warning("could not send %s: %s", tag, exc)


def leave(settings=None, test=False):
    """
    Leave the swarm (the role is ``absent``): the leader first removes this role's unused
    overlays. A manager is never forced out (Docker refuses a manager's plain leave: a forced one
    can break the swarm's quorum); demote it first. Returns ``{"left", "overlays"}``: ``left`` is
    false when the node was in no swarm.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_swarm.leave test=True
    """
    settings = ccc_role_settings.read("swarm", __pillar__, __salt__["cp.get_file_str"]) if settings is None else ccc_pillar.plain(settings)
    with ccc_engine.session(_node(), CommandExecutionError) as client:
        swarm = ccc_swarm_engine.swarm_info(client)
        if swarm.get("LocalNodeState") == "inactive":
            return {"left": False, "overlays": {}}
        pruned = ccc_swarm_engine.prune(client, [], test=test) if swarm.get("ControlAvailable") else {}
        if swarm.get("ControlAvailable"):
            raise CommandExecutionError(
                "this node is a swarm manager and is not made to leave: `docker swarm leave --force` could cost the "
                "swarm its quorum (or end it, on the last manager). Demote it on another manager (docker node demote "
                f"{__grains__['id']}) and apply again, or end the swarm by hand. Overlays removed: "
                f"{', '.join(pruned.get('removed') or []) or 'none'}")
        if not test:
            ccc_swarm_engine.leave(client)
    return {"left": True, "overlays": pruned}
