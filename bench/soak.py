#!/usr/bin/env python3
"""Benchmark: the fault soak (issue 22), for as long as asked, with any seed.

Uses the same cluster as tests/cluster (salt-master + 2 minions, a private dockerd per node,
shared storage) and plays tests/support/soak.py's seeded mix of user edits, admin pillar changes
and faults (dockerd SIGKILL, a minion SIGKILLed in a recreate, the master stopped, a broken
pillar file, the user-data share gone, a crash loop), checking every invariant throughout.
Prints each step, each violation with its seed and step, and the figures: faults injected,
edits, the longest unavailability of each stack, the time to quiet per step kind. Exits 1 when
an invariant was violated. The suite's short version is tests/cluster/test_soak.py.

    .venv/bin/python bench/soak.py --minutes 30 [--seed N] [--kinds edit,dockerd_kill,...]

Smallest (the suite's smoke test of this command): ``--minutes 0.2 --seed 1 --kinds edit``.
"""

import argparse
import json
import os
import pathlib
import random
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import _harness  # noqa: E402


def test_soak(master, minions, dockerds, cluster_storage, overrides_root):
    from cluster.conftest import MOVE_WINDOW
    from support.soak import Soak, format_figures

    settings = json.loads(os.environ["CCC_SOAK"])
    soak = Soak(master, minions, dockerds, cluster_storage, overrides_root, seed=settings["seed"],
                duration=settings["minutes"] * 60, move_window=MOVE_WINDOW, kinds=settings["kinds"],
                max_outage=settings["max_outage"], log=lambda line: print(line, flush=True))
    figures = soak.run()
    print("\n" + format_figures(figures), flush=True)
    if settings["json"]:
        pathlib.Path(settings["json"]).write_text(json.dumps(figures, indent=1))
    assert not figures["violations"], f"{len(figures['violations'])} violation(s), seed {settings['seed']}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30, help="how long steps are played (default 30)")
    parser.add_argument("--seed", type=int, default=None, help="the mix's seed (default: a random one, printed)")
    parser.add_argument("--kinds", default=None, help="comma-separated step kinds (default: all)")
    parser.add_argument("--max-outage", type=int, default=70, help="s the master is stopped at most")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**6)
    print(f"soak: seed {seed}, {args.minutes} min", flush=True)
    settings = {"seed": seed, "minutes": args.minutes, "kinds": args.kinds.split(",") if args.kinds else None,
                "max_outage": args.max_outage, "json": args.json}
    return subprocess.call(_harness.pytest_command(__file__), cwd=REPO,
                           env=dict(os.environ, CCC_SOAK=json.dumps(settings)))


if __name__ == "__main__":
    sys.exit(main())
