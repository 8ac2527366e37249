"""
What a deploy leaves for the user and for the next run: the ``<STACK_NAME>.deploy`` report the
resolver composed (``ccc_report``), the commented default settings file for a user who has none,
and the last accepted settings (the shared state dir's ``last-good`` copy), and the admins'
copy of the last result and problem (``last-deploy``, read by ``salt-run ccc.status``).

The one place they are written. User folders are reached only through ``ccc_userdirs``
(descriptors, no link followed); the last-good copy is root's and replaced atomically.
"""

import datetime
import json
import logging
import os

import ccc_last_good
import ccc_report
import ccc_rules
import ccc_safefs
import ccc_userdirs

log = logging.getLogger(__name__)


def _messages_part(report):
    return report.partition("\nmessages:\n")[2]


def _described(report):
    """``(node line, the lines saying what runs, result line)`` of a report body: what a no-op
    run compares before it keeps a report."""
    head = report.partition("\nmessages:\n")[0]
    lines = head[:len(head) - len(ccc_report.problem_part(head))].splitlines()
    node = next((line for line in lines if line.startswith("node: ")), "")
    result = next((line for line in lines if line.startswith("result: ")), "")
    # Whether the settings file existed says nothing about what runs (the first run writes it).
    return node, [line for line in lines if not line.startswith(("result: ", "settings: "))], result


def _stale(existing, body):
    """True when ``existing`` was written by this node and no longer says what runs here: its
    settings lines differ (a recreate finished by the next run after the minion died), or it
    says a deploy failed while this run finds the container running. Another node's report (a
    move, a stack placed on several nodes) is kept: each node rewriting it would flap."""
    node, lines, result = _described(existing)
    here, now, _ = _described(body)
    return node == here and (lines != now or result.startswith("result: NOT "))


def write_report(resolution, outcome, owner, changed=True):
    """
    Write ``<STACK_NAME>.deploy`` beside the user's settings file; ``outcome`` is the sentence
    saying what the node did. Returns True when written.

    After a run that changed nothing the report is kept unless its messages differ, so a no-op
    apply writes nothing and the user still sees what last happened; but never a report of this
    node that describes other settings than the ones running, or a failure (``_stale``). Best
    effort: whatever the user put in the way (a folder, say) only costs them the report.
    """
    paths = resolution.get("paths")
    if not paths:
        return False
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    text, body = ccc_report.feedback_report(resolution, outcome, when)

    def unchanged(existing):
        existing = existing.split("\n", 1)[-1]
        if changed or ccc_report.problem_part(existing) != ccc_report.problem_part(body):
            return False  # a container's problem (and its latest log lines) is always told
        if existing == body:
            return True
        return _messages_part(existing) == _messages_part(body) and not _stale(existing, body)

    record_deploy(resolution, outcome, when)
    try:
        return ccc_userdirs.write_report(paths["settings_folder"], os.path.basename(paths["feedback_file"]), text,
                                         owner, unchanged)
    except OSError as exc:
        log.warning("cannot write %s: %s", paths["feedback_file"], exc)
        return False


def deploy_record_path(state_dir, stack, node):
    """The admins' copy of a stack's last deploy result on ``node``, in the shared state dir
    (root's: ``salt-run ccc.status`` never trusts the user's ``.deploy`` file)."""
    return os.path.join(state_dir, "last-deploy", stack, f"{node}.json")


def read_deploy_record(state_dir, stack, node):
    """``{"when", "result", "problem"}`` last recorded for ``stack`` on ``node``, or None."""
    try:
        text = ccc_safefs.read_text(deploy_record_path(state_dir, stack, node))
        record = json.loads(text) if text else None
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def last_log(resolution):
    """The log lines last read for a problem of ``resolution``'s stack on its node, as recorded
    with its deploy (``record_deploy``; ``ccc_problems.stored_log`` checks them), or None."""
    paths, node = resolution.get("paths") or {}, resolution.get("node")
    if not paths.get("last_good_file") or not node:
        return None
    record = read_deploy_record(_state_dir(paths), resolution["stack"], node) or {}
    return record.get("log")


def _state_dir(paths):
    return os.path.dirname(os.path.dirname(paths["last_good_file"]))  # <state_dir>/last-good/<STACK>.json


def deploy_records(state_dir, node):
    """``{STACK_NAME: record}`` of every stack this node recorded a deploy of (``record_deploy``)."""
    try:
        stacks = os.listdir(os.path.join(state_dir, "last-deploy"))
    except OSError:
        return {}
    found = {stack: read_deploy_record(state_dir, stack, node) for stack in stacks if ccc_rules.is_stack_name(stack)}
    return {stack: record for stack, record in found.items() if record}


def record_deploy(resolution, outcome, when):
    """
    Keep the admins' copy of what this node last told the user (``deploy_record_path``), written
    only when the result, the problem or whether the stack is placed here changed, so a no-op
    reconcile keeps when it happened. ``placed``: the container belongs on this node (a stack
    placed here without a container is missing). Best effort: the shared state dir may be away.
    """
    paths, node = resolution.get("paths") or {}, resolution.get("node")
    if not paths.get("last_good_file") or not node:
        return
    state_dir = _state_dir(paths)
    problem = (resolution.get("problem") or {}).get("summary")
    placed = resolution.get("action") != "remove" and node in (resolution.get("placement") or [])
    path = deploy_record_path(state_dir, resolution["stack"], node)
    old = read_deploy_record(state_dir, resolution["stack"], node) or {}
    # The log lines last read (``ccc_problems.observe``) stay until lines are read again, so how
    # often a log is read is decided by root's record, not by anything the user can write.
    log_record = (resolution.get("problem") or {}).get("log_record") or old.get("log")
    if (old.get("result") == outcome and old.get("problem") == problem and old.get("placed") == placed
            and old.get("log") == log_record):
        return
    data = json.dumps({"when": when, "result": outcome, "problem": problem, "placed": placed, "log": log_record},
                      sort_keys=True).encode()
    try:
        ccc_safefs.replace_file(path, data, 0o600, root=state_dir)
    except OSError as exc:
        log.warning("cannot record the deploy of %s: %s", resolution["stack"], exc)


def store_settings(resolution, owner, changes):
    """The default settings file for a user who has none (noted in ``changes``), and the last
    accepted settings (``ccc_last_good``)."""
    paths = resolution["paths"]
    if resolution.get("default_settings_text") and ccc_userdirs.create_file(
        paths["settings_folder"], os.path.basename(paths["settings_file"]), resolution["default_settings_text"], owner
    ):
        changes["settings_file"] = f"wrote the default {paths['settings_file']}"
    if resolution.get("settings_to_store") is not None:
        ccc_last_good.store(paths["last_good_file"], resolution["settings_to_store"])
