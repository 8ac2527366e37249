"""
Reading a user's settings file as hostile data: size and shape bounds checked on the YAML
events before anything is built, aliases refused, one ``STACK_NAME`` section returned.
"""

import errno
import os

import yaml

import ccc_quote
import ccc_safefs

# Bounds checked before any schema validation, so a hostile file costs milliseconds: jsonschema
# validates (and reports) every item of an oversized list, and uniqueItems is quadratic.
MAX_SETTINGS_BYTES = 64 * 1024
MAX_VALUES = 1024  # keys, scalars, lists and mappings in the whole file (a full file has ~400)
MAX_DEPTH = 8  # nested lists/mappings, the top level included (settings need 5)

# libyaml parses a 64 KiB file ~7x faster than pure Python; both are safe loaders.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class SettingsError(Exception):
    """The settings file could not be read or parsed; the message is meant for the user."""


def _where(mark):
    return f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""


def _check_yaml_events(text):
    """
    Refuse, from the parser's events and before anything is built, what makes a small file
    expensive: aliases (a tiny file expanding to gigabytes), deep nesting and more than
    ``MAX_VALUES`` values. Stops at the first excess, so the rest of the file is never parsed.
    """
    try:
        _walk_yaml_events(yaml.parse(text, Loader=_LOADER))
    except yaml.YAMLError as exc:
        # libyaml's own nesting limit (1000 levels), met while it looks ahead in "[[[[...".
        if "nesting depth" in str(getattr(exc, "problem", "")):
            raise SettingsError(_too_deep(getattr(exc, "problem_mark", None))) from None
        raise


def _too_deep(mark):
    return (
        "the file is not valid here: its lists or mappings are nested too deeply"
        f" (more than {MAX_DEPTH} levels){_where(mark)}"
    )


def _walk_yaml_events(events):
    depth = values = 0
    for event in events:
        if isinstance(event, yaml.AliasEvent):
            raise SettingsError(f"YAML aliases (*name) are not allowed in settings files{_where(event.start_mark)}")
        if isinstance(event, (yaml.ScalarEvent, yaml.CollectionStartEvent)):
            values += 1
            if values > MAX_VALUES:
                raise SettingsError(
                    f"the file holds more than {MAX_VALUES} values (keys, list items and settings)"
                    f"{_where(event.start_mark)}; settings files are short"
                )
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise SettingsError(_too_deep(event.start_mark))
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def read_settings_file(path, max_bytes=MAX_SETTINGS_BYTES):
    """
    Read a user settings file without following symlinks.

    Returns the text, or ``None`` when the file does not exist. Raises ``SettingsError`` with a
    plain-language reason for symlinks, FIFOs, devices, directories, oversized or non-UTF-8 files.
    The file itself is read by ``ccc_safefs.read_regular_at``, root's one safe read of a file a
    user controls (never a device opened, never a FIFO waited on, the checked inode read).
    """
    name = os.path.basename(path)
    folder = os.path.dirname(path) or "."
    # The folder is user-controlled too (it sits in the user's rw /storage/user): open it without
    # following a symlink, then open the file relative to it.
    try:
        dir_fd = os.open(folder, ccc_safefs.DIR_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(folder):
            raise SettingsError(
                f"the folder {os.path.basename(folder)} is a symbolic link; it must be a real folder"
            ) from None
        raise SettingsError(f"the folder of {name} cannot be read ({os.strerror(exc.errno)})") from None
    try:
        data = ccc_safefs.read_regular_at(dir_fd, name, max_bytes)
    except ccc_safefs.UnsafePath as exc:
        raise SettingsError(exc.strerror) from None
    except OSError as exc:
        raise SettingsError(f"{name} cannot be read ({os.strerror(exc.errno)})") from None
    finally:
        os.close(dir_fd)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SettingsError(f"{name} is not UTF-8 text") from None


def parse_settings_text(text, stack_name):
    """
    Parse settings text and return the mapping under ``stack_name`` (``{}`` when absent or empty).

    Raises ``SettingsError`` for YAML errors, aliases, too many values, deep nesting, a top
    level that is not a mapping, or other top-level keys.
    """
    try:
        _check_yaml_events(text)
        document = yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SettingsError(f"the file is not valid YAML{_where(mark)}: {ccc_quote.clip_text(problem)}") from None
    except (ValueError, OverflowError) as exc:  # int("1" * 5000), a timestamp such as 2001-13-45
        raise SettingsError(f"the file is not valid YAML: a value cannot be read ({ccc_quote.clip_text(exc)})") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise SettingsError(f"the file must be a mapping with the single key '{stack_name}:'")
    others = [key for key in document if key != stack_name]
    if others:
        raise SettingsError(
            f"only the key '{stack_name}:' may appear at the top level; found "
            + ccc_quote.quote_some(sorted(others, key=str))
        )
    section = document.get(stack_name)
    return {} if section is None else section
