"""
Master-side ccc-salt helpers (runner ``ccc``), used by the reactor, the master's schedule and admins.

Redeploys (``redeploy``, ``flush``, ``reconcile_node``): a settings edit is applied on every node
where its container may run, coalesced per stack and rate-limited per user; the decisions and the
record are ``_utils/ccc_redeploy.py``, this file publishes and reads jobs. ``pillar_watch`` brings
admins' pillar edits to the nodes (``ccc_pillar_watch``). ``status`` asks the nodes which services
of their cluster roles run (``ccc_cluster.services``, judged by ``ccc_service_health``).

The reactor passes what the events carry as they are; the checks are here (``redeploy``,
``reconcile_node``), with the shared rules of ``_utils`` (``ccc_rules``, ``ccc_pillar``).
"""

import contextlib
import fcntl
import json
import logging
import os
import time

import ccc_active_users
import ccc_pillar
import ccc_pillar_watch
import ccc_redeploy
import ccc_redeploy_index
import ccc_rules
import ccc_safefs
import ccc_service_health
import ccc_stack_overview
import ccc_swarm
import salt.client
import salt.key
import salt.utils.master

__virtualname__ = "ccc"
log = logging.getLogger(__name__)

# A minion id the runner acts on (ids come from minion-supplied event data).
MINION_ID_PATTERN = ccc_rules.MINION_ID_PATTERN
# The decisions live in ccc_redeploy; these names stay here for callers and tests of the runner.
REDEPLOY_DEFAULTS = ccc_redeploy.REDEPLOY_DEFAULTS
VERSION_MEMORY = ccc_redeploy.VERSION_MEMORY
_targets_for = ccc_redeploy.targets_for
_user_for = ccc_redeploy.user_for
_limits = ccc_redeploy.limits_from
_decide = ccc_redeploy.decide
_notice_for = ccc_redeploy.notice_for


def __virtual__():
    return __virtualname__


def _cached_cccs():
    """Every known minion's ``ccc`` pillar from the master's cache (no pillar is compiled)."""
    util = salt.utils.master.MasterPillarUtil(
        "*", "glob", use_cached_grains=True, grains_fallback=False,
        use_cached_pillar=True, pillar_fallback=False, opts=__opts__,
    )
    return {minion: ccc_pillar.pillar_ccc(pillar) for minion, pillar in util.get_minion_pillar().items()}


def targets(stack):
    """
    Show the minions a settings edit of ``stack`` is applied on.

    CLI Example:

    .. code-block:: bash

        salt-run ccc.targets ana-main
    """
    return _Master().placement(stack)[0]


class _Master:
    """Lazy access to the master's pillar cache, job cache, keys and publisher (each only when needed)."""

    def __init__(self):
        self._cccs = None
        self._client = None
        self._placements = {}

    def cccs(self):
        if self._cccs is None:
            self._cccs = _cached_cccs()
        return self._cccs

    def placement(self, stack):
        """``(targets, user)`` of ``stack``: from the pillar watch's index (one small file), or,
        when the index cannot be trusted for it, from every minion's cached pillar."""
        if stack not in self._placements:
            found = ccc_redeploy_index.lookup(ccc_redeploy_index.folder(__opts__["cachedir"]), stack,
                                              ccc_redeploy_index.keys_stamp(__opts__.get("pki_dir")))
            self._placements[stack] = found or ccc_redeploy.placement_from(self.cccs(), stack)
        return self._placements[stack]

    def client(self):
        if self._client is None:
            self._client = salt.client.get_local_client(__opts__["conf_file"])
        return self._client

    def time(self):
        """The clock when asked: an apply counts against the rate limit from when it went out."""
        return time.time()

    def returns(self, jid):
        """The returns of ``jid`` in the master's job cache, by minion."""
        return self.client().get_cache_returns(jid)

    def find_job(self, minions, jid):
        return (self.client().run_job(minions, "saltutil.find_job", arg=[jid], tgt_type="list") or {}).get("jid")

    def publish(self, stack, minions, notice):
        """Publish the apply of ``stack`` on ``minions``: the fast redeploy where they hold a
        current pillar in memory, else a ``state.apply`` that compiles it (``ccc_redeploy.job``)."""
        fun, arg, kwarg = ccc_redeploy.job(stack, notice, self.pillar_current(minions))
        try:
            pub = self.client().run_job(minions, fun, arg=arg, tgt_type="list", kwarg=kwarg)
        except Exception as exc:  # noqa: BLE001 - the stack stays pending; the next flush retries
            log.warning("ccc: could not publish the redeploy of %s: %s", stack, exc)
            pub = None
        return (pub or {}).get("jid"), sorted((pub or {}).get("minions") or minions)

    def pillar_current(self, minions):
        """Whether ``minions`` hold the current pillar in memory (``ccc_pillar_watch.holds_current``:
        the pillar files as the watch last saw them, no refresh under way)."""
        roots = ccc_pillar_watch.watched_roots(__opts__)
        files = None if roots is None else ccc_pillar_watch.file_map(roots)
        return ccc_pillar_watch.holds_current(_read_json(_watch_record_path()), files, minions, self.time())

    def accepted(self, minion):
        """Whether ``minion`` is an accepted minion key (that key alone is looked up)."""
        return minion in (salt.key.get_key(__opts__).list_match([minion]).get("minions") or ())

    def reconcile(self, minion, sync=False):
        """Publish a full, queued ``state.apply containers`` on ``minion`` (``sync``: the custom
        modules synced first, ``sync_mods=all``); its jid, None on failure."""
        kwarg = {"queue": True, "sync_mods": "all"} if sync else {"queue": True}
        try:
            pub = self.client().run_job([minion], "state.apply", arg=["containers"], tgt_type="list",
                                        kwarg=kwarg)
        except Exception as exc:  # noqa: BLE001 - the node stays pending; the next flush retries
            log.warning("ccc: could not publish the reconcile of %s: %s", minion, exc)
            pub = None
        return (pub or {}).get("jid")


@contextlib.contextmanager
def _locked_record():
    """The redeploy record, locked, with the clock read once it is ours: another runner may have
    held it a while, and a decision must not be made with the time from before the wait."""
    with ccc_redeploy.open_record(__opts__["cachedir"]) as record:
        yield record, time.time()


def redeploy(stack, version=None):
    """
    Apply ``containers`` limited to ``stack`` on every minion where it may run: now, or (a job
    for the stack still queued or running, or its user over the rate limit) by ``ccc.flush``
    later. Applies are queued behind a running state job, never failing because one runs. An
    event that only joins a pending or running apply reads no minion's pillar
    (``ccc_redeploy.request``).
    ``version``: the settings file version the ``ccc_settings`` beacon reported; one that a job
    published since covers is not applied again (``"action": "covered"``).

    CLI Example:

    .. code-block:: bash

        salt-run ccc.redeploy ana-main
    """
    if not ccc_rules.is_stack_name(stack):
        return {"stack": stack, "targets": [], "error": "not a STACK_NAME"}
    master, limits = _Master(), _limits(__opts__)
    with _locked_record() as (record, now):
        result = ccc_redeploy.request(record, stack, version, now, limits, master)
        ccc_redeploy.prune(record, now, limits)
    return result


def flush():
    """
    Apply the pending stacks whose job has ended and whose user is within the rate limit (the
    master's schedule runs this every few seconds; see ``scripts/master_config.py``).

    CLI Example:

    .. code-block:: bash

        salt-run ccc.flush
    """
    master, limits = _Master(), _limits(__opts__)
    with _locked_record() as (record, now):
        actions = {stack: ccc_redeploy.advance(record, stack, now, limits, master)["action"] for stack in sorted(record["stacks"])}
        for minion in sorted(record["nodes"]):
            actions[f"node:{minion}"] = ccc_redeploy.advance_node(record, minion, now, limits, master)["action"]
        ccc_redeploy.prune(record, now, limits)
    return actions


def reconcile_node(node):
    """
    Apply ``containers`` in full on minion ``node``, queued: now, or (a full reconcile of that
    node still queued or running) by ``ccc.flush`` once it has returned. The reactor calls this
    when the node's Docker engine restarted (``ccc_docker`` beacon): its containers may have
    stopped, and after a reboot only Salt can pin their bind sources again. ``node`` must be an
    accepted minion key (looked up alone: no other minion is read).

    CLI Example:

    .. code-block:: bash

        salt-run ccc.reconcile_node node1
    """
    return _request_node(node, sync=False)


def node_start(node):
    """
    Minion ``node`` (re)started (``salt/minion/<id>/start``; ``reactor/minion_start.sls`` passes
    the id only when the tag's and the data's agree): sync its custom modules and apply
    ``containers`` in full, queued, in one job (edits made while it was down are applied now).
    Coalesced and rate-limited with the node's other full reconciles (``reconcile_node``), so a
    minion that restarts in a loop does not get a job per start. ``node`` must be an accepted
    minion key.

    CLI Example:

    .. code-block:: bash

        salt-run ccc.node_start node1
    """
    return _request_node(node, sync=True)


def _request_node(node, sync):
    """A full reconcile of ``node`` requested (``sync``: modules first): checked, then coalesced."""
    if not isinstance(node, str) or not MINION_ID_PATTERN.fullmatch(node):
        return {"node": node, "action": None, "error": "not a minion id"}
    master = _Master()
    if not master.accepted(node):
        return {"node": node, "action": None, "error": "not an accepted minion"}
    limits = _limits(__opts__)
    with _locked_record() as (record, now):
        entry = record["nodes"].setdefault(node, {})
        entry["pending"] = True
        if sync:
            entry["sync"] = True
        return ccc_redeploy.advance_node(record, node, now, limits, master)


def pillar_watch(force=False):
    """
    Bring admins' pillar edits to the nodes concerned: when the pillar source files changed
    (or ``force``), compile the pillar of each minion the change can concern (those whose last
    compile read a changed file; every minion for a new file, a top file or a file no compile
    read), and on each minion whose ``ccc`` pillar differs from the one this watch last saw,
    refresh the minion's in-memory pillar (so its settings beacon watches the files of
    containers added for it) and reconcile its containers in full (``reconcile_node``,
    coalesced). It keeps the redeploy index (``ccc_redeploy_index``: where each stack's edits
    go) up to date from the same compiles. The master's schedule runs this every few seconds
    (``scripts/master_config.py``); it compiles nothing while the files stay the same, except on
    masters with external pillars, where every run compiles every minion (``ccc_pillar_watch``).
    One watch runs at a time; a run that finds another running returns ``"busy": True``.

    CLI Example:

    .. code-block:: bash

        salt-run ccc.pillar_watch force=True
    """
    root = os.path.join(__opts__["cachedir"], "ccc-redeploy")
    os.makedirs(root, mode=0o700, exist_ok=True)
    with open(os.path.join(root, "watch.lock"), "a", encoding="utf-8") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return {"compiled": False, "refreshed": [], "busy": True}
        return _pillar_watch(bool(force))


def _pillar_watch(force):
    """One run of ``pillar_watch``, under its lock."""
    path = _watch_record_path()
    seen = _read_json(path)
    roots = ccc_pillar_watch.watched_roots(__opts__)  # None: an external pillar no file tells about
    files = None if roots is None else ccc_pillar_watch.file_map(roots)
    index = ccc_redeploy_index.folder(__opts__["cachedir"])
    stamp = ccc_redeploy_index.keys_stamp(__opts__["pki_dir"])  # before the keys are listed
    accepted = salt.key.get_key(__opts__).list_status("accepted").get("minions") or []
    whole = ccc_redeploy_index.usable(index)
    targets, changed = ccc_pillar_watch.plan(seen, files, accepted, force, whole)
    fingerprint = None if files is None else ccc_pillar_watch.map_fingerprint(files)
    if not targets and not changed and whole and ccc_redeploy_index.recorded_stamp(index) == stamp:
        return {"compiled": False, "refreshed": []}
    recorded = seen.get("digests") if isinstance(seen.get("digests"), dict) else {}
    compiled, broken, cccs, reads = ccc_pillar_watch.compile_pillars(__opts__, targets)
    digests = {minion: compiled.get(minion, recorded.get(minion)) for minion in accepted
               if minion in compiled or minion in recorded}
    _update_index(index, cccs, broken, accepted, stamp, every=set(targets) >= set(accepted))
    concerned = ccc_pillar_watch.concerned(recorded, digests, changed=changed and "fingerprint" in seen)
    if broken & set(concerned):
        # A refresh would swap the minion's last good pillar for a broken one; its digest is
        # recorded, so the fix (another digest) refreshes it.
        log.warning("ccc: pillar of %s has render errors: not refreshed until it renders again",
                    ", ".join(sorted(broken & set(concerned))))
        concerned = [minion for minion in concerned if minion not in broken]
    # A first run (a new master cache) cannot know which pillar the minions hold in memory: it
    # asks the others to refresh too (no reconcile), so that redeploys may then trust it.
    unknown = sorted(set(compiled) - set(concerned) - broken) if "fingerprint" not in seen else []
    asked = _refresh(concerned, unknown)
    old_reads = seen.get("reads") if isinstance(seen.get("reads"), dict) else {}
    reads = {minion: reads.get(minion, old_reads.get(minion)) for minion in accepted
             if minion in reads or (minion not in compiled and minion in old_reads)}
    refreshed = ccc_pillar_watch.refreshes_kept(seen.get("refreshed"), asked, accepted, time.time())
    watched = {"fingerprint": fingerprint, "digests": digests, "files": files, "reads": reads, "refreshed": refreshed}
    ccc_safefs.replace_file(path, json.dumps(watched).encode("utf-8"), 0o600, root=__opts__["cachedir"])
    if concerned:
        log.info("ccc: pillar changed for %s: pillar refreshed, containers reconciled", ", ".join(concerned))
    return {"compiled": True, "minions_compiled": len(compiled), "refreshed": concerned}


def _refresh(concerned, unknown):
    """Ask the ``concerned`` minions to refresh their pillar and reconcile them, and the
    ``unknown`` ones to refresh; returns when each was asked (None: the ask failed)."""
    master, asked = _Master(), {}
    for minion in [*concerned, *unknown]:
        try:
            master.client().run_job([minion], "saltutil.refresh_pillar", tgt_type="list")
            asked[minion] = time.time()
        except Exception as exc:  # noqa: BLE001 - a reconcile still compiles fresh pillar
            log.warning("ccc: could not ask %s to refresh its pillar: %s", minion, exc)
            asked[minion] = None  # its redeploys compile their pillar until an ask succeeds
        if minion in concerned:
            reconcile_node(minion)
    return asked


def _watch_record_path():
    """The pillar watch's record: what it last saw and did (``ccc_pillar_watch``)."""
    return os.path.join(__opts__["cachedir"], "ccc-pillar-watch.json")


def _update_index(index, cccs, broken, accepted, stamp, every):
    """Fold the compiled minions' placements into the redeploy index and drop the minions no
    longer accepted. A broken pillar keeps the minion's last summary (the minion keeps its last
    good pillar: it is not refreshed). A failure leaves the index distrusted (redeploys read the
    pillar cache) and is logged: the watch still refreshes the nodes concerned."""
    try:
        known = ccc_redeploy_index.known_minions(index)
        summaries = {}
        for minion, ccc in cccs.items():
            kept = ccc_redeploy_index.summary_of(index, minion) if minion in broken and minion in known else None
            summaries[minion] = kept if kept is not None else ccc_redeploy_index.summary(ccc, minion)
        ccc_redeploy_index.write(index, summaries, known - set(accepted), stamp, every=every)
    except (OSError, ValueError) as exc:
        log.warning("ccc: the redeploy index could not be written (redeploys read every pillar): %s", exc)


def _read_json(path):
    """A JSON object from ``path``; ``{}`` when missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def redeploy_status():
    """
    Show the redeploy record: jobs in flight, pending stacks, recent applies per user, limits.

    CLI Example:

    .. code-block:: bash

        salt-run ccc.redeploy_status
    """
    with ccc_redeploy.open_record(__opts__["cachedir"]) as record:
        return dict(record, limits=_limits(__opts__))


def _ask(tgt, tgt_type, timeout, fun="ccc_cluster.services"):
    """Publish ``fun`` and gather the returns until every targeted minion has
    answered or ``timeout`` s have passed: ``(returns, expected minions)``."""
    client = salt.client.get_local_client(__opts__["conf_file"])
    try:
        pub = client.run_job(tgt, fun, tgt_type=tgt_type, timeout=timeout, listen=True)
        if not pub or not pub.get("jid"):
            return {}, list((pub or {}).get("minions") or ())
        expected, returns = set(pub.get("minions") or ()), {}
        deadline = time.monotonic() + timeout
        for answer in client.get_iter_returns(pub["jid"], expected, timeout=timeout, tgt=tgt,
                                              tgt_type=tgt_type, block=False):
            returns.update(answer or {})
            if expected <= set(returns) or time.monotonic() > deadline:
                break
            if not answer:
                time.sleep(0.05)
        return returns, sorted(expected)
    finally:
        client.destroy()


def status(tgt="*", tgt_type="glob", timeout=30):
    """
    Which services of their cluster roles the nodes run and which are unhealthy: asks the
    targeted minions (``ccc_cluster.services``), waiting at most ``timeout`` s. ``health`` lists
    the problems first (service, reason; nodes that could not tell or did not answer), then the
    healthy nodes; ``nodes`` has every service's state. Then the compute containers
    (``ccc_docker.overview``, ``ccc_stack_overview``): ``containers`` one line per node and
    stack, problems first; ``stacks`` the same as data. Exits non-zero when anything is not ok.

    CLI Example:

    .. code-block:: bash

        salt-run ccc.status
        salt-run ccc.status 'gpu*' timeout=10
    """
    started = time.monotonic()
    returns, expected = _ask(tgt, tgt_type, float(timeout))
    result = ccc_service_health.report(*ccc_service_health.sort_returns(returns, expected))
    left = max(1.0, float(timeout) - (time.monotonic() - started))
    returns, expected = _ask(tgt, tgt_type, left, "ccc_docker.overview")
    result = ccc_stack_overview.merge(result, *ccc_service_health.sort_returns(returns, expected))
    __context__["retcode"] = result["retcode"]
    return result


def swarm_overlay(stack):
    """
    A node lacks the swarm overlay of ``stack`` (event ``ccc/swarm/overlay_needed``): the leader
    creates it, then the stack is redeployed (``redeploy``) so its containers join it. The rules
    are ``ccc_swarm.overlay_needed``.

    CLI Example:

    .. code-block:: bash

        salt-run ccc.swarm_overlay ana-main
    """
    master = _Master()

    def on_leader(leader, name):
        returns = master.client().cmd(leader, "ccc_swarm.overlay_present", arg=[name], timeout=60, full_return=True)
        return ccc_swarm.leader_answer(leader, returns)

    return ccc_swarm.overlay_needed(stack, ccc_swarm.leader_of(master.cccs()), on_leader, redeploy)


def swarm_overlay_released(stack):
    """
    A node removed a container of ``stack``, which left pillar (event
    ``ccc/swarm/overlay_released``): the leader removes the stack's overlay now that the node's
    endpoint is leaving it (``ccc_swarm.overlays``, which waits for it), not at its next apply.
    The rules are ``ccc_swarm.overlay_released``.

    CLI Example:

    .. code-block:: bash

        salt-run ccc.swarm_overlay_released ana-old
    """
    master = _Master()

    def prune_on_leader(leader):
        returns = master.client().cmd(leader, "ccc_swarm.overlays", arg=[], timeout=120, full_return=True)
        return ccc_swarm.leader_answer(leader, returns)

    return ccc_swarm.overlay_released(stack, ccc_swarm.leader_of(master.cccs()), prune_on_leader)


def active_users(tgt="*", tgt_type="glob", timeout=30):
    """
    Who has live SSH sessions in which container: asks the targeted nodes
    (``ccc_usage.active_sessions``, read from the hosts' connection tables) and lists user,
    stack, node and sessions (``ccc_active_users``); ``nodes`` says which nodes could not tell.
    Exits non-zero when a node could not.

    CLI Example:

    .. code-block:: bash

        salt-run ccc.active_users
        salt-run ccc.active_users 'gpu*' --out=json
    """
    client = salt.client.get_local_client(__opts__["conf_file"])
    try:
        returns = client.cmd(tgt, "ccc_usage.active_sessions", tgt_type=tgt_type, timeout=float(timeout),
                             full_return=True)
    finally:
        client.destroy()
    result = ccc_active_users.report(returns)
    __context__["retcode"] = result["retcode"]
    return result
