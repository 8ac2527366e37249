"""
How a user's value appears in a message: at most ``QUOTE_CHARS`` characters of it, then "…" and
its length, control characters escaped. Settings files, pillar strings and engine errors are
hostile or unbounded; every message, report line and state comment that echoes one goes through
this module, so the text a person reads stays short and on one line whatever the input.
"""

import re

MAX_PROBLEMS = 5  # problems reported per file; the rest are counted

QUOTE_CHARS = 80  # characters of a user's value quoted in a message

ERROR_CHARS = 200  # characters of a service's error (Docker, GitHub) quoted in a message

_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f\u0080-\u009f\u2028\u2029]")


def _repr(value):
    """``repr`` that never raises: Python refuses to print an integer of over 4300 digits, and
    nesting deeper than its recursion limit; such a value is described instead."""
    try:
        return repr(value)
    except (ValueError, RecursionError):
        return f"<{type(value).__name__} too large or too deeply nested to show>"


def quote_value(value, limit=QUOTE_CHARS):
    """
    A user's value for a message: its ``repr`` (quotes show where a string starts and ends, and
    escape newlines and control characters), at most ``limit`` characters of the value, then "…"
    and its full length. A list or mapping also says how many items it has.
    """
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return f"{value[:limit]!r}… ({len(value)} characters)"
    shown = _repr(value)
    if len(shown) <= limit:
        return shown
    items = ""
    if isinstance(value, (list, tuple, dict, set, frozenset, bytes)):
        items = f"{len(value)} item{'' if len(value) == 1 else 's'}, "
    return f"{shown[:limit]}… ({items}{len(shown)} characters)"


def one_line(text):
    """``text`` with its control characters (newlines, tabs, escapes, line separators) escaped as
    ``repr`` writes them: it shows on one line and cannot start a line of its own."""
    return _CONTROL_CHARS.sub(lambda found: repr(found.group())[1:-1], str(text))


def clip_text(text, limit=QUOTE_CHARS):
    """
    A text that may carry a user's value, shown bare (a parser's or an engine's error, a report
    line): on one line (``one_line``), at most ``limit`` characters of it shown (escapes
    included), then "…" and the length of the text.
    """
    text = str(text)
    shown = one_line(text[:limit])
    if len(text) <= limit and len(shown) <= limit:
        return shown
    return f"{shown[:limit]}… ({len(text)} characters)"


def quote_some(values, limit=MAX_PROBLEMS):
    """The first ``limit`` values quoted and comma-separated, then "and N more"."""
    values = list(values)
    shown = ", ".join(quote_value(value) for value in values[:limit])
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")


def cap_problems(problems, limit=MAX_PROBLEMS):
    """
    The first ``limit`` problems, then "… and N more problems": a file with thousands of
    mistakes gets a short, readable report.
    """
    problems = list(problems)
    if len(problems) <= limit:
        return problems
    return problems[:limit] + [f"… and {len(problems) - limit} more problems"]
