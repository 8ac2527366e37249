"""A ccc-salt beacon loaded, and given the loader dunders, as a minion does, for unit tests
without a minion."""

import sys

import ccc_containers  # support.site puts _modules on sys.path

from support.scripts import REPO, load_module


def load_beacon(file_name, module_name):
    """Import ``_beacons/<file_name>`` as module ``module_name``. Its own name would clash with
    the execution module of the same name on sys.path. Salt puts ``_beacons/`` on sys.path while
    it loads a beacon, so the beacon imports its private helpers (``_ccc_*.py``) by name; it is
    appended here, so that nothing there shadows ``_modules/``."""
    folder = str(REPO / "_beacons")
    if folder not in sys.path:
        sys.path.append(folder)
    return load_module(f"_beacons/{file_name}", module_name)


def beacon_dunders(monkeypatch, beacon, *functions):
    """Give ``beacon`` an empty ``__context__``, node1's ``__opts__`` and an empty pillar, and a
    ``__salt__`` with the named real ``ccc_containers`` execution functions on that same pillar
    (beacons get shared data through them, as on a minion)."""
    pillar = {}
    monkeypatch.setattr(beacon, "__context__", {}, raising=False)
    monkeypatch.setattr(beacon, "__opts__", {"id": "node1"}, raising=False)
    monkeypatch.setattr(beacon, "__pillar__", pillar, raising=False)
    monkeypatch.setattr(ccc_containers, "__pillar__", pillar, raising=False)
    monkeypatch.setattr(ccc_containers, "__grains__", {"id": "node1"}, raising=False)
    monkeypatch.setattr(beacon, "__salt__", {f"ccc_containers.{name}": getattr(ccc_containers, name)
                                             for name in functions}, raising=False)
