"""tests/support/locks.py: a builder holding a lock keeps another process (an xdist worker) out
until it is done, and the lock file is created where the caller asks."""

import subprocess
import sys

from support import locks

# Tries the lock without waiting in another process; exit 0: got it, 1: held elsewhere.
TRY = """
import fcntl, sys
with open(sys.argv[1], "a") as handle:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.exit(1)
"""


def other_process_gets(path):
    return subprocess.run([sys.executable, "-c", TRY, str(path)]).returncode == 0


def test_a_held_lock_keeps_other_processes_out_until_released(tmp_path):
    path = tmp_path / "deep" / "build.lock"
    with locks.exclusive(path) as held:
        assert held == path and path.exists()
        assert not other_process_gets(path)
    assert other_process_gets(path)


def test_cache_locks_live_in_the_test_cache(monkeypatch, tmp_path):
    monkeypatch.setattr(locks, "CACHE_DIR", tmp_path)
    with locks.cache_lock("agent-wheels") as held:
        assert held == tmp_path / "agent-wheels.lock"
        assert not other_process_gets(held)
