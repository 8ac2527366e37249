"""The benchmarks that start a private dockerd of their own (``bench``) or need root still run
through their README command at their smallest size and print their figures
(tests/support/bench_smoke.py)."""

import pytest

from support import bench_smoke

pytestmark = pytest.mark.docker


@pytest.mark.parametrize("smoke", bench_smoke.of_tier("docker"), ids=lambda smoke: smoke.id)
def test_a_docker_bench_prints_its_figures(smoke):
    bench_smoke.figures(smoke, bench_smoke.run(smoke))
