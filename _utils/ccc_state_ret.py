"""
The return of a ccc-salt state function: one shape for every state module in ``_states/``.
"""


def result(name, outcome, changes, comment):
    """A state return: ``outcome`` is True, False or None (test mode: would change)."""
    return {"name": name, "result": outcome, "changes": changes, "comment": comment}
