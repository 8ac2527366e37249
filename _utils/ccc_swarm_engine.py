"""
The swarm role against a Docker engine: the node's Swarm facts, init/join/leave, the stacks'
overlay networks and a container's attachment to its stack's overlay. The rules are
``ccc_swarm``'s; this module only acts, with a ``docker.DockerClient`` and plain data.

Overlays are created by the leader only (``ccc_swarm``), under an ``fcntl`` lock in the node's
root-only state dir, so the leader's own concurrent runs (a cluster apply, a containers run, the
master's request) make one network; a name that exists already counts as made. An overlay is
removed only when it carries this role's label, and only by Docker's own refusal-free path:
a network something is attached to (here or on another node) is refused and kept.

A container another node removed leaves the overlay a moment later (the manager drops its
attachment asynchronously), so a removal Docker refuses while no container of this node is
attached is retried for up to ``RELEASE_WAIT`` seconds: the overlay goes as soon as the last
endpoint has left, not at some later apply. Overlays are made encrypted; an older unencrypted one
of a wanted stack is made again, encrypted, once nothing uses it (``encrypt``).
"""

import contextlib
import fcntl
import os
import time

import ccc_engine
import ccc_secrets
import ccc_swarm

LOCK_NAME = "swarm-overlays.lock"
# How long the leader waits for other nodes' endpoints to leave an overlay it removes, and how
# often it asks Docker again meanwhile.
RELEASE_WAIT = 30.0
RELEASE_POLL = 0.5


def swarm_info(client):
    """The engine's ``Info.Swarm`` (``LocalNodeState``, ``ControlAvailable``, ``RemoteManagers``...)."""
    return client.api.info().get("Swarm") or {}


def engine_fact(client, settings, node_id):
    """
    What a containers run needs to know, read once per run: ``{"active", "creator"}`` (creator:
    this node is ``ccc:swarm:leader``, which creates missing overlays). An engine
    that does not answer is no swarm for this run (its containers fail on their own).
    """
    try:
        swarm = swarm_info(client)
    except Exception as exc:  # noqa: BLE001 - the deploy reports the engine; the overlay just waits
        return {"active": False, "creator": False, "error": str(exc)}
    return {"active": swarm.get("LocalNodeState") == "active", "creator": ccc_swarm.is_leader(settings, node_id),
            "encrypted": ccc_swarm.encrypted(settings)}


def init(client, settings):
    """``docker swarm init`` with the node's advertise and listen addresses; returns the node id."""
    return client.swarm.init(advertise_addr=settings.get("advertise_addr") or None,
                             listen_addr=settings.get("listen_addr") or "0.0.0.0:2377")


def join(client, settings, remote, token):
    """``docker swarm join``; an error never carries the token (``ccc_secrets.mask``)."""
    try:
        return client.swarm.join(remote_addrs=[remote], join_token=token,
                                 listen_addr=settings.get("listen_addr") or "0.0.0.0:2377",
                                 advertise_addr=settings.get("advertise_addr") or None)
    except ccc_engine.docker.errors.APIError as exc:
        raise RuntimeError(ccc_secrets.mask(f"joining the swarm at {remote} failed: {exc.explanation or exc}",
                                            [token])) from None


def leave(client):
    """``docker swarm leave`` without force (Docker refuses when a manager would break quorum)."""
    client.swarm.leave(force=False)


@contextlib.contextmanager
def _creation_lock(state_dir):
    os.makedirs(state_dir, mode=0o700, exist_ok=True)
    with open(os.path.join(state_dir, LOCK_NAME), "a", encoding="utf-8") as handle:
        os.fchmod(handle.fileno(), 0o600)
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def find_overlay(client, stack):
    """The network named ``overlay-<stack>`` (summary), ``None`` when there is none here."""
    return find_network(client, ccc_swarm.overlay_name(stack))


def ours(client):
    """The overlays this role created that this engine sees: ``{stack: network summary}``."""
    found = {}
    for net in client.api.networks(filters={"label": ccc_swarm.OVERLAY_LABEL}):
        stack = ccc_swarm.stack_of_overlay(net.get("Name"), net.get("Labels"))
        if stack and net.get("Driver") == "overlay":
            found[stack] = net
    return found


def find_network(client, name):
    """The network named ``name`` (summary), ``None`` when this engine sees none."""
    return next((net for net in client.api.networks(names=[name]) if net.get("Name") == name), None)


def ensure_overlay(client, stack, state_dir, test=False, encrypted=True):
    """Create the stack's overlay unless it exists; ``"present"``, ``"created"`` (or would be)."""
    return ensure_network(client, ccc_swarm.overlay_definition(stack, encrypted), state_dir, test=test)


def ensure_network(client, definition, state_dir, test=False):
    """Create the overlay ``definition`` (``create_network`` arguments) unless a network of its
    name exists, under the leader's creation lock; ``"present"``, ``"created"`` (or would be)."""
    if find_network(client, definition["name"]) is not None:
        return "present"
    if test:
        return "created"
    with _creation_lock(state_dir):
        if find_network(client, definition["name"]) is not None:
            return "present"
        try:
            client.api.create_network(**definition)
        except ccc_engine.docker.errors.APIError as exc:
            if "already exists" in str(exc.explanation or exc):
                return "present"
            raise
    return "created"


def _attached_here(client, net):
    """Whether a container of this node is attached to ``net`` (then it really is in use)."""
    try:
        return bool(client.api.inspect_network(net["Id"]).get("Containers"))
    except ccc_engine.docker.errors.NotFound:
        return False


def remove_overlay(client, stack, test=False, wait=RELEASE_WAIT, clock=time.monotonic, sleep=time.sleep):
    """Remove the stack's overlay if it is ours and nothing uses it: ``"removed"`` (or would be),
    ``"in use"`` (Docker refused: attached here, or on another node for longer than ``wait``
    seconds), ``"absent"``, ``"foreign"``."""
    net = find_overlay(client, stack)
    if net is None:
        return "absent"
    if ccc_swarm.stack_of_overlay(net.get("Name"), net.get("Labels")) != stack:
        return "foreign"
    return remove_network(client, net, test=test, wait=wait, clock=clock, sleep=sleep)


def remove_network(client, net, test=False, wait=RELEASE_WAIT, clock=time.monotonic, sleep=time.sleep):
    """Remove the network ``net`` (summary) unless something uses it, waiting up to ``wait``
    seconds for other nodes' endpoints that are leaving: ``"removed"``, ``"in use"``, ``"absent"``."""
    if test:
        return "removed"
    deadline = clock() + wait
    while True:
        try:
            client.api.remove_network(net["Id"])
            return "removed"
        except ccc_engine.docker.errors.NotFound:
            return "absent"
        except ccc_engine.docker.errors.APIError:
            if _attached_here(client, net) or clock() >= deadline:
                return "in use"
        sleep(RELEASE_POLL)


def encrypt(client, stack, state_dir, test=False):
    """
    The stack's overlay made again with encryption when it exists without (made by an older
    ccc-salt or by hand under our label): ``"encrypted"`` (nothing to do), ``"recreated"`` (or
    would be) once nothing uses it, ``"in use"`` (kept unencrypted until its endpoints are gone;
    containers keep their connections), ``"absent"``.
    """
    net = find_overlay(client, stack)
    if net is None:
        return "absent"
    if ccc_swarm.stack_of_overlay(net.get("Name"), net.get("Labels")) != stack:
        return "foreign"
    if ccc_swarm.is_encrypted(net):
        return "encrypted"
    if test:
        return "recreated"
    status = remove_overlay(client, stack, wait=0)
    if status == "in use":
        return "in use"
    ensure_overlay(client, stack, state_dir, encrypted=True)
    return "recreated"


def _aliases(attrs, network):
    endpoint = ((attrs.get("NetworkSettings") or {}).get("Networks") or {}).get(network) or {}
    return endpoint.get("Aliases") or []


def attach(client, container, overlay, state_dir):
    """
    Attach ``container`` to its stack's overlay with the node name as alias (``overlay``:
    ``ccc_swarm.attachment``; or any overlay with its ``aliases`` and the ``definition`` the
    leader creates it from, as the Portainer agents' is). Returns ``"attached"`` (already), ``"connected"``, ``"created"``
    (the leader made the overlay first) or ``"pending"`` (no overlay yet on a node that does not
    create them). Docker errors other than a missing network are raised.
    """
    network, aliases = overlay["network"], overlay.get("aliases") or [overlay["alias"]]
    attrs = ccc_engine.inspect(client, container) or {}
    if network in ccc_engine.attached_networks(attrs):
        if set(aliases) <= set(_aliases(attrs, network)):
            return "attached"
        client.api.disconnect_container_from_network(container, network)
    try:
        client.api.connect_container_to_network(container, network, aliases=aliases)
        return "connected"
    except ccc_engine.docker.errors.APIError as exc:
        if not _no_such_network(exc):
            raise
        if not overlay["creator"]:
            return "pending"
    ensure_network(client, overlay.get("definition") or
                   ccc_swarm.overlay_definition(overlay["stack"], overlay.get("encrypted", True)), state_dir)
    client.api.connect_container_to_network(container, network, aliases=aliases)
    return "created"


def _no_such_network(exc):
    """Docker's answer for a network that does not exist: a 404 on a manager, a 500 carrying the
    manager's gRPC ``NotFound`` on a worker."""
    return isinstance(exc, ccc_engine.docker.errors.NotFound) or "not found" in str(exc.explanation or exc)


def join_overlay(client, resolution, state_dir, changes):
    """
    The swarm step of a deploy, once the container runs its spec: attach it to its stack's
    overlay (``resolution["overlay"]``, ``None`` where this node has no active swarm role).
    Records what it did in ``changes``; returns ``{"user", "admin", "needed", "failed"}``: a
    sentence for the user's report and one for the admin's comment (or ``None``), whether the
    leader must be asked for the overlay (``ccc_swarm.EVENT_OVERLAY_NEEDED``), whether it failed.
    """
    overlay, done = resolution.get("overlay"), {"user": None, "admin": None, "needed": False, "failed": False}
    if overlay is None:
        return done
    try:
        status = attach(client, resolution["stack"], overlay, state_dir)
    except ccc_engine.docker.errors.APIError as exc:
        return dict(done, failed=True, admin=f"could not join {overlay['network']}: {exc.explanation or exc}")
    if status in ("connected", "created"):
        changes["overlay"] = {"network": overlay["network"], "alias": overlay["alias"],
                              **({"network_created": True} if status == "created" else {})}
    if status == "pending":
        return dict(done, needed=True, user=ccc_swarm.pending_message(resolution["stack"]),
                    admin=f"{overlay['network']} pending: it does not exist yet, the swarm leader is asked to "
                          f"create it ({ccc_swarm.EVENT_OVERLAY_NEEDED})")
    return done


def would_join(resolution, attrs):
    """Test mode: the overlay the container would join (``None`` when it is on it already or has none)."""
    overlay = resolution.get("overlay")
    if overlay is None or (attrs and overlay["network"] in ccc_engine.attached_networks(attrs)
                           and overlay["alias"] in _aliases(attrs, overlay["network"])):
        return None
    return {"network": overlay["network"], "alias": overlay["alias"]}


def prune(client, wanted, test=False):
    """
    On the leader: remove this role's overlays whose stack is no longer ``wanted``
    (``ccc_swarm.wanted_stacks``) and that nothing uses. Returns ``{"removed": [...], "in use": [...]}``
    (networks; in use: Docker refused, a container here or on another node is still attached).
    """
    done = {"removed": [], "in use": []}
    for stack in sorted(set(ours(client)) - set(wanted)):
        status = remove_overlay(client, stack, test=test)
        if status in done:
            done[status].append(ccc_swarm.overlay_name(stack))
    return done



def agent_detached(client, container, name, leader, test=False):
    """
    The Portainer agent's swarm mode switched off on this node: ``container`` leaves the agents'
    overlay ``name``; on the leader the overlay is then removed if it is ours and no other
    node's agent still uses it. Returns ``{"detached": bool, "overlay": status}`` (status of
    ``remove_network``, ``"kept"`` off the leader, ``"foreign"`` when not ours).
    """
    attrs = ccc_engine.inspect(client, container) or {}
    detached = name in ccc_engine.attached_networks(attrs)
    if detached and not test:
        client.api.disconnect_container_from_network(container, name)
    net = find_network(client, name)
    if not leader or net is None:
        return {"detached": detached, "overlay": "kept" if net is not None else "absent"}
    if not ccc_swarm.is_agent_overlay(net):
        return {"detached": detached, "overlay": "foreign"}
    return {"detached": detached, "overlay": remove_network(client, net, test=test)}
