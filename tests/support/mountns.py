"""Real mounts in throw-away mount namespaces, so an attack on the mount code can be played for
real without touching the host's mounts.

``in_private_namespace`` runs a test body in a forked child with its own mount namespace: every
mount there is made private first (nothing reaches the host, nothing of it outlives the child),
then ``/`` is made shared again with a peer group of its own, so that a propagation change on
``/`` is visible to the test. ``as_user`` runs the user's move in a further namespace where the
pin tmpfs is gone: the way a user renames a mount point from a container of theirs that does
not have that mount (in a namespace that has it, rename answers EBUSY)."""

import ctypes
import os
import traceback

CLONE_NEWNS = 0x20000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MS_SHARED = 1 << 20
MNT_DETACH = 2

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p)
_libc.umount2.argtypes = (ctypes.c_char_p, ctypes.c_int)


def _check(result, what):
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _own_namespace():
    _check(_libc.unshare(CLONE_NEWNS), "unshare")
    _check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make / rprivate")


def umount(path):
    """Detach a mount by name (test code only: the paths here are the test's own)."""
    _check(_libc.umount2(str(path).encode(), MNT_DETACH), f"umount {path}")


def _forked(body, setup):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        status = 1
        try:
            os.close(read)
            setup()
            body()
            status = 0
        except BaseException:  # noqa: BLE001 - everything goes back to the parent
            os.write(write, traceback.format_exc().encode())
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        output = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert status == 0, output or f"child ended with status {status}"


def in_private_namespace(body):
    """Run ``body`` in a forked child with its own mount namespace; its failure fails the test."""

    def setup():
        _own_namespace()
        _check(_libc.mount(None, b"/", None, MS_SHARED, None), "make / shared")

    _forked(body, setup)


def as_user(binds_dir, action):
    """Run ``action`` (the user's renames) where the pin tmpfs at ``binds_dir`` is not mounted."""

    def setup():
        _own_namespace()
        umount(binds_dir)

    _forked(action, setup)
