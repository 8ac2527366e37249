"""Host-wide exclusive locks for test builders that two pytest-xdist workers (or two sessions) may
run at once: a cache fill, a daemon start, an image build. ``fcntl`` locks are released by the
kernel when their holder dies, so a killed test run never leaves a stale lock behind."""

import contextlib
import fcntl
import os
import pathlib

CACHE_DIR = pathlib.Path(os.environ.get("CCC_CACHE_DIR") or pathlib.Path.home() / ".cache" / "ccc-salt")


@contextlib.contextmanager
def exclusive(path):
    """Hold an exclusive lock on the file ``path`` (created, parents too) for the ``with`` body."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield path
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def cache_lock(name):
    """The lock guarding ``name`` in the test cache (``${CCC_CACHE_DIR:-~/.cache/ccc-salt}``)."""
    return exclusive(CACHE_DIR / f"{name}.lock")
