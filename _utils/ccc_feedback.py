"""
What a deploy leaves for the user and for the next run: the ``<STACK_NAME>.deploy`` report the
resolver composed (``ccc_report``), the commented default settings file for a user who has none,
and the last accepted settings (the shared state dir's ``last-good`` copy).

The one place they are written. User folders are reached only through ``ccc_userdirs``
(descriptors, no link followed); the last-good copy is root's and replaced atomically.
"""

import datetime
import logging
import os

import ccc_last_good
import ccc_report
import ccc_userdirs

log = logging.getLogger(__name__)


def _messages_part(report):
    return report.partition("\nmessages:\n")[2]


def write_report(resolution, outcome, owner, changed=True):
    """
    Write ``<STACK_NAME>.deploy`` beside the user's settings file; ``outcome`` is the sentence
    saying what the node did. Returns True when written.

    After a run that changed nothing the report is kept unless its messages differ, so a no-op
    apply writes nothing and the user still sees what last happened. Best effort: whatever the
    user put in the way (a folder, say) only costs them the report.
    """
    paths = resolution.get("paths")
    if not paths:
        return False
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    text, body = ccc_report.feedback_report(resolution, outcome, when)

    def unchanged(existing):
        existing = existing.split("\n", 1)[-1]
        return not changed and (existing == body or _messages_part(existing) == _messages_part(body))

    try:
        return ccc_userdirs.write_report(paths["settings_folder"], os.path.basename(paths["feedback_file"]), text,
                                         owner, unchanged)
    except OSError as exc:
        log.warning("cannot write %s: %s", paths["feedback_file"], exc)
        return False


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
