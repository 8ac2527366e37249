"""
The return of a ccc-salt state function: one shape for every state module in ``_states/``.

Private to the states (the leading underscore): Salt's loader skips ``_*.py`` files when it
lists state modules, ``saltutil.sync_states`` still copies them, and while it loads a state
module its folder is on ``sys.path``, so a state imports this by name.
"""


def result(name, outcome, changes, comment):
    """A state return: ``outcome`` is True, False or None (test mode: would change)."""
    return {"name": name, "result": outcome, "changes": changes, "comment": comment}
