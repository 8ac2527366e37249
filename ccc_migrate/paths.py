"""
Pillar paths for the migration: ``put`` a value at ``"cluster:apps"`` style paths of a ``ccc``
tree, and name them as the report shows them (``ccc:cluster:apps``).
"""


def put(tree, path, value):
    """Set ``value`` at the colon-separated ``path`` of ``tree`` (mappings made on the way)."""
    parts = path.split(":")
    for part in parts[:-1]:
        tree = tree.setdefault(part, {})
    tree[parts[-1]] = value


def get(tree, path, default=None):
    """The value at ``path`` of ``tree`` or ``default``."""
    for part in path.split(":"):
        if not isinstance(tree, dict) or part not in tree:
            return default
        tree = tree[part]
    return tree


def shown(path, where="site"):
    """A pillar path as the report names it: ``ccc:<path>`` and the file it is written to."""
    return f"ccc:{path} ({where})"
