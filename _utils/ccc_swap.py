"""
Crash-safe creates and recreates: the container named STACK_NAME is replaced only once its
successor has started, and a run killed at any step is finished or undone by the next one.

A first create makes the container under its own name (recorded before and after the create)
and starts it. A recreate creates ``<stack>.ccc-new`` (recorded the same way), stops the old
container and renames it ``<stack>.ccc-old``, renames the new one ``<stack>`` and starts it, and
only then removes the old one; a spec Docker refuses to start puts the old container back.
Every apply first settles what a killed run left (``settle``): once the new container has
started the swap is finished, before that it is undone, so the last good container is never
lost and ``.ccc-new``/``.ccc-old`` never outlive an apply.
"""

import logging

import ccc_engine
import ccc_images
import ccc_node_record
import ccc_problems
import ccc_rules

log = logging.getLogger(__name__)

NEVER_STARTED = "0001-01-01T00:00:00Z"  # Docker's State.StartedAt of a container never started


def _ever_started(attrs):
    state = attrs.get("State") or {}
    return bool(state.get("Running")) or state.get("StartedAt", NEVER_STARTED) not in ("", NEVER_STARTED)


def plan(real, new, old):
    """
    How to finish or undo a recreate that a killed run left half done, from ``<stack>`` (``real``)
    and its managed leftovers: ``(containers to remove, container to rename back to <stack>)``.
    Once the new container has started the swap is finished (the old one goes, as the swap would
    have removed it); before that it is undone. A ``.ccc-new`` never ran as the real one: it
    always goes.
    """
    if old is not None and (real is None or not _ever_started(real)):
        return [attrs for attrs in (new, real) if attrs is not None], old
    return [attrs for attrs in (new, old) if attrs is not None], None


def settle(client, stack, start, test, existing=None):
    """
    Finish or undo a swap of ``stack`` that a killed run left half done (``plan``), first in
    every apply. ``start``: start a container renamed back (the swap had stopped it; not when
    removing); ``existing``: the engine's containers by name when the run began
    (``ccc_engine.listed``), so a leftover that was not there is not asked for (None: ask).
    Returns ``(attrs of <stack> once settled, what was done)``; a test run only says what it
    would do, with the container that would then be ``<stack>``.
    """
    new_name, old_name = ccc_node_record.swap_names(stack)
    recorded = ccc_node_record.recorded_ids(client)
    real = ccc_engine.inspect(client, stack)
    new, old = (ccc_engine.inspect(client, name) if existing is None or name in existing else None
                for name in (new_name, old_name))
    if real is not None and not ccc_node_record.is_managed(client, real, recorded):
        return real, {}  # not ours: the apply refuses, and leaves this stack's leftovers alone too
    new, old = (attrs if attrs is not None and ccc_node_record.is_managed(client, attrs, recorded) else None
                for attrs in (new, old))
    remove, restore = plan(real, new, old)
    done = {"removed": sorted(ccc_node_record.name(attrs) for attrs in remove)} if remove else {}
    if restore is not None:
        done["restored"] = f"{old_name} as {stack}" + (", started" if start and not ccc_engine.running(restore) else "")
    if test:
        return (restore if restore is not None else real), done
    for attrs in remove:
        ccc_engine.stop_and_remove(client, attrs)
    if ccc_node_record.CREATING + new_name in recorded:
        ccc_node_record.change(client, drop=[ccc_node_record.CREATING + new_name])  # its create was cut short
    if ccc_node_record.CREATING + stack in recorded:
        # A first create cut short before its id was recorded: the container (if Docker made
        # it) is ours by that name; record it by id, so the name alone never counts again.
        made = [real["Id"]] if real is not None and real["Id"] not in recorded else []
        ccc_node_record.change(client, add=made, drop=[ccc_node_record.CREATING + stack])
    if restore is not None:
        _restore(client, stack, restore, start, done)
    if done:
        log.warning("%s: settled a recreate that a killed run left half done: %s", stack, done)
    return (ccc_engine.inspect(client, stack) if done else real), done


def _restore(client, stack, old, start, done):
    client.api.rename(old["Id"], stack)
    if start and not ccc_engine.running(old):
        try:
            client.api.start(old["Id"])
        except ccc_engine.docker.errors.APIError as exc:  # e.g. its pins are gone (reboot): the apply goes on
            log.warning("could not start %s again after undoing its interrupted recreate: %s", stack, exc)
            done["restored"] = f"{ccc_node_record.swap_names(stack)[1]} as {stack}, not started: {exc.explanation or exc}"


def run(client, spec, attrs, changes, retry_since=0, image_id=None):
    """
    Make the container ``spec["name"]`` run ``spec`` (``attrs``: the settled current one, or
    None): start it or reattach networks when its spec hash matches, else create it or swap in
    a new one. Records what it did in ``changes``; returns the sentence for the user's report.
    Raises ``docker.errors.APIError`` when Docker refuses, with the old container running as before.
    A container with the same spec that crashed stays as it is (``ccc_problems.leave_stopped``;
    ``retry_since``: when the user last saved the settings file, which asks for one more start).
    ``image_id``: the id the image's tag has now (``image_policy:pull: always``); a container
    that runs another id is recreated too, and the sentence says which ids.
    """
    updated = image_update(attrs, image_id)
    same = attrs is not None and _same_spec(ccc_engine.labels(attrs), spec)
    if same and not updated:
        return _refresh(client, spec, attrs, changes, retry_since)
    if attrs is None:
        # Nothing to keep running meanwhile: made under its own name (a run killed before the
        # start leaves it created, and the next one starts it: ``settle``, ``_refresh``).
        created = _create_connected(client, spec["name"], spec)
        try:
            client.api.start(created["Id"])
        except ccc_engine.docker.errors.APIError:
            ccc_engine.remove_recorded(client, created["Id"])
            raise
        changes["created"] = {"image": spec["image"], "networks": spec["networks"], "gpus": spec["device_ids"]}
        return "created and started"
    created = _create_connected(client, ccc_node_record.swap_names(spec["name"])[0], spec)  # ``settle`` ran first
    _swap(client, spec["name"], created, attrs)
    if updated:
        changes["image_updated"] = updated
    if same:
        return f"recreated: image updated: {updated['old']} -> {updated['new']}"
    changes["recreated"] = ccc_engine.spec_diff(ccc_engine.spec_of_container(attrs), spec)
    if updated:
        return f"recreated with the new settings; image updated: {updated['old']} -> {updated['new']}"
    return "recreated with the new settings"


def _create_connected(client, name, spec):
    """Create (recorded) ``name`` with ``spec`` and connect its other networks; removed again
    when Docker refuses a network."""
    created = ccc_engine.create_recorded(client, name, spec)
    try:
        for network in spec["networks"][1:]:
            client.api.connect_container_to_network(created["Id"], network)
    except ccc_engine.docker.errors.APIError:
        ccc_engine.remove_recorded(client, created["Id"])
        raise
    return created


def _same_spec(labels, spec):
    """A container with these labels was made from ``spec`` (pinned): the spec hashes match."""
    return labels.get(ccc_rules.SPEC_HASH_LABEL) == spec["labels"][ccc_rules.SPEC_HASH_LABEL]


def looks_unchanged(summary, spec, image_id=None):
    """
    Whether the run's container list (``ccc_engine.listed``: ``summary``, or None) shows the
    container already running ``spec`` (pinned) and the image id wanted (``image_id``, as ``run``).
    A hint for scheduling alone (``ccc_deploy``): ``run`` decides on the container's own data.
    """
    return (summary is not None and summary.get("State") == "running" and _same_spec(summary.get("Labels") or {}, spec)
            and _runs_image(summary.get("ImageID"), image_id))


def _runs_image(image, image_id):
    """A container on the image id ``image`` runs the one wanted (``image_id``; None: any)."""
    return not image_id or image == image_id


def image_update(attrs, image_id):
    """``{"old", "new"}`` short image ids when the container ``attrs`` runs another image than
    ``image_id`` (the tag's id now), else None."""
    if attrs is None or _runs_image(attrs.get("Image"), image_id):
        return None
    return {"old": ccc_images.short_id(attrs.get("Image")), "new": ccc_images.short_id(image_id)}


def _refresh(client, spec, attrs, changes, retry_since=0):
    """The container already has the wanted spec: reattach missing networks, start it if stopped
    (not when it crashed: a reconcile never turns a crash into a start loop of its own)."""
    if (attrs.get("State") or {}).get("Restarting"):
        return "left as it is: it crashed and Docker is restarting it (the same settings are not recreated)"
    if ccc_problems.leave_stopped(attrs, retry_since):
        return "left stopped: it crashed (the same settings are not started again by themselves)"
    missing = [net for net in spec["networks"] if net not in ccc_engine.attached_networks(attrs)]
    for network in missing:
        client.api.connect_container_to_network(attrs["Id"], network)
    if missing:
        changes["networks_reattached"] = missing
    if not ccc_engine.running(attrs):
        client.api.start(attrs["Id"])
        changes["started"] = True
        return "started (it was stopped)"
    return "running, unchanged" if not missing else "running, networks reattached"


def _swap(client, stack, created, old):
    """The old container is kept (stopped, renamed) until the new one has started, so a spec
    Docker cannot start leaves the last good container running."""
    old_name = ccc_node_record.swap_names(stack)[1]
    was_running = ccc_engine.running(old)
    if was_running:
        client.api.stop(old["Id"], timeout=ccc_engine.STOP_TIMEOUT)
    client.api.rename(old["Id"], old_name)
    try:
        client.api.rename(created["Id"], stack)
        client.api.start(created["Id"])
    except ccc_engine.docker.errors.APIError:
        ccc_engine.remove_recorded(client, created["Id"])
        client.api.rename(old["Id"], stack)
        if was_running:
            client.api.start(old["Id"])
        raise
    ccc_engine.remove_recorded(client, old["Id"])
