"""The benchmarks' smoke runs: every script in bench/ at its smallest size, run through the command
bench/README.md gives for it (``python bench/<script> [flags]``, this interpreter being the
project's ``.venv``), and the figure lines it must print. A bench is not a test (no figure passes
or fails), but one that no longer starts, crashes on its way or stops printing its figures is
broken, and nothing else would notice.

``SMOKES``: one entry per run (a script may have two), with its tier: ``light`` (a few seconds,
no Docker; tests/unit/test_bench_smoke.py), ``cluster`` (the live master and minions of
tests/cluster on node1's and node2's dockerds; tests/bench/test_bench_cluster_smoke.py),
``docker`` (a private dockerd of its own, or root; tests/bench/test_bench_docker_smoke.py) and
``node`` (a systemd test node that sets the host's inotify sysctls;
tests/bench/test_bench_node_smoke.py). ``{node1_url}`` in a flag is node1's test dockerd."""

import dataclasses
import math
import pathlib
import re
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"
NUMBER = r"(-?\d+(?:\.\d+)?)"


@dataclasses.dataclass(frozen=True)
class Smoke:
    script: str
    args: tuple
    tier: str
    figures: tuple  # regexes (``{n}`` for a number), each must match a line of the output
    timeout: int = 120

    @property
    def id(self):
        return self.script.removesuffix(".py") + ("" if not self.args else "[" + " ".join(self.args) + "]")


def _lines(*patterns):
    return tuple(pattern.replace("{n}", NUMBER) for pattern in patterns)


SMOKES = (
    Smoke("beacon_scale.py", ("--files", "10", "--calls", "100", "--idle-seconds", "1"), "light", _lines(
        r"^{n} watched settings files",
        r"^idle call \(every second\) +{n} ms wall +{n} ms CPU",
        r"^idle average incl\. the 30 s work +{n} ms CPU per s",
        r"^dispatch thread at idle +{n} ms CPU per s",
        r"^one edit: write -> fired +{n} ms")),
    Smoke("settings_cost.py", ("--repeats", "1"), "light", _lines(
        r"^billion-laughs +{n} +{n}/{n} +{n}/{n} +rejected",
        r"^worst case: {n} ms")),
    Smoke("gpu_exporter_scrape.py", ("--scrapes", "1"), "light", _lines(
        r"^GPU exporter scrape: 8 fake GPUs, 100 GPU processes in 25 containers, 1 scrapes; exposition {n} bytes",
        r"^server-side collection \(scrape_duration metric\) +p50 +{n} ms +p95 +{n} ms",
        r"^HTTP scrape wall time \(client side\) +p50 +{n} ms",
        r"^generate_latest in process: CPU +p50 +{n} ms")),
    Smoke("netstats_sockets.py", ("--fake", "1000"), "light", _lines(
        r"^fake: 1000 lines \({n} MiB\) in net/tcp: \{'wall_s': {n}, 'traced_peak_mib': {n}, .*'ssh_peers': 3,")),
    Smoke("runner_scale.py", ("--minions", "2", "--stacks", "2", "--edits", "20", "--repeat", "1"), "light", _lines(
        r"^ +2 +2 +{n} +{n} +{n} .*\bindex$",  # minions, stacks, index build, ccc.targets, the edit (ms)
        r"^one node's file \(gpu001\.lab\) +{n} +1 +1$",
        r"^ +20 +{n} +2 +2 +{n} +{n}$")),
    Smoke("netstats_sockets.py", ("--real", "20"), "docker", _lines(
        r"^real: 20 sockets, /proc/\d+/net/tcp has {n} lines: \{'wall_s': {n}, .*'ssh_peers': 3,")),
    Smoke("containers_apply.py", ("1",), "docker", _lines(
        r"^ +1 +{n}s +{n} ms +{n}s +{n}s +{n} ms +{n}s +{n}s +{n}s +{n}$"), timeout=600),  # N, first deploy, its
    # per container, no-op wall, states, per container, salt-call floor, state floor, Docker floor, ratio
    Smoke("docker_beacon_cost.py", ("--docker-url", "{node1_url}", "--polls", "100"), "cluster", _lines(
        r"^EngineWatcher\.poll +{n} µs CPU, +{n} µs wall per idle poll",
        r"^beacon\(\) from pillar +{n} µs CPU, +{n} µs wall per idle poll")),
    Smoke("redeploy_latency.py", ("--edits", "1", "--moves", "1"), "cluster", _lines(
        r"^edit  0: {n} s",
        r"^write -> beacon event +{n} +{n} +{n} +1$",
        r"^edit -> recreated +n= 1 +p50 {n} s +p95 {n} s +max {n} s",
        r"^(?:node move|move: old gone) +n= 1 +p50 {n} s +p95 {n} s +max {n} s"), timeout=600),
    Smoke("redeploy_storm.py", ("--saves", "3", "--tail", "0"), "cluster", _lines(
        r"^node1: {n} settings events, {n} redeploy jobs for ana-main \(at most {n} queued or running at once, "
        r"{n} held back\)",
        r"^last save -> container running with the last value: {n} s"), timeout=600),
    Smoke("minion_idle_cpu.py", ("--files", "10", "--settle", "0", "--measure", "2"), "cluster", _lines(
        r"^10 extra watched settings files per node, ccc_docker beacon on, {n} s idle, {n} jobs meanwhile",
        r"^node1: {n} CPU s in {n} s = {n} % of one core \({n} ms per s\); beacons: ccc_docker ccc_settings;",
        r"^node2: {n} CPU s in {n} s = {n} % of one core \({n} ms per s\); beacons: ccc_docker ccc_settings;"),
          timeout=600),
    Smoke("minion_apply.py", ("--containers", "1", "--repeat", "1"), "cluster", _lines(
        r"^ +1 +{n}s +{n}s +{n}s +{n}s +{n}s$",  # N, no-op through the minion, its states, deploy_many, the floors
        r"^states by function: .*\bccc_container\.deployed {n} ms"), timeout=600),
    Smoke("soak.py", ("--minutes", "0.2", "--seed", "1", "--kinds", "edit"), "cluster", _lines(
        r"^soak seed 1: {n} s, {n} steps",
        r"^edits: \{.*\}$",  # none in 12 s of this seed: the first step comes later
        r"^  start: \{'n': {n}, 'max': {n}, 'median': {n}",
        r"^violations: 0$"), timeout=600),
    Smoke("cluster_apply.py", ("--runs", "1"), "node", _lines(
        r"^fresh node: {n} s wall, {n} states changed",
        r"^no-op re-run \(best of 1\): {n} s wall, 0 states changed",
        r"^docker +{n} +{n}$"), timeout=900),
)


def of_tier(tier):
    return [smoke for smoke in SMOKES if smoke.tier == tier]


def scripts():
    """The benchmarks: every script in bench/ (``_name.py`` are their shared helpers,
    ``conftest.py`` the fixtures of those that are pytest tests underneath)."""
    return sorted(path.name for path in BENCH.glob("*.py") if not path.name.startswith("_")
                  and path.name != "conftest.py")


def run(smoke, **values):
    """Run the bench's command; returns the completed process (stdout and stderr as text)."""
    args = [arg.format(**values) for arg in smoke.args]
    return subprocess.run([sys.executable, str(BENCH / smoke.script), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=smoke.timeout)


def figures(smoke, completed):
    """The numbers of each figure line the bench must print (``{pattern: [float, ...]}``);
    fails with the output's tail when the bench failed or a line is missing or not a number."""
    tail = f"\n--- stdout ---\n{completed.stdout[-4000:]}\n--- stderr ---\n{completed.stderr[-4000:]}"
    assert completed.returncode == 0, f"{smoke.id} exited {completed.returncode}{tail}"
    found, missing = {}, []
    for pattern in smoke.figures:
        match = re.search(pattern, completed.stdout, re.MULTILINE)
        if match is None:
            missing.append(pattern)
            continue
        found[pattern] = [float(group) for group in match.groups()]
        assert all(math.isfinite(value) for value in found[pattern]), (pattern, match.group(0))
    assert not missing, f"{smoke.id} did not print {missing}{tail}"
    assert found, f"{smoke.id}: no figure lines to check"
    return found
