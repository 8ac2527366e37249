"""
The swarm role's rules: who initialises the Swarm, who joins it and how, which stacks get an
overlay network, and what a container of a stack is attached to. Pure: settings, pillar and
the engine's ``Swarm`` facts in, a decision out (the Docker side is ``ccc_swarm_engine``).

Why these rules (``ccc-ansible-behaviour.md`` §1.4 step 8, §3.11, §7 S10/B14): the original
joined nodes with tokens read in the same run, took a lock file in the user's ``~/.containers``
for every overlay (blockable by the user, stale after a crash, not atomic), and let every manager
create overlays, so two managers could make two networks of one name. Here the leader alone
creates overlays (one creator: no duplicates, no lock in user space), tokens come from secrets
the admin copies once, and a node in another swarm is reported, never forced out.
"""

import ccc_pillar
import ccc_roles
import ccc_rules

ROLE = "swarm"
OVERLAY_PREFIX = "overlay-"
# Label of the overlays this role creates (value: the STACK_NAME); only those are ever removed.
OVERLAY_LABEL = "ccc.swarm-overlay"
TOKEN_SECRETS = {True: ("swarm", "manager_token"), False: ("swarm", "worker_token")}
EVENT_OVERLAY_NEEDED = "ccc/swarm/overlay_needed"
# Sent by a node that removed a container of a stack that left pillar: the leader removes the
# stack's overlay now that this node's endpoint is leaving it (not at its next unrelated apply).
EVENT_OVERLAY_RELEASED = "ccc/swarm/overlay_released"
ENCRYPTED_OPTION = "encrypted"
DEFAULT_PORT = 2377


def overlay_name(stack):
    """The overlay network of one STACK_NAME (the original's name, so ``ccc run`` keeps working)."""
    return OVERLAY_PREFIX + stack


def stack_of_overlay(name, labels):
    """The STACK_NAME of an overlay this role made (its label), else ``None``."""
    stack = (labels or {}).get(OVERLAY_LABEL)
    return stack if isinstance(stack, str) and name == overlay_name(stack) else None


def overlay_definition(stack, encrypted=True):
    """The ``create_network`` arguments of a stack's overlay: attachable by standalone
    containers, internal (no way out through it), labelled as ours, and encrypted (IPsec between
    the nodes: a stack's traffic crosses the lab's network, where anyone on it could read it)
    unless ``ccc:swarm:encrypted`` is false (kernels without ESP)."""
    return {"name": overlay_name(stack), "driver": "overlay", "attachable": True, "internal": True,
            "check_duplicate": True, "labels": {OVERLAY_LABEL: stack},
            "options": {ENCRYPTED_OPTION: ""} if encrypted else {}}


# The Portainer agents' overlay (the original's portainer_network_overlay): one network for the
# whole swarm, made by the leader like the stacks' (never by a lock file in user space), labelled
# apart from them so the stacks' prune never touches it.
AGENT_OVERLAY_LABEL = "ccc.swarm-agent-overlay"
# Alias every agent shares on that overlay: AGENT_CLUSTER_ADDR, so each agent finds the others by
# DNS (the original set localhost there: each agent only ever found itself).
AGENT_CLUSTER_ALIAS = "ccc-portainer-agents"


def agent_alias(node):
    """Each agent's own name on the overlay (the original's ``<host>_agent``)."""
    return f"{node}_agent"


def agent_overlay_definition(name, encrypted=True):
    """The ``create_network`` arguments of the agents' overlay: attachable, internal (the agents
    talk to each other only), encrypted like the stacks' unless ``ccc:swarm:encrypted`` is false."""
    return {"name": name, "driver": "overlay", "attachable": True, "internal": True, "check_duplicate": True,
            "labels": {AGENT_OVERLAY_LABEL: "portainer"}, "options": {ENCRYPTED_OPTION: ""} if encrypted else {}}


def is_agent_overlay(network):
    """Whether a network (summary or inspect) is the agents' overlay this role made."""
    return ((network or {}).get("Labels") or {}).get(AGENT_OVERLAY_LABEL) == "portainer" \
        and (network or {}).get("Driver") == "overlay"


def agent_swarm_mode(agent, role_is_on):
    """Whether this node's Portainer agent runs in swarm mode: the agent and its ``swarm`` switch
    on (``ccc:docker:portainer_agent``) and the swarm role on for the node."""
    return bool(role_is_on) and ccc_rules.truthy((agent or {}).get("enabled")) \
        and ccc_rules.truthy((agent or {}).get("swarm"))


def encrypted(settings):
    """``ccc:swarm:encrypted`` (default true): whether the stacks' overlays are made encrypted."""
    return (settings or {}).get("encrypted", True) is not False


def is_encrypted(network):
    """Whether an overlay (a network summary or inspect) was made with the ``encrypted`` option."""
    return ENCRYPTED_OPTION in ((network or {}).get("Options") or {})


def is_leader(settings, node_id):
    return settings.get("leader") == node_id


def _host(address):
    """The host part of ``host``, ``host:port`` or ``[v6]:port``."""
    address = str(address or "").strip()
    if address.startswith("["):
        return address[1:].split("]", 1)[0]
    return address.rsplit(":", 1)[0] if address.count(":") == 1 else address


def join_address(settings):
    """Where other nodes join: ``leader_addr``, with Swarm's port when it names none."""
    address = settings.get("leader_addr")
    if not address:
        return None
    if address.count(":") > 1 and not address.startswith("["):
        return f"[{address}]:{DEFAULT_PORT}"  # a bare IPv6 address
    if address.rsplit(":", 1)[-1].isdigit() and ":" in address:
        return address
    return f"{address}:{DEFAULT_PORT}"


def membership(settings, node_id, swarm):
    """
    What the role does about this node's Swarm membership, from the engine's ``Info.Swarm``
    (``swarm``). Returns ``{"action": "init"|"join"|"none"|"fail", "reason": str}`` (why, in words
    for the admin) plus, for a join, ``"manager"`` (which token) and ``"remote"`` (the address to
    join at).
    A node in a swarm is never made to leave: a different swarm, or one being joined, is reported.
    """
    state = (swarm or {}).get("LocalNodeState") or "inactive"
    leader = is_leader(settings, node_id)
    managers = sorted({_host(m.get("Addr")) for m in (swarm or {}).get("RemoteManagers") or [] if m.get("Addr")})
    if state == "inactive":
        if leader:
            return {"action": "init", "reason": f"{node_id} initialises the swarm (it is ccc:swarm:leader)"}
        if not join_address(settings):
            return {"action": "fail", "reason": "ccc:swarm:leader_addr is not set: the nodes cannot know where to "
                                                f"join the swarm of {settings.get('leader')}"}
        return {"action": "join", "manager": bool(settings.get("manager")), "remote": join_address(settings),
                "reason": f"{node_id} joins the swarm at {join_address(settings)} as a "
                          f"{'manager' if settings.get('manager') else 'worker'}"}
    if state != "active":
        return {"action": "fail", "reason": f"the engine's swarm state is {state!r} (a join under way, or an error:"
                                            " see `docker info`); nothing is changed until it is active or inactive"}
    if leader:
        if not swarm.get("ControlAvailable"):
            return {"action": "fail", "reason": f"{node_id} is ccc:swarm:leader but a worker in a swarm managed by "
                                                f"{', '.join(managers) or 'unknown managers'}; it must be the swarm's "
                                                "manager (leave that swarm by hand: docker swarm leave)"}
        return {"action": "none", "reason": f"{node_id} leads its swarm"}
    expected = _host(settings.get("leader_addr"))
    if expected and managers and expected not in managers:
        return {"action": "fail", "reason": f"{node_id} is in a different swarm (managers {', '.join(managers)}, "
                                            f"not {expected}); it is left as it is: leave that swarm by hand "
                                            "(docker swarm leave), then apply again"}
    note = ""
    if bool(settings.get("manager")) != bool(swarm.get("ControlAvailable")):
        wanted = "manager" if settings.get("manager") else "worker"
        note = (f"; ccc:swarm:manager asks for a {wanted}: {'promote' if settings.get('manager') else 'demote'} it"
                f" on the leader (docker node {'promote' if settings.get('manager') else 'demote'} {node_id})")
    return {"action": "none", "reason": f"{node_id} is in the swarm" + note}


def swarm_nodes(ccc, settings):
    """The nodes whose containers join stack overlays: ``ccc:swarm:nodes``, or every cluster node."""
    return list(settings.get("nodes") or []) or ccc_pillar.cluster_nodes(ccc)


def wanted_stacks(ccc, settings):
    """
    The stacks that need an overlay: every valid, not DISABLED container of the pillar that may
    run on a swarm node (its allowed nodes, since users move their containers within them).
    """
    nodes, index = set(swarm_nodes(ccc, settings)), ccc_pillar.entries_by_stack(ccc)
    stacks = []
    for entry in (ccc or {}).get("containers") or []:
        stack = entry.get("STACK_NAME") if isinstance(entry, dict) else None
        if not ccc_rules.is_stack_name(stack) or stack in stacks:
            continue
        record, problems = ccc_pillar.container_record(ccc, stack, check=False, index=index)
        if not record or ccc_rules.truthy(record.get("DISABLED")):
            continue
        allowed = ccc_pillar.granted(ccc_pillar.user_type_of(ccc, record), record, "nodes")
        if nodes.intersection(allowed):
            stacks.append(stack)
    return stacks


def attachment(stack, node_name, fact):
    """
    The overlay a container of ``stack`` joins on this node, or ``None``: only where the role
    is on and the engine is an active swarm member (``fact``: the engine's swarm facts, read
    once per run). ``creator``: this node is the leader, which creates a missing overlay itself.
    """
    if not (fact or {}).get("active"):
        return None
    return {"stack": stack, "network": overlay_name(stack), "alias": node_name, "creator": bool(fact.get("creator")),
            "encrypted": fact.get("encrypted", True) is not False}


def role_on(ccc):
    """Whether ``ccc:roles`` switches the swarm role on for this node (an invalid switch: off)."""
    try:
        return ccc_roles.switches((ccc or {}).get("roles"))[ROLE] is True
    except ValueError:
        return False


def pending_message(stack):
    """What the user reads while a worker waits for the leader to create the stack's overlay."""
    return (f"The network {overlay_name(stack)} that connects your container's instances on several nodes is being "
            "created; this container joins it within a minute (the others reach it by node name then).")


def services(settings, node_id):
    """
    The services this role runs on a node (``salt-run ccc.status``): none. Swarm mode lives in
    the Docker engine, which the docker role owns; the overlays are networks, not services.
    """
    return []


def overlay_needed(stack, leader, create_on_leader, redeploy):
    """
    The master's answer to ``ccc/swarm/overlay_needed`` (a worker lacks a stack's overlay):
    the leader creates it (``create_on_leader(leader, stack)`` -> its return, raising on
    failure), then the stack is redeployed (``redeploy(stack)``), so the workers attach it.
    ``stack`` comes from minion-supplied event data: checked here.
    """
    if not ccc_rules.is_stack_name(stack):
        return {"stack": stack, "error": "not a STACK_NAME"}
    if not leader:
        return {"stack": stack, "error": "no ccc:swarm:leader in the cached pillar of any minion"}
    try:
        created = create_on_leader(leader, stack)
    except Exception as exc:  # noqa: BLE001 - reported to the caller; the next apply asks again
        return {"stack": stack, "leader": leader, "error": f"the leader could not create {overlay_name(stack)}: {exc}"}
    return {"stack": stack, "leader": leader, "overlay": created, "redeploy": redeploy(stack)}


def overlay_released(stack, leader, prune_on_leader):
    """
    The master's answer to ``ccc/swarm/overlay_released`` (a node removed a container of a stack
    that left pillar): the leader removes the overlays nothing wants any more
    (``prune_on_leader(leader)`` -> its return, raising on failure), waiting the moment the
    node's endpoint needs to leave. ``stack`` comes from minion-supplied event data: checked here.
    """
    if not ccc_rules.is_stack_name(stack):
        return {"stack": stack, "error": "not a STACK_NAME"}
    if not leader:
        return {"stack": stack, "error": "no ccc:swarm:leader in the cached pillar of any minion"}
    try:
        return {"stack": stack, "leader": leader, "overlays": prune_on_leader(leader)}
    except Exception as exc:  # noqa: BLE001 - reported to the caller; the leader's next apply prunes
        return {"stack": stack, "leader": leader, "error": f"the leader could not remove {overlay_name(stack)}: {exc}"}


def leader_of(cccs):
    """``ccc:swarm:leader`` as the minions' cached pillars name it (the first one set, by minion)."""
    for minion in sorted(cccs or {}):
        leader = ((cccs[minion] or {}).get(ROLE) or {}).get("leader")
        if isinstance(leader, str) and leader:
            return leader
    return None


def leader_answer(leader, returns):
    """The leader's return of ``ccc_swarm.overlay_present`` (a ``full_return`` of the master's
    client), or ``RuntimeError`` saying why there is none."""
    answer = (returns or {}).get(leader)
    if not isinstance(answer, dict):
        raise RuntimeError(f"{leader} did not answer")
    if answer.get("retcode"):
        raise RuntimeError(str(answer.get("ret"))[:300])
    return answer.get("ret")
