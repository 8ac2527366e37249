"""A ccc-salt beacon's loader dunders as a minion gives them, for unit tests without a minion."""

import ccc_containers  # support.site puts _modules on sys.path


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
