"""
Redeploys on the master, decided here and driven by the ``ccc`` runner (``_runners/ccc.py``).

A settings edit must be applied on every node where its container may run: the node it leaves
removes it and the node it moves to starts it. Which nodes those are follows from pillar
(``ccc_pillar.allowed_nodes``); the master reads it from the redeploy index the pillar watch
keeps (``ccc_redeploy_index``: one small file per stack), or when the index cannot be trusted
for the stack, from its cache of every minion's pillar: reacting costs no pillar compilation,
and with the index no more on a master of 500 minions than of 10.

Edits are coalesced per stack, so saving often cannot grow the nodes' state queues: while a
stack's job is queued or running, further edits only mark the stack pending, and ``ccc.flush``
(run every few seconds by the master's schedule, see ``scripts/master_config.py``) applies it
once that job has returned from every minion that still has it (or timed out). A per-user rate limit
bounds the redeploys of users who save very often: every apply published counts, also one
that changes nothing (a touched file); a held-back apply tells the user why in
``<STACK>.deploy``. An event is coalesced from the record before the pillar cache is read
(``request``), so a flood costs the master the same per event whatever the number of minions.
The record is one JSON file under the master's cachedir, read and changed only under an fcntl
lock: reactor worker threads and the schedule run these concurrently, and per-user counts span
stacks. Full reconciles of a node (``advance_node``: its Docker engine restarted, the minion
started, its pillar changed) are coalesced and rate-limited the same way, per node.

Every node where a stack may run watches its (shared) settings file, so one save is reported by
each of them, with the same file ``version`` (``_beacons/ccc_settings.py``). A version that a job
published since already covers is not applied again (``VERSION_MEMORY``): the others' reports
would each cost a full apply on every target, queued in front of the user's next save.

No Salt here: the clock (``now``) and the master (``master``: ``placement(stack)``, ``returns(jid)``,
``find_job(minions, jid)``, ``publish(stack, minions, notice)``, ``reconcile(minion, sync)``) are
arguments, so coalescing and the rate limit are tested with a fake clock and a fake master.
"""

import contextlib
import fcntl
import json
import os
import re

import ccc_pillar
import ccc_safefs

# Master config ``ccc_redeploy`` overrides these: at most ``max_applies`` applies per user per
# ``window`` seconds; a job not returned by all its minions after ``job_timeout`` s counts as ended.
REDEPLOY_DEFAULTS = {"max_applies": 6, "window": 60, "job_timeout": 300}
NOTICE_LIMIT = 300
# A minion that has not returned a job PROBE_AFTER s after its publish is asked whether it still
# runs or queues it (saltutil.find_job, which sees the 3008 state queue; asked asynchronously, the
# answers are read PROBE_WAIT s later). One that does not answer (down) or no longer has the job
# (it restarted, say) will not return it and counts as done; a minion that starts reconciles all
# of its containers anyway.
PROBE_AFTER = 10
PROBE_WAIT = 2
# s a reported settings file version is remembered as applied (a node that sees the edit only by
# its stat poll, on another NFS client, reports it up to ccc:cluster:beacon:poll_interval later),
# and how many versions per stack.
VERSION_MEMORY = 600
VERSIONS_KEPT = 8
# The minions' function of the fast redeploy (``_modules/ccc_docker.py``); the job-return reactor
# (``reactor/job_returned.sls``) flushes on its returns as on those of ``state.apply``.
FAST_FUN = "ccc_docker.redeploy"


def targets_for(cccs, stack):
    """The minions on which ``stack`` may run, from a map minion id -> its ``ccc`` pillar."""
    return [minion_id for minion_id, ccc in sorted((cccs or {}).items())
            if ccc_pillar.node_settings(ccc, minion_id)["name"] in ccc_pillar.allowed_nodes(ccc, stack)]


def user_for(cccs, stack):
    """The USER_EMAIL of ``stack`` in the first pillar of ``cccs`` (by minion id) that gives one
    (``None`` when none does); ``placement_from`` asks the targets' pillars."""
    for _, ccc in sorted((cccs or {}).items()):
        record, _ = ccc_pillar.container_record(ccc, stack, check=False)
        if record and record.get("USER_EMAIL"):
            return str(record["USER_EMAIL"])
    return None


def placement_from(cccs, stack):
    """``(targets, user)`` of ``stack`` computed from every minion's ``ccc`` pillar: the minions
    ``targets_for`` names and the user their pillars give (``ccc_redeploy_index`` keeps the same
    answer on disk, so that a redeploy need not read every pillar)."""
    minions = targets_for(cccs, stack)
    return minions, user_for({minion: cccs[minion] for minion in minions}, stack)


def limits_from(opts):
    """The redeploy limits: master config ``ccc_redeploy`` over ``REDEPLOY_DEFAULTS`` (bad values ignored)."""
    given = (opts or {}).get("ccc_redeploy")
    limits = dict(REDEPLOY_DEFAULTS)
    for key in limits:
        value = given.get(key) if isinstance(given, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            limits[key] = value
    return limits


def decide(entry, applies, done, now, limits):
    """
    The next step for one stack; pure (record, clock and job returns are arguments) so that
    coalescing and the rate limit are tested with a fake clock.

    ``entry`` is the stack's record (``jid``, ``targets``, ``started``, ``pending``,
    ``held_since``), ``applies`` the times of its user's applies (all stacks), ``done`` the
    minions that returned ``entry["jid"]`` or will not. Returns ``(action, entry)``, a new entry:
    ``wait`` (a job is queued or running; an edit stays pending), ``hold`` (over the user's rate
    limit), ``apply`` (publish now) or ``idle`` (nothing in flight or pending: forget the stack).
    """
    entry = dict(entry or {})
    if entry.get("jid"):
        finished = set(entry.get("targets") or ()) <= set(done or ())
        if not finished and now - (entry.get("started") or 0) < limits["job_timeout"]:
            return "wait", entry
        entry.update(jid=None, targets=[], started=None)
        for key in ("probe", "probed", "gone"):
            entry.pop(key, None)
    if not entry.get("pending"):
        return "idle", entry
    recent = [when for when in applies or () if now - when < limits["window"]]
    if len(recent) >= limits["max_applies"]:
        if entry.get("held_since") is None:
            entry["held_since"] = now
        return "hold", entry
    return "apply", entry


def notice_for(entry, now, limits):
    """What the user reads in ``<STACK>.deploy`` when an apply was held back by the rate limit."""
    if entry.get("held_since") is None:
        return None
    waited = max(0, round(now - entry["held_since"]))
    text = (f"Saved often: redeploys are limited to {limits['max_applies']} per {limits['window']} s per user, "
            f"so this one waited {waited} s; it applies the settings saved last.")
    return text[:NOTICE_LIMIT]


@contextlib.contextmanager
def open_record(cachedir):
    """The redeploy record ``{"stacks": {stack: entry}, "users": {email: [apply times]},
    "nodes": {minion: entry}, "versions": {stack: [[version, published]]}}`` (``nodes``: full
    reconciles, see ``advance_node``; ``versions``: the settings file versions jobs covered), locked;
    written back (atomically, ``ccc_safefs.replace_file``) when changed, also when the caller failed
    half-way (a pending mark must not be lost). An unreadable record starts over: the worst is one
    extra apply."""
    root = os.path.join(cachedir, "ccc-redeploy")
    os.makedirs(root, mode=0o700, exist_ok=True)
    path = os.path.join(root, "record.json")
    with open(os.path.join(root, "lock"), "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(path, encoding="utf-8") as handle:
                record = json.load(handle)
        except (OSError, ValueError):
            record = {}
        if not isinstance(record, dict):
            record = {}
        for key in ("stacks", "users", "nodes", "versions"):
            record[key] = record.get(key) if isinstance(record.get(key), dict) else {}
        before = json.dumps(record, sort_keys=True)
        try:
            yield record
        finally:
            after = json.dumps(record, sort_keys=True)
            if after != before:
                ccc_safefs.replace_file(path, after.encode("utf-8"), 0o600, root=cachedir)


def gone(entry, returned, now, master):
    """The targets that will not return the entry's job (see ``PROBE_AFTER``); sends and reads probes."""
    probe = entry.pop("probe", None)
    if probe and now - probe["sent"] < PROBE_WAIT:
        entry["probe"] = probe
    elif probe and probe.get("jid"):
        answers = master.returns(probe["jid"])
        working = {minion for minion, data in answers.items() if isinstance(data, dict) and data.get("ret")}
        entry["gone"] = sorted(set(entry.get("gone") or ()) | (set(probe["minions"]) - working))
    missing = sorted(set(entry.get("targets") or ()) - set(returned) - set(entry.get("gone") or ()))
    last = max(entry.get("started") or 0, entry.get("probed") or 0)
    if missing and "probe" not in entry and now - last >= PROBE_AFTER:
        entry["probe"] = {"jid": master.find_job(missing, entry["jid"]), "sent": now, "minions": missing}
        entry["probed"] = now
    return set(entry.get("gone") or ())


def request(record, stack, version, now, limits, master):
    """
    A settings event for ``stack`` (``version``: the file version reported): coalesced from the
    record alone first, so that an event while the stack's job is queued or running, or while its
    user is held by the rate limit (what a flood of events mostly is), costs the same on a master
    of 10 minions or 500. Only an event that may publish asks where the stack goes
    (``master.placement``: the index, or the pillar cache): for its targets and user when the
    record does not know the stack, and for the targets to publish to.
    A job's return (the job-return reactor's ``flush``) publishes what waits behind it.
    """
    if covered(record, stack, version):
        return {"stack": stack, "action": "covered", "targets": [], "jid": None}
    entry = record["stacks"].get(stack)
    if entry is None:
        minions, user = master.placement(stack)
        if not minions:
            return {"stack": stack, "targets": [], "jid": None}
        entry = record["stacks"][stack] = {"user": user}
    entry["pending"] = True
    if is_file_version(version):  # the latest reported; a report without one (or with no version) keeps it
        entry["version"] = version
    if entry.get("jid"):
        return {"stack": stack, "action": "wait", "targets": entry.get("targets") or [], "jid": entry["jid"]}
    return advance(record, stack, now, limits, master)


def advance(record, stack, now, limits, master):
    """Decide for ``stack`` and act on it (publish, forget); returns what happened. Every apply
    published counts against the user's rate limit, also one that turns out to change nothing
    (touching an unchanged file is a new version: uncounted, it would be an unlimited flood)."""
    entry, done = dict(record["stacks"].get(stack) or {}), set()
    user = entry.get("user") or f"stack:{stack}"
    if entry.get("jid"):
        returns = master.returns(entry["jid"])
        done = set(returns) | gone(entry, returns, now, master)
    action, entry = decide(entry, record["users"].get(user), done, now, limits)
    applies = record["users"].setdefault(user, [])
    result = {"stack": stack, "action": action, "targets": entry.get("targets") or [], "jid": entry.get("jid")}
    if action == "apply":
        minions, _ = master.placement(stack)
        if minions:
            notice = notice_for(entry, now, limits)
            jid, minions = master.publish(stack, minions, notice)
            applies.append(master.time())  # when it went out: a slow publish must not make it look older
            entry.update(jid=jid or None, targets=minions, started=now, pending=not jid, held_since=None)
            if jid and entry.get("version"):  # the job reads the file as it is now: this version or later
                record["versions"][stack] = (record["versions"].get(stack) or [])[1 - VERSIONS_KEPT:] + [
                    [entry.pop("version"), now]]
            result.update(targets=minions, jid=jid, notice=notice)
        else:
            action = result["action"] = "idle"
    if action == "idle":
        record["stacks"].pop(stack, None)
    else:
        record["stacks"][stack] = entry
    return result


def advance_node(record, minion, now, limits, master):
    """
    Decide for the full reconcile of ``minion`` and act on it: at most one such job queued or
    running per node; a request meanwhile stays pending and ``flush`` publishes it once that job
    has returned (or will not, see ``gone``). The node's reconciles share the rate limit of a
    user (``node:<minion>`` in the record's ``users``): a minion restarting in a loop, or an
    engine that keeps restarting, gets ``max_applies`` per ``window``. ``sync`` in the entry (a
    minion start) syncs the custom modules first, in the same job.
    """
    entry, done = dict(record["nodes"].get(minion) or {}), set()
    if entry.get("jid"):
        returns = master.returns(entry["jid"])
        done = set(returns) | gone(entry, returns, now, master)
    action, entry = decide(entry, record["users"].get(f"node:{minion}"), done, now, limits)
    if action == "apply":
        jid = master.reconcile(minion, sync=bool(entry.get("sync")))
        if jid:
            record["users"].setdefault(f"node:{minion}", []).append(master.time())
            entry.pop("sync", None)
        entry.update(jid=jid or None, targets=[minion], started=now, pending=not jid, held_since=None)
    if action == "idle":
        record["nodes"].pop(minion, None)
    else:
        record["nodes"][minion] = entry
    return {"node": minion, "action": action, "jid": entry.get("jid")}


def prune(record, now, limits):
    """Forget applies outside the rate-limit window and versions older than ``VERSION_MEMORY``."""
    keep_items(record["users"], lambda when: isinstance(when, (int, float)) and now - when < limits["window"])
    keep_items(record["versions"], lambda item: is_version(item) and now - item[1] < VERSION_MEMORY)


def keep_items(lists, keep):
    """Keep the items of each list of ``lists`` that pass ``keep``; drop the lists left empty."""
    for name, items in list(lists.items()):
        kept = [item for item in items if keep(item)]
        if kept:
            lists[name] = kept
        else:
            del lists[name]


# A settings file version as the beacon reports it (``_beacons/_ccc_settings_watcher.version``:
# "<mtime_ns>:<ctime_ns>:<size>:<inode>", a beacon before the ctime "<mtime_ns>:<size>:<inode>", or
# "deleted"); tests/property/test_event_properties.py checks that every version the watcher can
# make matches. Event data is minion-supplied: anything else is no version (the event is coalesced
# as one without), so the record stays bounded.
FILE_VERSION = re.compile(r"(-?[0-9]{1,20}:){2,3}[0-9]{1,20}|deleted")


def is_file_version(value):
    """Whether ``value`` (event data) is a settings file version (``FILE_VERSION``)."""
    return isinstance(value, str) and FILE_VERSION.fullmatch(value) is not None


def is_version(item):
    """A ``[version, published]`` entry of the record's ``versions``."""
    return isinstance(item, list) and len(item) == 2 and isinstance(item[1], (int, float))


def job(stack, notice, fast):
    """
    ``(fun, arg, kwarg)`` of the job that applies ``stack`` on its nodes: the fast redeploy when
    the nodes hold a current pillar in memory (``fast``: no pillar compile, no SLS render), else
    a queued ``state.apply containers`` limited to the stack, whose pillar is compiled afresh.
    ``notice``: the master's word to the user, or None.
    """
    if fast:
        return FAST_FUN, [stack], ({"notice": notice} if notice else {})
    pillar = {"containers": stack}
    if notice:
        pillar["ccc_notice"] = {stack: notice}
    return "state.apply", ["containers"], {"queue": True, "pillar": pillar}


def job_stack(fun, args):
    """The STACK_NAME that a redeploy job (``job``) applies, from a job event's ``fun`` and its
    ``arg``/``fun_args`` (keyword arguments as a dict among them); None for any other job."""
    args = list(args or [])
    kwargs = next((item for item in args if isinstance(item, dict)), {})
    if fun == FAST_FUN:
        named = [item for item in args if not isinstance(item, dict)] or [kwargs.get("name")]
        return named[0] if isinstance(named[0], str) else None
    stack = (kwargs.get("pillar") or {}).get("containers") if fun == "state.apply" else None
    return stack if isinstance(stack, str) else None


def covered(record, stack, version):
    """Whether a job published since ``version`` of the stack's settings file was reported
    covers it (the same save reported by another node)."""
    return is_file_version(version) and any(is_version(item) and item[0] == version
                                            for item in record["versions"].get(stack) or ())
