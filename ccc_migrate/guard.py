"""
One variable of an imported inventory is mapped, or refused alone. The mappers read the shapes
the original's roles read (a list of mappings for ``zfs_volumes``, a mapping of lists for
``compute_devices``...); a value of another shape (a list where a mapping belongs, a number
where a name belongs) would stop the whole migration with a traceback. ``mapped`` runs one
variable's mapping on a scratch copy of the tree: on success the copy is kept, otherwise the
tree and the report keep nothing of the attempt and the variable is reported ``refused``, by
name (never its value: it may be a secret). A variable that maps to nothing (an empty list) is
reported too, so the report accounts for every variable.
"""

import copy

import ccc_migrate_markers as markers

SILENT_REASON = "maps to nothing (empty): nothing migrated"
SHAPE_ERRORS = (AttributeError, TypeError, ValueError, KeyError, IndexError)
SHAPE_REASON = ("its value does not have the shape the original's roles read ({error}): left out "
                "(write it as the original's documentation shows)")


def _said(error):
    """The kind of mismatch without the value (``'list' object has no attribute 'get'``)."""
    text = str(error) if isinstance(error, (AttributeError, TypeError)) else type(error).__name__
    return text[:120]


def mapped(tree, report, source, key, step):
    """``step(scratch)`` maps variable ``key`` of ``source`` into a copy of ``tree`` (a ``ccc``
    mapping) and adds its report entries; returns its result, or True when it was refused."""
    scratch, mark = copy.deepcopy(tree), len(report.entries)
    try:
        result = step(scratch)
    except SHAPE_ERRORS as error:
        del report.entries[mark:]
        report.refused(source, markers.name(key), SHAPE_REASON.format(error=_said(error)))
        return True
    if len(report.entries) == mark:  # every variable is accounted for (``docker_networks: null`` maps to nothing)
        report.not_mapped(source, markers.name(key), SILENT_REASON)
    tree.clear()
    tree.update(scratch)
    return result
