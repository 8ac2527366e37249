"""The master-side runner picks exactly the nodes where an edited stack may run."""

import importlib.util
import pathlib

import pytest

from support.site import sample_ccc

REPO = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("ccc_runner", REPO / "_runners" / "ccc.py")
ccc_runner = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ccc_runner)

PILLARS = {node: {"ccc": sample_ccc(node)} for node in ("node1", "node2", "node3")}


@pytest.mark.parametrize("stack, expected", [
    ("ana-main", ["node1", "node2", "node3"]),     # researcher: allowed everywhere
    ("cene-thesis", ["node3"]),                    # student: node3 only
    ("dara-old", ["node3"]),                       # disabled stacks still name their nodes
    ("no-such-stack", []),
])
def test_targets_are_the_nodes_where_the_stack_may_run(stack, expected):
    assert ccc_runner.targets_for(PILLARS, stack) == expected


def test_allowed_nodes_include_the_container_exceptions():
    pillars = {node: {"ccc": dict(sample_ccc(node))} for node in ("node1", "node2", "node3")}
    for pillar in pillars.values():
        pillar["ccc"]["containers"] = [dict(c, ALLOWED_NODES=["node1"]) if c["STACK_NAME"] == "cene-thesis" else c
                                       for c in pillar["ccc"]["containers"]]
    assert ccc_runner.targets_for(pillars, "cene-thesis") == ["node1", "node3"]


def test_a_node_named_differently_from_its_minion_id_is_matched_by_name():
    pillar = {"ccc": dict(sample_ccc("node3"), node={"name": "node3"})}
    assert ccc_runner.targets_for({"gpu-box-17.lab": pillar}, "cene-thesis") == ["gpu-box-17.lab"]
