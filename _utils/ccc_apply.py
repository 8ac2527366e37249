"""
One resolution applied on this node: the one place that acts on a container and writes what
the user is told.

``apply`` takes a resolution from ``ccc_plan`` and a Docker client and returns what it found and
did (or, in test mode, would do) as facts, an ``Applied``; the ``ccc_container`` state words them
as its result, comment and changes, and the ``ccc_docker`` execution module acts on the requests
among them (tell the master about a move, ask for the stack's overlay, recheck a move): ``run``
prepares the node (user folders, host keys, pins), hands the pinned spec to ``ccc_swap`` and
joins the stack's swarm overlay (``ccc_swarm_engine``); ``remove`` removes the container
(make-before-break for moves, purge when asked); ``hold`` changes nothing. Every branch writes
the report the resolver composed through ``ccc_feedback`` and the node's move marker through
``ccc_moves``. A Docker engine that does not answer is a failure of this container that the user
is told about, never a silent skip.
"""

import dataclasses
import logging
import os
import threading
import time

import ccc_engine
import ccc_feedback
import ccc_hostkeys
import ccc_moves
import ccc_node_record
import ccc_pillar
import ccc_pins
import ccc_problems
import ccc_redact
import ccc_resolver
import ccc_rules
import ccc_safefs
import ccc_swap
import ccc_swarm_engine
import ccc_userdirs

log = logging.getLogger(__name__)
# Pin mounts are made one at a time: the first one of a node mounts the pin tmpfs itself, and
# two threads must not both find it missing (``ccc_pins.ensure_tree``).
_PIN_LOCK = threading.Lock()


@dataclasses.dataclass
class Applied:
    """
    What one apply found and did, or in test mode would do, to one container: facts, worded by
    the ``ccc_container`` state alone (``dataclasses.asdict`` gives the execution module's data).
    """

    stack: str
    action: str  # "run", "remove", "keep" (a move keeps this copy for now) or "failed" (``problem``)
    reason: str = ""  # the resolver's reason: why this is the action here
    done: str = ""  # run: what was done (the user's report says it too); keep: what is kept, until when
    changes: dict = dataclasses.field(default_factory=dict)  # made, or in test mode would be
    notes: list = dataclasses.field(default_factory=list)  # for the admin, after the rest
    problem: str | None = None  # why this container failed; None when it did not
    settled: dict = dataclasses.field(default_factory=dict)  # an interrupted recreate finished or undone first
    announce: list = dataclasses.field(default_factory=list)  # nodes keeping an old copy: tell the master
    overlay_needed: bool = False  # the stack's swarm overlay does not exist yet: ask the master for it
    recheck_move: float | None = None  # a kept copy: ask again in this many seconds (the move window's end)
    move_done: bool = False  # a kept copy went: no recheck is needed any more


def _failure(stack, problem, changes=None, notes=()):
    return Applied(stack, "failed", problem=problem, changes=changes or {}, notes=list(notes))


def apply(client, cluster, node, resolution, test=False, existing=None, make_keys=None):
    """
    Make Docker match one resolution; ``node``: the node settings (``binds_dir``, where the pin
    sets live). An interrupted recreate of the stack is settled first (``ccc_swap.settle``;
    ``existing``: the engine's containers by name when the run began, ``ccc_engine.listed``).
    ``make_keys``: where a missing SSH host key set is generated (``ccc_hostkey_maker``).
    """
    try:
        attrs, settled = ccc_swap.settle(client, resolution["stack"], resolution["action"] != "remove", test,
                                         existing=existing)
        return dataclasses.replace(_apply(client, cluster, node, resolution, attrs, test, make_keys), settled=settled)
    except ccc_engine.ENGINE_ERRORS as exc:
        message = f"{ccc_engine.ENGINE_DOWN} (the admins were told)"
        if not test and resolution["node"] in (resolution.get("placement") or []):
            _note_here(cluster, resolution, running=False, error=message)
            text = f"NOT deployed on {resolution['node']}: {message}"
            kept = _kept_elsewhere(cluster, resolution)
            if kept:  # the other node's report may land first: both say where it still runs
                text += f"; still running on {', '.join(kept)} until then"
            ccc_feedback.write_report(resolution, text, ccc_pillar.file_owner(cluster))
        return _failure(resolution["stack"], f"{resolution['stack']}: {message}: {exc}")


def _apply(client, cluster, node, resolution, attrs, test, make_keys=None):
    """``attrs``: the container named ``<stack>`` once an interrupted recreate is settled."""
    stack = resolution["stack"]
    if attrs is not None and not ccc_node_record.is_managed(client, attrs):
        return _failure(stack, f"a container named {stack!r} exists but is not managed by ccc-salt; not touching it")
    if resolution["action"] == "hold":
        if not test:
            ccc_feedback.write_report(resolution, "NOT deployed: " + resolution["reason"], ccc_pillar.file_owner(cluster))
        return _failure(stack, "; ".join(resolution["admin_errors"] or [resolution["reason"]]),
                        notes=resolution["notes"])
    if resolution["action"] == "remove":
        return _remove(client, cluster, node, resolution, attrs, test)
    return _run(client, cluster, node, resolution, attrs, test, make_keys)


# --------------------------------------------------------------------------------------------
# run


def pin_spec(binds_dir, spec, create):
    """
    The spec as Docker gets it, every pinned mount's source replaced by its pin folder, and the
    id of that pin set: ``(pinned spec, set id)``.

    The pin set id (sources and their inodes) is part of the sources, so the spec hash changes
    when a user replaced a folder. ``create`` false only checks the sources (test mode).
    Raises ``ccc_safefs.UnsafePath`` / ``FileNotFoundError`` for a bad or missing source.
    """
    pins = [m["pin"] for m in spec["mounts"] if m.get("pin")]
    set_id, identity = ccc_pins.identify(pins)
    if create:
        with _PIN_LOCK:
            ccc_pins.ensure(binds_dir, spec["name"], pins, set_id, identity)
    base = ccc_pins.set_dir(binds_dir, spec["name"], set_id)
    mounts = []
    for mount in spec["mounts"]:
        mount = dict(mount)
        pin = mount.pop("pin", None)
        if pin:
            mount["source"] = os.path.join(base, pin["name"])
        mounts.append(mount)
    pinned = dict(spec, mounts=mounts, labels=dict(spec["labels"]))
    pinned["labels"][ccc_rules.SPEC_HASH_LABEL] = ccc_resolver.spec_hash(pinned)
    return pinned, set_id


def looks_settled(node, resolution, summary):
    """
    A hint for the run's scheduling (``ccc_deploy``): by the run's container list (``summary``,
    ``ccc_engine.listed``) the container already runs what ``resolution`` wants, with its pins as
    they are now, so its apply will only check (CPU-bound work that threads slow down). Decides
    nothing: ``apply`` finds out for itself, and a wrong hint only costs time.
    """
    if resolution.get("action") != "run" or summary is None or resolution.get("storage_missing"):
        return False
    try:
        pinned, _ = pin_spec(node["binds_dir"], resolution["spec"], create=False)
    except Exception:  # noqa: BLE001 - a replaced or missing source: the apply finds and reports it
        return False
    return ccc_swap.looks_unchanged(summary, pinned, resolution.get("image_id"))


def _prepare(cluster, node, resolution, test, make_keys=None):
    """Folders, host keys and pins for a ``run``; returns ``(pinned spec, pin set id, created folders)``."""
    spec = resolution["spec"]
    if test:
        return (*pin_spec(node["binds_dir"], spec, create=False), [])
    created = ccc_userdirs.ensure_directories(resolution["directories"])
    sshd_data = cluster["mount_points"]["local"]["sshd_data"]
    try:
        key_store = ccc_hostkeys.store(cluster)
    except ValueError as exc:  # a store_dir no container may reach: the admin's to fix, like a missing share
        raise FileNotFoundError(str(exc)) from None
    if ccc_hostkeys.ensure(sshd_data, key_store, spec["name"], (cluster.get("host_keys") or {}).get("rsa_bits", 3072),
                           make=make_keys):
        created.append(ccc_hostkeys.node_dir(sshd_data, spec["name"]))
    pinned, set_id = pin_spec(node["binds_dir"], spec, create=True)
    missing = [m["source"] for m in pinned["mounts"] if not os.path.exists(m["source"])]
    if missing:
        raise FileNotFoundError(f"missing on this node (storage not mounted?): {', '.join(missing)}")
    return pinned, set_id, created


def _run(client, cluster, node, resolution, attrs, test, make_keys=None):
    """Create or recreate (only when the spec hash changed), start, reattach networks."""
    stack, owner = resolution["stack"], ccc_pillar.file_owner(cluster)
    if resolution.get("storage_missing"):
        return _storage_missing(resolution, owner, test)
    try:
        spec, set_id, created_dirs = _prepare(cluster, node, resolution, test, make_keys)
    except ccc_safefs.UnsafePath as exc:
        if not test:
            ccc_feedback.write_report(resolution, f"NOT deployed: {exc.strerror}. A folder of yours is replaced by "
                                      "something else; put the real folder back (the container keeps running as it was)",
                                      owner)
            if not ccc_engine.running(attrs):  # a running copy here stays what the markers say
                _note_here(cluster, resolution, running=False, error="a user folder is not a real folder")
        return _failure(stack, f"{stack}: refusing a user path: {exc.strerror}")
    except FileNotFoundError as exc:
        if not test:
            ccc_feedback.write_report(resolution, "NOT deployed: the node's storage is not ready (the admins were told)",
                                      owner)
        return _failure(stack, f"{stack}: {exc}")
    if test:
        return _test_run(resolution, spec, attrs)
    changes = {"directories": created_dirs} if created_dirs else {}
    ccc_feedback.store_settings(resolution, owner, changes)
    try:
        outcome = ccc_swap.run(client, spec, attrs, changes, retry_since=_settings_since(resolution),
                               image_id=resolution.get("image_id"))
    except ccc_engine.docker.errors.APIError as exc:
        message = f"Docker refused the container, nothing was changed: {exc.explanation or exc}"
        resolution = dict(resolution, user_messages=resolution["user_messages"] + [message])
        ccc_feedback.write_report(resolution, "NOT deployed: " + message, owner)
        if not ccc_engine.running(ccc_engine.inspect(client, stack)):
            _note_here(cluster, resolution, running=False, error="Docker refused the container")
        return _failure(stack, f"{stack}: {message}", changes)
    # Only the container named STACK_NAME is left now, running ``spec``: its set stays, the rest go.
    ccc_pins.release(node["binds_dir"], stack, keep={set_id})
    overlay = ccc_swarm_engine.join_overlay(client, resolution, node["state_dir"], changes)
    told = resolution if not overlay["user"] else dict(  # a message: a no-op run still rewrites the report
        resolution, user_messages=resolution["user_messages"] + [overlay["user"]])
    # Docker's state of an untouched container is the one just read; after a change, ask again.
    problem = _problem(client, resolution, None if changes else attrs)
    ccc_feedback.write_report(dict(told, problem=problem), outcome, owner, changed=bool(changes))
    notes = list(resolution["notes"]) + ([overlay["admin"]] if overlay["admin"] else [])
    if problem and problem.get("summary"):
        notes.append("container problem: " + problem["summary"])
    if resolution["settings_status"] == "rejected":
        notes.append("user settings rejected: " + "; ".join(resolution["user_messages"][1:]))
    return Applied(stack, "run", resolution["reason"], done=outcome, changes=changes, notes=notes,
                   problem=overlay["admin"] if overlay["failed"] else None, overlay_needed=overlay["needed"],
                   announce=_note_here(cluster, resolution, running=True))


def _settings_since(resolution):
    """When the user last saved the settings file (0 without one; its ctime, not the mtime the
    user sets): a save after a crash asks for one more start (``ccc_swap.run``)."""
    paths = resolution.get("paths") or {}
    if not paths.get("settings_folder") or resolution.get("settings_status") != "applied":
        return 0  # no file, or a rejected one: the placement is the one already accepted
    return ccc_userdirs.changed_at(paths["settings_folder"], os.path.basename(paths["settings_file"])) or 0


def _problem(client, resolution, attrs=None):
    """The container's problem after the apply (``ccc_problems.observe``), None when all is well;
    ``attrs``: its inspect data when the apply did not touch it (else it is inspected).
    Its log lines are masked with the values this container was given and nothing else
    (``ccc_redact.given_secrets``): it never receives the node's other secrets, and masking
    them would tell it which of its guesses is one."""
    attrs = attrs or ccc_engine.inspect(client, resolution["stack"])
    folder = (resolution.get("paths") or {}).get("settings_folder")
    if not attrs:
        return None
    given = ccc_redact.given_secrets(resolution["spec"])
    return ccc_problems.observe(client, attrs, folder, resolution["stack"], given,
                                last_log=ccc_feedback.last_log(resolution))


def _storage_missing(resolution, owner, test):
    """The node's NFS mount points the container needs are plain folders (``ccc_plan.nfs_fact``):
    nothing is created or bound there (a home made on the local disk is lost or forked later);
    only an existing report folder gets the reason. A running copy stays as it was, and no move
    marker is written (they live in the shared state dir, on the missing share)."""
    why = "; ".join(resolution["storage_missing"])
    if not test:
        ccc_feedback.write_report(resolution, f"NOT deployed on {resolution['node']}: the shared storage is not mounted "
                                  f"there, so nothing of yours was created or used (the admins were told): {why}", owner)
    return _failure(resolution["stack"],
                    f"{resolution['stack']}: refusing user data on {resolution['node']}, NFS storage missing: {why}")


def _test_run(resolution, spec, attrs):
    """What a ``run`` would change: made, recreated (how), image updated, started, overlay joined."""
    changes = {}
    if attrs is None:
        changes["created"] = {"image": spec["image"], "networks": spec["networks"], "gpus": spec["device_ids"]}
    elif ccc_engine.labels(attrs).get(ccc_rules.SPEC_HASH_LABEL) != spec["labels"][ccc_rules.SPEC_HASH_LABEL]:
        changes["recreated"] = ccc_engine.spec_diff(ccc_engine.spec_of_container(attrs), spec)
    if attrs is not None and ccc_swap.image_update(attrs, resolution.get("image_id")):
        changes["image_updated"] = ccc_swap.image_update(attrs, resolution.get("image_id"))
    elif attrs is not None and not changes and not ccc_engine.running(attrs):
        changes["started"] = True
    joining = ccc_swarm_engine.would_join(resolution, attrs)
    if joining:
        changes["overlay"] = joining
    return Applied(resolution["stack"], "run", resolution["reason"], changes=changes, notes=list(resolution["notes"]))


# --------------------------------------------------------------------------------------------
# remove


def _remove(client, cluster, node, resolution, attrs, test):
    """Not placed here, or DISABLED: remove it (a move keeps it until the new node runs it)."""
    moved = None
    if attrs is not None and resolution.get("placement") and not resolution["reason"].startswith("DISABLED"):
        kept, moved = _keep_for_move(cluster, resolution, test)
        if kept is not None:
            return kept
    stack = resolution["stack"]
    changes = {}
    if attrs is not None:
        changes["removed"] = {"reason": resolution["reason"]}
        if not test:
            ccc_engine.stop_and_remove(client, attrs)
    if not test:
        ccc_pins.release(node["binds_dir"], stack)
    if resolution.get("purge"):
        existing = ccc_userdirs.existing(purge_paths(cluster, resolution))
        if existing:
            changes["purged"] = [ccc_userdirs.display(entry) for entry in existing]
            if not test:
                ccc_userdirs.remove(existing)
    if resolution["reason"].startswith("DISABLED") and not test and not resolution.get("purge"):
        ccc_feedback.write_report(resolution, "removed: the administrators disabled this container", ccc_pillar.file_owner(cluster))
    if not test:
        ccc_moves.clear(cluster["state_dir"], stack, resolution["node"])
        if moved:  # the user reads where it runs now (or why this copy went before the move completed)
            ccc_feedback.write_report(resolution, moved, ccc_pillar.file_owner(cluster))
    return Applied(stack, "remove", resolution["reason"], changes=changes, notes=[moved] if moved else [],
                   move_done=bool(moved) and not test)


def purge_paths(cluster, resolution):
    """
    What PURGE_USER_DATA deletes for one stack, as ``{"root", "parts"}`` entries: its home
    (unless another active stack of the user shares it), its settings files, its node-local SSD
    folder and its last accepted settings. Each is reached from its storage root without
    following links, so nothing outside the user's own folders can be named.
    """
    record = resolution["record"]
    stack, email = record["STACK_NAME"], record["USER_EMAIL"]
    user_data = cluster["mount_points"]["nfs"]["user_data"]
    storage = record.get("STORAGE_NAME") or stack
    entries = [{"root": user_data, "parts": [email, "container-settings", f"{stack}{suffix}"]}
               for suffix in (".yml", ".deploy", ".status", ".env-backup")]
    if storage not in resolution.get("storage_in_use", []):
        entries.append({"root": user_data, "parts": [email, storage]})
    # The image keeps ~/.cache and ~/.services of this container under <ssd>/<email>/<STACK_NAME>.
    entries.append({"root": cluster["mount_points"]["local"]["ssd_data"], "parts": [email, stack]})
    last_good = resolution["paths"]["last_good_file"]
    entries.append({"root": os.path.dirname(last_good), "parts": [os.path.basename(last_good)]})
    return entries


# --------------------------------------------------------------------------------------------
# make-before-break moves (``ccc_moves`` markers in the shared state dir)


def _note_here(cluster, resolution, running, error=None):
    """Write this node's marker for the stack when it changed; returns the nodes outside the
    placement that still keep a copy (best effort: the shared storage may be away)."""
    stack, here = resolution["stack"], resolution["node"]
    try:
        markers = ccc_moves.read(cluster["state_dir"], stack)
        if ccc_moves.needs_note(markers, here, running, error):
            ccc_moves.write(cluster["state_dir"], stack, here, running, error)
    except OSError as exc:
        log.warning("cannot record the state of %s on %s: %s", stack, here, exc)
        return []
    return ccc_moves.kept_elsewhere(markers, resolution.get("placement") or []) if running else []


def _kept_elsewhere(cluster, resolution):
    """Nodes outside the placement that still run the stack (best effort)."""
    try:
        return ccc_moves.kept_elsewhere(ccc_moves.read(cluster["state_dir"], resolution["stack"]),
                                        resolution.get("placement") or [])
    except OSError:
        return []


def _keep_for_move(cluster, resolution, test):
    """
    Make-before-break: the container is placed on other nodes; keep this copy running until
    one of them reports it running since this copy was placed here, at most
    ``ccc:cluster:moves:max_window`` s (``ccc_moves.keep_or_remove``, on root's markers and this
    node's clock). Returns ``(Applied, None)`` when the copy is kept, ``(None, sentence)`` when it
    goes (the sentence tells the user where it runs, or why it went before the move completed).
    """
    stack, here, placement = resolution["stack"], resolution["node"], resolution["placement"]
    window, problem = ccc_moves.max_window(cluster)
    where = ", ".join(placement)
    step = ccc_moves.keep_or_remove(ccc_moves.read(cluster["state_dir"], stack), placement, here, time.time(), window)
    if step["action"] == "remove":
        return None, f"moved to {where} ({step['why']}); the copy on {here} was removed"
    if step["action"] == "expire":
        return None, (f"removed from {here} after {step['waited']:.0f} s: {step['why']}, and a move keeps the old "
                      f"copy {window:.0f} s at most; it runs on {where} once started there")
    left = "" if step["recheck"] is None else f"; it goes from {here} in {step['recheck']:.0f} s at the latest"
    outcome = Applied(stack, "keep", resolution["reason"], done=f"kept running on {here} until {where} runs it: "
                      f"{step['why']}{left}", notes=[problem] if problem else [])
    if not test:
        try:
            if step["marker"]:
                ccc_moves.write(cluster["state_dir"], stack, here, True, kept=True, now=step["marker"]["at"],
                                placed_at=step["marker"]["placed_at"])
        except OSError as exc:  # the shared storage is away: kept all the same, the window restarts later
            log.warning("cannot record the kept copy of %s on %s: %s", stack, here, exc)
        ccc_feedback.write_report(resolution, f"still running on {here}: moving to {where}, where {step['why']}{left}",
                                  ccc_pillar.file_owner(cluster))
        outcome.recheck_move = step["recheck"]  # None: no end of the window to wait for
    return outcome, None
