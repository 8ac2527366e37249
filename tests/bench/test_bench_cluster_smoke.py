"""The benchmarks on the live cluster harness of tests/cluster (a master and minions node1 and
node2 on their private dockerds) still run through their README command at their smallest size
and print their figures (tests/support/bench_smoke.py). Each run builds its own cluster, as the
bench does, on node1's and node2's dockerds: asking for them here puts this module in the group
of every module that drives them (tests/support/xdist_groups.py), never beside tests/cluster."""

import pytest

from support import bench_smoke

pytestmark = pytest.mark.docker


@pytest.mark.parametrize("smoke", bench_smoke.of_tier("cluster"), ids=lambda smoke: smoke.id)
def test_a_cluster_bench_prints_its_figures(smoke, node1_dockerd, node2_dockerd):
    bench_smoke.figures(smoke, bench_smoke.run(smoke, node1_url=node1_dockerd.url))
