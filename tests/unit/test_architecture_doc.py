"""docs/architecture.md is the newcomer's map: it names every shipped Salt module (execution,
state, runner, beacon and shared `_utils` module), and every module path it names exists. A new
module without a row, or a row left behind by a removed or renamed module, fails here."""

import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "architecture.md").read_text()
FOLDERS = ("_utils", "_modules", "_states", "_runners", "_beacons", "_pillar")


def shipped():
    return sorted(path for folder in FOLDERS for path in (REPO / folder).glob("*.py"))


def test_every_shipped_module_has_a_row():
    missing = [str(path.relative_to(REPO)) for path in shipped() if f"{path.name}`" not in DOC]
    assert missing == []


def test_every_module_path_the_map_names_exists():
    named = set(re.findall(r"`((?:%s)/[A-Za-z0-9_]+\.py)`" % "|".join(FOLDERS), DOC))
    assert named, "the map names no module path"
    gone = sorted(path for path in named if not (REPO / path).is_file())
    assert gone == []


def test_every_module_name_the_map_gives_exists_somewhere():
    names = set(re.findall(r"`(?:[A-Za-z_]+/)?(_?ccc_[a-z0-9_]+\.py)`", DOC))
    known = {path.name for path in shipped()} | {p.name for p in (REPO / "ccc_migrate").glob("*.py")}
    assert sorted(names - known) == []
