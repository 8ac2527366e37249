"""
The last accepted settings of every stack: ``<ccc:cluster:state_dir>/last-good/<STACK_NAME>.json``
in the shared state dir, root's (0600), written only after a settings file was accepted.

A rejected file keeps the container on these settings; the subdomains they claim count as taken
for every other stack (``ccc_subdomains.taken_subdomains``), so the planner reads them all once.
"""

import json
import os

import ccc_safefs

FOLDER = "last-good"


def read(path):
    """The settings stored at ``path``, ``None`` when there is none (or it is not JSON)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (FileNotFoundError, ValueError):
        return None


def read_all(cluster):
    """STACK_NAME -> last accepted settings, for every stack that has them."""
    directory = os.path.join(cluster["state_dir"], FOLDER)
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return {}
    return {name[:-5]: read(os.path.join(directory, name)) for name in names if name.endswith(".json")}


def store(path, settings):
    """Replace the copy at ``path`` when it differs; never below a missing storage root."""
    if read(path) == settings:
        return False
    state_root = os.path.dirname(os.path.dirname(os.path.dirname(path)))
    ccc_safefs.replace_file(path, json.dumps(settings, sort_keys=True).encode(), 0o600, root=state_root)
    return True
