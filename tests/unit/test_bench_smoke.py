"""Every benchmark stays runnable: the light ones (no Docker, a few seconds) run here at their
smallest size through their README command and must print their figures (tests/support/
bench_smoke.py); the heavy ones run in tests/bench/. Also: every script in bench/ has a smoke
run and a README row naming the flags its smoke run uses."""

import re
import subprocess
import sys

import pytest

from support import bench_smoke

README = (bench_smoke.BENCH / "README.md").read_text()


@pytest.mark.parametrize("smoke", bench_smoke.of_tier("light"), ids=lambda smoke: smoke.id)
def test_a_light_bench_prints_its_figures(smoke):
    bench_smoke.figures(smoke, bench_smoke.run(smoke))


def test_every_bench_has_a_smoke_run_in_a_tier_the_suite_runs():
    assert sorted({smoke.script for smoke in bench_smoke.SMOKES}) == bench_smoke.scripts()
    assert {smoke.tier for smoke in bench_smoke.SMOKES} <= {"light", "cluster", "docker", "node"}


@pytest.mark.parametrize("smoke", bench_smoke.SMOKES, ids=lambda smoke: smoke.id)
def test_the_readme_row_and_docstring_of_a_bench_name_the_flags_of_its_smoke_run(smoke):
    rows = [line for line in README.splitlines() if line.startswith(f"| `{smoke.script}")]
    assert len(rows) == 1, f"bench/README.md has no row (or several) for {smoke.script}"
    command = re.match(r"\| `([^`]*)`", rows[0]).group(1)
    flags = [arg for arg in smoke.args if arg.startswith("--")]
    assert [flag for flag in flags if not re.search(re.escape(flag) + r"\b", command)] == [], command
    smallest = re.search(r"^Smallest.*?(?:\n\n|\Z)", (bench_smoke.BENCH / smoke.script).read_text(), re.M | re.S)
    assert smallest, f"{smoke.script}: its docstring does not say its smallest size"
    sized = [f"{flag} {value}" for flag, value in zip(smoke.args, smoke.args[1:]) if flag.startswith("--")
             and not value.startswith("{")]
    assert [size for size in sized if size not in smallest.group(0).replace("\n", " ")] == [], smallest.group(0)


@pytest.mark.parametrize("script", [smoke.script for smoke in bench_smoke.of_tier("cluster")
                                    if "def test_" in (bench_smoke.BENCH / smoke.script).read_text()])
def test_a_bench_on_the_live_cluster_runs_in_this_checkouts_own_salt_factories_root(script):
    """Its pytest command resolves salt-factories' root fixture to tests/support/factories_root.py:
    otherwise its daemons run from the start scripts whichever checkout wrote ``/tmp/scripts``
    first (seen: the benches ran a CI clone's Salt, the ``-p`` plugin losing to salt-factories')."""
    sys.path.insert(0, str(bench_smoke.BENCH))
    try:
        import _harness
    finally:
        sys.path.remove(str(bench_smoke.BENCH))
    proc = subprocess.run([*_harness.pytest_command(bench_smoke.BENCH / script), "--fixtures-per-test"],
                          cwd=bench_smoke.REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    used = re.findall(r"^salt_factories_default_root_dir -- (\S+):\d+", proc.stdout, re.M)
    assert used and set(used) == {"tests/support/factories_root.py"}, proc.stdout[-3000:]
