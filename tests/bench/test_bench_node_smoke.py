"""The benchmark on a systemd test node (``state.apply cluster`` on a fresh node) still runs
through its README command at its smallest size and prints its figures (tests/support/
bench_smoke.py). It sets the host's inotify sysctls as the node asks: tests/support/
xdist_groups.py runs this module in the group of the others that do."""

import pytest

from support import bench_smoke

pytestmark = pytest.mark.docker


@pytest.mark.parametrize("smoke", bench_smoke.of_tier("node"), ids=lambda smoke: smoke.id)
def test_a_node_bench_prints_its_figures(smoke):
    bench_smoke.figures(smoke, bench_smoke.run(smoke))
