"""Command line of the benchmarks written as a pytest test on the live cluster harness of
tests/cluster (master + minions node1 and node2): ``python bench/<script>.py [--size N ...]``.

Why a command of their own: run as plain ``pytest``, the project's ``addopts`` start two xdist
workers, and pytest shows nothing a worker's test prints, so the figures were lost. The script
runs pytest in one process (``-n 0``) with capture off (``-s``), the harness's fixtures loaded
(``-p cluster.conftest``), in this checkout's own salt-factories root (``bench/conftest.py``: the
suite's conftest is not loaded for a file outside ``tests/``).
Sizes reach the test module through the environment, as
``CCC_BENCH_<NAME>`` (the module reads them with ``size``), because pytest takes no options of
a test module's own."""

import argparse
import os
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
PREFIX = "CCC_BENCH_"


def _variable(name):
    return PREFIX + name.upper().replace("-", "_")


def size(sizes, name):
    """The value of size ``name`` for this run: the command line's (through the environment)
    or the default in ``sizes`` (``{name: (default, help)}``), of the default's type."""
    default = sizes[name][0]
    return type(default)(os.environ.get(_variable(name), default))


def main(script, doc, sizes):
    """Parse ``--<name> VALUE`` for each of ``sizes``, then run the bench's test(s) in ``script``
    under pytest, serially, printing as it goes; pytest's exit status is the script's."""
    parser = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    for name, (default, text) in sizes.items():
        parser.add_argument(f"--{name}", type=type(default), default=default, help=f"{text} (default {default})")
    args = parser.parse_args()
    env = dict(os.environ)
    env.update({_variable(name): str(getattr(args, name.replace("-", "_"))) for name in sizes})
    return subprocess.call(pytest_command(script), cwd=REPO, env=env)


def pytest_command(script):
    """The pytest command line that runs the bench's test(s) in ``script`` (run it in REPO)."""
    return [sys.executable, "-m", "pytest", str(script), "-p", "cluster.conftest", "-n", "0", "-s", "-q",
            "--show-capture=no", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning"]
