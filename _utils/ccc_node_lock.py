"""
One lock per node around everything that changes its compute containers.

Why: state runs are serialised by Salt's state queue (every ``state.apply`` the master sends is
queued), but the fast redeploy of one stack after a settings edit (``ccc_docker.redeploy``) is an
execution function, which that queue does not see. Without a lock of its own it could recreate a
container while a full reconcile was recreating the same one. The lock is an ``flock`` on a file
in the minion's cachedir (root's, never a user path), held by each ``ccc_docker`` function that
changes containers or mounts for as long as it acts; the kernel drops it when the process dies,
so a killed job never leaves a node locked.
"""

import contextlib
import fcntl
import os

LOCK_NAME = "ccc-containers.lock"


@contextlib.contextmanager
def held(cachedir):
    """Hold the node's container lock (waiting for the process that holds it)."""
    os.makedirs(cachedir, mode=0o700, exist_ok=True)
    fd = os.open(os.path.join(cachedir, LOCK_NAME), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
