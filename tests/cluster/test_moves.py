"""Make-before-break moves on the live master + two minions harness: a move to a node whose
dockerd is down never loses the container; the user and the admin are told the truth; the move
completes by itself once that dockerd is back."""

import pathlib
import time

import pytest

from support.nodes import node_dockerd

from .conftest import managed_stacks
from .test_redeploy import settings_dir, state_apply_returns, wait_for

pytestmark = pytest.mark.docker

JUPYTER = "ana-jupyter"


def test_a_move_to_a_node_whose_docker_is_down_keeps_the_container(master, minions, dockerds, event_listener,
                                                                   cluster_storage):
    node1 = dockerds["node1"]
    assert JUPYTER in managed_stacks(node1)
    home = pathlib.Path(cluster_storage) / "shared" / "user_data" / "ana.novak@example.org" / "ana-main"
    (home / "before-move.txt").write_text("kept\n")
    dockerds["node2"].stop()
    try:
        path = settings_dir(cluster_storage, "ana.novak@example.org") / f"{JUPYTER}.yml"
        report = path.parent / f"{JUPYTER}.deploy"
        edited = time.time()
        path.write_text(f"{JUPYTER}:\n  DEPLOYMENT_NODES: [node2]\n")

        # node2's job fails for this container (counted, not "0 processed, 0 failed") ...
        def failed_on_node2():
            for event in state_apply_returns(event_listener, master, "node2", edited, JUPYTER):
                ret = event.data.get("return") or {}
                state = next((v for k, v in ret.items() if f"ccc-container-{JUPYTER}_" in k), None)
                summary = next((v for k, v in ret.items() if "ccc-containers-summary" in k), None)
                if state and state["result"] is False and summary and f"failed: {JUPYTER}" in summary["comment"]:
                    return state["comment"]
            return None
        comment = wait_for(failed_on_node2)
        assert comment and "Docker engine" in comment, comment
        # ... node1 keeps it running, and the user reads why.
        assert wait_for(lambda: "still running on node1" in report.read_text())
        assert "node2" in report.read_text()
        for _ in range(5):
            assert JUPYTER in managed_stacks(node1)
            time.sleep(1)
    finally:
        dockerds["node2"] = node_dockerd("node2")
    back = time.monotonic()
    # dockerd back: node2 starts it, then node1 removes its copy.
    assert wait_for(lambda: JUPYTER in managed_stacks(dockerds["node2"]), timeout=60)
    started = time.monotonic() - back
    assert wait_for(lambda: JUPYTER not in managed_stacks(node1), timeout=30)
    print(f"move completed {started:.1f} s after node2's dockerd answered")
    code = dockerds["node2"].client().containers.get(JUPYTER).exec_run(["cat", "/home/ana/before-move.txt"])
    assert code.output == b"kept\n"

    # Back to node1 (make-before-break the other way), so the other tests see the sample site.
    path.write_text(f"{JUPYTER}: {{}}\n")
    assert wait_for(lambda: JUPYTER in managed_stacks(node1) and JUPYTER not in managed_stacks(dockerds["node2"]),
                    timeout=60)
