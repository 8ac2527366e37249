"""The pytest-xdist grouping (tests/support/xdist_groups.py): tests that share a fixture or a host
resource must land in one worker, or two workers boot the same test node or drive the same dockerd."""

import types

from support import xdist_groups


def item(module, *fixtures):
    """A stand-in for a collected test: its node id and its fixture closure."""
    return types.SimpleNamespace(nodeid=f"{module}::test_x", fixturenames=["request", *fixtures])


def test_the_cluster_and_every_module_on_the_node_dockerds_share_one_group():
    items = [item("tests/cluster/test_redeploy.py", "master", "minions"),
             item("tests/cluster/test_moves.py", "dockerds"),
             item("tests/integration/test_ssh_login.py", "tmp_path"),  # the module's other test uses node1
             item("tests/integration/test_ssh_login.py", "clean_node1", "node1_dockerd"),
             item("tests/integration/test_swap_faults.py", "node2_dockerd")]
    groups = xdist_groups.groups_of(items)
    assert set(groups.values()) == {"node-dockerds"}
    assert len(groups) == 4


def test_other_modules_are_groups_of_their_own():
    items = [item("tests/nodes/test_swarm.py", "sysnodes"), item("tests/nodes/test_swarm.py", "sysnodes"),
             item("tests/nodes/test_patroller.py", "sysnodes"),
             item("tests/integration/test_docker_firewall_netns.py", "tmp_path"),
             item("tests/agents/test_gpu.py", "agents_dockerd")]
    assert xdist_groups.groups_of(items) == {
        "tests/nodes/test_swarm.py": "tests/nodes/test_swarm.py",
        "tests/nodes/test_patroller.py": "tests/nodes/test_patroller.py",
        "tests/integration/test_docker_firewall_netns.py": "tests/integration/test_docker_firewall_netns.py",
        "tests/agents/test_gpu.py": "tests/agents/test_gpu.py",
    }


def test_the_modules_changing_host_sysctls_share_a_group():
    items = [item("tests/nodes/test_host_roles.py", "sysnodes"), item("tests/nodes/test_cluster.py", "sysnodes")]
    assert set(xdist_groups.groups_of(items).values()) == {"host-sysctl"}


def test_the_acceptance_tier_is_one_group():
    items = [item("tests/acceptance/test_journey.py", "sysnodes", "master"),
             item("tests/acceptance/test_journey.py", "minions")]
    assert xdist_groups.groups_of(items) == {"tests/acceptance/test_journey.py": "acceptance"}


def test_the_controller_reads_what_the_workers_wrote(tmp_path):
    items = [item("tests/cluster/test_moves.py"), item("tests/nodes/test_swarm.py")]
    xdist_groups.write_groups(tmp_path, "gw0", items)
    xdist_groups.write_groups(tmp_path, "gw1", items)
    assert xdist_groups.read_groups(tmp_path) == {"tests/cluster/test_moves.py": "node-dockerds",
                                                  "tests/nodes/test_swarm.py": "tests/nodes/test_swarm.py"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gw0.json", "gw1.json"]  # no scratch file left
