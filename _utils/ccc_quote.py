"""
Quoting a user's value in a message: at most ``QUOTE_CHARS`` characters, then an ellipsis and
the length, so a report stays small whatever the input.
"""
MAX_PROBLEMS = 5  # problems reported per file; the rest are counted
QUOTE_CHARS = 80  # characters of a user's value quoted in a message


def _clip(text, limit=QUOTE_CHARS):
    """``text`` cut to ``limit`` characters, then "…" and its length (``quote_value``'s format)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters)"


def quote_value(value, limit=QUOTE_CHARS):
    """
    Quote a user's value for a message: its ``repr``, at most ``limit`` characters of the value,
    then "…" and the full length. Every message that echoes a user's value goes through this, so
    a hostile value never makes a message (or the ``.deploy`` report) large.
    """
    if isinstance(value, str):
        return repr(value) if len(value) <= limit else f"{value[:limit]!r}… ({len(value)} characters)"
    return _clip(repr(value), limit)


def cap_problems(problems, limit=MAX_PROBLEMS):
    """
    The first ``limit`` problems, then "… and N more problems": a file with thousands of
    mistakes gets a short, readable report.
    """
    problems = list(problems)
    if len(problems) <= limit:
        return problems
    return problems[:limit] + [f"… and {len(problems) - limit} more problems"]
