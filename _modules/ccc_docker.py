"""
Execution module ``ccc_docker``: this node's ccc-salt containers, from the command line and for
the ``ccc_container`` states. The work is done by plain modules in ``_utils/`` (``ccc_plan``
reads and resolves, ``ccc_deploy``/``ccc_apply`` act, ``ccc_engine`` talks to Docker); this
module reads pillar and grains, acts on what an apply asks of the master, and turns a Docker
engine that does not answer into a ``CommandExecutionError``. Every function returns data, what
was found and what was (or with ``test=True`` would be) done, or raises
``CommandExecutionError``; the ``ccc_container`` states word the data as results and comments:

* ``deploy``/``deploy_many`` return each container's facts (``ccc_apply.Applied`` as a dict:
  ``action``, ``reason``, ``done``, ``changes``, ``notes``, ``problem``, ...; ``deploy_many``: one
  per STACK_NAME); a container that cannot be applied has a ``problem``, never an exception;
* ``remove`` returns the containers it removed (or would);
* query functions (``plan``, ``managed``, ``overview``) return data;
* node functions (``remove_orphans``, ``private_mounts``) return what
  changed (or would), and raise ``CommandExecutionError`` when they cannot act at all.
"""

import contextlib
import dataclasses
import datetime
import logging
import time

from salt.exceptions import CommandExecutionError

import ccc_deploy
import ccc_engine
import ccc_mounts
import ccc_node_lock
import ccc_node_record
import ccc_orphans
import ccc_pillar
import ccc_plan
import ccc_private_mounts
import ccc_rules
import ccc_secrets
import ccc_stack_overview
import ccc_swarm
import ccc_swarm_engine

log = logging.getLogger(__name__)

__virtualname__ = "ccc_docker"


def __virtual__():
    if ccc_engine.docker is None:
        return False, "ccc_docker needs the docker Python SDK (salt-pip install docker)"
    return __virtualname__


def _ccc():
    return ccc_pillar.pillar_ccc(__pillar__)


def _node(ccc):
    return ccc_pillar.node_settings(ccc, __grains__["id"])


def _clients(node):
    """This run's Docker clients for the node (one per thread), kept for the run."""
    return ccc_engine.context_clients(__context__, node)


def _locked(test):
    """The node's container lock while acting (``ccc_node_lock``: the fast redeploy is no state
    run, so Salt's state queue does not keep it apart from one); a test run only looks."""
    return contextlib.nullcontext() if test else ccc_node_lock.held(__opts__["cachedir"])


def _split(names):
    if names is None:
        return None
    return [str(name).strip() for name in (names.split(",") if isinstance(names, str) else names) if str(name).strip()]


def plan(name, pull=False):
    """
    Resolve one container for this node, secrets masked: what would run here and why, as data
    (read-only unless ``pull``: then missing images are pulled and GitHub keys fetched).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.plan box1
    """
    ccc = _ccc()
    return ccc_plan.display(ccc, __grains__["id"], name, _clients(_node(ccc)), pull=pull)


def deploy_many(names=None, test=False):
    """
    Deploy (or remove, where they do not belong) several containers on this node, planned once
    and applied ``ccc:node:create_parallelism`` at a time where Docker has work (``ccc_deploy``);
    ``names``: STACK_NAMEs (a list or comma-separated), default every container of the pillar
    selection (``containers``/``users`` filters). Returns ``{STACK_NAME: facts}`` (``ccc_apply.Applied`` as a dict). Asks the
    master for what the facts request: a redeploy where another node keeps an old copy
    (``announce``), the stack's overlay (``overlay_needed``), a recheck at the end of a move
    window (``recheck_move``, dropped on ``move_done``).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.deploy_many box1,box2 test=True
    """
    stacks = _split(names)
    with _locked(test):
        return _deploy_many(stacks, test, ccc_pillar.plain(__pillar__.get("ccc_notice")))


def _deploy_many(stacks, test, notices):
    """``deploy_many`` once the node's lock is held (``stacks`` None: the pillar selection)."""
    ccc = _ccc()
    node = _node(ccc)
    if stacks is None:
        stacks = ccc_pillar.select(ccc, __pillar__.get("containers"), __pillar__.get("users"))["selected"]
    try:
        workers = ccc_deploy.parallelism(node)
    except ValueError as exc:
        raise CommandExecutionError(str(exc)) from exc
    clients = _clients(node)
    inputs = ccc_plan.read_inputs(ccc, __grains__["id"], clients, pull=not test, notices=notices)
    try:
        applied = ccc_deploy.deploy(inputs, stacks, clients, test=test, workers=workers)
    finally:
        clients.close()  # the pool's threads are gone: their clients too
    for stack, facts in applied.items():
        if facts.announce:
            _announce(stack)
        if facts.overlay_needed:
            _send(ccc_swarm.EVENT_OVERLAY_NEEDED, stack)
        if facts.recheck_move is not None:
            _recheck_move(stack, facts.recheck_move)
        if facts.move_done:
            _recheck_move(stack, None)
    if (inputs.swarm or {}).get("creator") and inputs.swarm.get("active"):
        _prune_overlays(ccc, node, test)
    return {stack: dataclasses.asdict(facts) for stack, facts in applied.items()}


def _prune_overlays(ccc, node, test):
    """The swarm leader (callers check): overlays of stacks gone from pillar (or DISABLED) go once
    unused. Logged: the swarm role's state reports the same pruning to the admin."""
    try:
        pruned = ccc_swarm_engine.prune(_clients(node)(), ccc_swarm.wanted_stacks(ccc, ccc.get("swarm") or {}), test)
    except Exception as exc:  # noqa: BLE001 - the next run (or the swarm role) prunes again
        log.warning("could not prune the stacks' swarm overlays: %s", exc)
        return
    if pruned["removed"] or pruned["in use"]:
        log.info("swarm overlays %s: %s; still in use: %s", "that would be removed" if test else "removed",
                 pruned["removed"], pruned["in use"])


def _send(tag, stack):
    """Tell the master about ``stack`` (``tag``); masterless, nothing listens."""
    try:
        __salt__["event.send"](tag, {"stack": stack})
    except Exception as exc:  # noqa: BLE001 - the next apply asks again
        log.warning("could not send %s for %s: %s", tag, stack, exc)


def _announce(stack):
    """Another node keeps an old copy for a move: tell the master, which redeploys the stack
    there (it removes the copy now that this node runs it). Masterless: nothing listens."""
    try:
        __salt__["event.send"](f"ccc/moved/{stack}", {"stack": stack})
    except Exception as exc:  # noqa: BLE001 - a lost announcement only delays the removal
        log.warning("could not announce that %s runs here: %s", stack, exc)


def _recheck_move(stack, seconds):
    """
    This node keeps a copy of ``stack`` for a move: once its move window
    (``ccc:cluster:moves:max_window``) ends, ask the master to apply the stack again
    (``ccc/moved/<STACK>``, as a node that starts it does), so the copy goes even if the new
    node never reports. A one-shot entry of this minion's schedule, replaced on every keep (a
    restarted minion reconciles every container, which schedules it again); ``seconds`` None:
    the copy went, forget it. Masterless: nothing listens, nothing is scheduled.
    """
    if __opts__.get("file_client") == "local":
        return
    name = f"ccc-move-window-{stack}"
    try:
        __salt__["schedule.delete"](name, persist=False)
        if seconds is None:
            return
        when = datetime.datetime.now() + datetime.timedelta(seconds=max(0.0, float(seconds)) + 1)
        added = __salt__["schedule.add"](
            name, function="event.send", job_args=[f"ccc/moved/{stack}"], job_kwargs={"data": {"stack": stack}},
            once=when.strftime("%Y-%m-%dT%H:%M:%S"), return_job=False, persist=False)
    except Exception as exc:  # noqa: BLE001 - the next apply of the stack schedules it again
        log.warning("could not schedule the end of the move window of %s: %s", stack, exc)
        return
    if not (added or {}).get("result"):
        log.warning("could not schedule the end of the move window of %s: %s", stack, (added or {}).get("comment"))


def redeploy(name, notice=None):
    """
    Apply one container after its user's edit, with the pillar this minion holds in memory: the
    master's fast path for a settings edit (``ccc.redeploy``), which it takes only while that
    pillar is known to be current (``ccc_pillar_watch.holds_current``); otherwise it sends a
    ``state.apply containers`` limited to the stack. No pillar compile and no SLS render, which
    were most of an edit's second. It does for the stack what that state run does: the container
    (``deploy_many``) and the node's private data mounts; the networks, accounting and orphans
    stay with the full reconcile. It waits while a state run changes containers (the node's
    lock). ``notice``: the master's word to the user (the rate limit), as a state run's
    ``ccc_notice``. Refuses, changing nothing, while the in-memory pillar has render errors (as
    a state run does). Returns ``{"stack", "success", "facts", "private_mounts", "started",
    "deploy_started"}`` (epoch seconds: the job's start, and the deploy's once the lock was
    held); ``success`` False (the container or the mounts failed) makes the job's exit code 1.

    CLI Example:

    .. code-block:: bash

        salt node1 ccc_docker.redeploy box1
    """
    started = time.time()
    if __pillar__.get("_errors"):
        raise CommandExecutionError(f"{name} was not redeployed: this node's pillar has render errors")
    if name not in ccc_pillar.select(_ccc(), name)["selected"]:
        raise CommandExecutionError(f"{name} was not redeployed: no container of that name in this node's pillar")
    notices = {name: notice} if isinstance(notice, str) and notice else None
    with _locked(False):
        deploy_started = time.time()
        facts = _deploy_many([name], False, notices)[name]
        try:
            mounts = _private_mounts(False)
        except (CommandExecutionError, OSError) as exc:
            mounts = {"problem": str(exc)}
    return {"stack": name, "success": not (facts["problem"] or mounts.get("problem")), "facts": facts,
            "private_mounts": mounts, "started": started, "deploy_started": deploy_started}


def deploy(name, test=False):
    """
    Deploy (or remove, when it does not belong here) one container on this node; returns its
    facts (``deploy_many``).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.deploy box1 test=True
    """
    return deploy_many([name], test=test)[name]


def managed():
    """
    List the ccc-salt containers on this node with their state.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.managed
    """
    node = _node(_ccc())
    with ccc_engine.answering(node["docker_url"], CommandExecutionError):
        found = ccc_node_record.managed_containers(_clients(node)())
    return {stack: summary.get("State") for stack, summary in found.items()}


def overview():
    """
    The compute containers ccc-salt manages on this node for ``salt-run ccc.status``: state,
    image, GPUs, uptime, the last deploy result and problem told to the user, and the problem now
    (``ccc_stack_overview``). Reads only; masks the node's secrets in what it shows.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.overview
    """
    ccc = _ccc()
    node = _node(ccc)
    with ccc_engine.answering(node["docker_url"], CommandExecutionError):
        return ccc_stack_overview.gather(_clients(node)(), ccc, __grains__["id"],
                                         ccc_secrets.values({"ccc": ccc}))


def remove(name, test=False):
    """
    Remove the ccc-salt container ``name`` from this node (never its data), and the leftovers
    of an interrupted recreate of it. Returns ``{"removed": [container names]}`` (would be, with
    ``test=True``; empty when none is here); refuses, raising ``CommandExecutionError``, when a
    container of that name is not one ccc-salt manages.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.remove box1 test=True
    """
    node = _node(_ccc())
    client = _clients(node)()
    with _locked(test), ccc_engine.answering(node["docker_url"], CommandExecutionError):
        attrs = ccc_engine.inspect(client, name)
        if attrs is not None and not ccc_node_record.is_managed(client, attrs):
            raise CommandExecutionError(
                f"a container named {name!r} exists but is not managed by ccc-salt; not touching it")
        found = [each for each in (attrs, *(ccc_engine.inspect(client, other) for other in ccc_node_record.swap_names(name)))
                 if each is not None and ccc_node_record.is_managed(client, each)]
        if not test:
            for each in found:
                ccc_engine.stop_and_remove(client, each)
    return {"removed": [ccc_node_record.name(each) for each in found]}


def remove_orphans(test=False):
    """
    Remove ccc-salt containers whose STACK_NAME is gone from pillar, within the guard of
    ``ccc_orphans.refusal`` (share ``ccc:cluster:orphans:max_share``; run-time pillar
    ``ccc_force_orphans`` lifts it; pillar render errors always refuse). Returns
    ``{"orphans", "managed", "refused"}``.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.remove_orphans test=True
    """
    ccc = _ccc()
    node = _node(ccc)
    known = {entry.get("STACK_NAME") for entry in ccc.get("containers") or [] if isinstance(entry, dict)}
    max_share = (ccc_pillar.cluster_settings(ccc).get("orphans") or {}).get("max_share")
    with _locked(test), ccc_engine.answering(node["docker_url"], CommandExecutionError):
        removed = ccc_orphans.remove(_clients(node)(), known, test=test, max_share=max_share,
                                     force=ccc_rules.truthy(__pillar__.get("ccc_force_orphans")),
                                     pillar_errors=__pillar__.get("_errors"))
    if removed.get("orphans") and removed.get("refused") is None and ccc_swarm.role_on(ccc):
        if ccc_swarm.is_leader(ccc.get("swarm") or {}, __grains__["id"]):
            _prune_overlays(ccc, node, test)  # their overlays, now that nothing of them is here
        elif not test:
            for stack in removed["orphans"]:  # the leader removes the overlay as this endpoint leaves
                _send(ccc_swarm.EVENT_OVERLAY_RELEASED, stack)
    return removed


def private_mounts(test=False):
    """
    Reconcile the live private data mounts of the users with containers on this node; returns
    the changes (``mounted``, ``unmounted``, ``released``, ``refused``).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.private_mounts test=True
    """
    with _locked(test):
        return _private_mounts(test)


def _private_mounts(test):
    """``private_mounts`` once the node's lock is held."""
    ccc = _ccc()
    node = _node(ccc)
    cluster = ccc_pillar.cluster_settings(ccc)
    client = _clients(node)()
    with ccc_engine.answering(node["docker_url"], CommandExecutionError):
        containers = ccc_node_record.managed_containers(client)
        running = [stack for stack, summary in containers.items() if summary.get("State") == "running"]
        return ccc_private_mounts.reconcile(client, cluster, node["binds_dir"], containers,
                                            ccc_mounts.wanted_private_mounts(ccc, running),
                                            ccc_pillar.file_owner(cluster), test=test)
