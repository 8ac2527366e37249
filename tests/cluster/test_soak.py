"""The fault soak, short (issue 22; tests/support/soak.py): about two minutes of a seeded mix of
user edits (valid, invalid, bursts, moves, a crash loop), admin pillar changes and faults
(dockerd SIGKILLed, a minion SIGKILLed in the middle of a recreate, the master stopped, a broken
pillar file, the user-data share gone) on the live harness, every invariant checked throughout
and after each step. Each violation is listed with the seed and the step that replays it:
``bench/soak.py --seed N`` plays the same mix for longer."""

import pytest

from support.soak import Soak, format_figures, format_violation

from .conftest import MOVE_WINDOW

pytestmark = pytest.mark.docker

SEED = 116  # its first steps: a minion killed in a recreate, the master stopped after a save, a save, dockerd killed in a recreate
DURATION = 75  # s of steps; the quiet waits after the last one and the teardown come on top
MAX_OUTAGE = 20  # s the master is stopped at most (the long soak: 70)


def test_a_short_fault_soak_keeps_every_invariant(master, minions, dockerds, cluster_storage, overrides_root):
    soak = Soak(master, minions, dockerds, cluster_storage, overrides_root, seed=SEED, duration=DURATION,
                move_window=MOVE_WINDOW, max_outage=MAX_OUTAGE)
    figures = soak.run()
    print("\n" + format_figures(figures))
    assert figures["steps"] > 2 and sum(figures["faults"].values()) >= 1, figures
    assert not figures["violations"], "\n".join(format_violation(entry) for entry in figures["violations"])
