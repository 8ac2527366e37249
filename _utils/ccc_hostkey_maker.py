"""
SSH host key sets made in child processes while a deploy runs.

RSA generation (``ccc_hostkeys.material``) holds Python's GIL for the whole key (about 0.13 s per
3072-bit key on a 2-core node), so made in the deploy's threads it stalls every other container's
Docker calls: 50 new stacks stalled a first deploy by seconds. A run that has stacks without a key
set (``missing``) forks a few workers before its threads start (a fork beside running threads can
copy a lock one of them holds) and each container's apply asks for its own set there, waiting
without the GIL. The keys come back over the pool's pipe (in memory, root's processes only) and
``ccc_hostkeys`` writes them exactly as before (fresh root-only folder, renamed into place).

A spare set made ahead (``ccc_hostkey_spares``) is used first: then nothing is generated at all.
Where no pool can be had (threads already running, as in a minion that runs its jobs in threads;
a worker that died) the set is generated in the calling thread, as before. Plain Python, used by
``ccc_deploy``.
"""

import concurrent.futures
import logging
import multiprocessing
import os
import threading

import ccc_hostkey_spares
import ccc_hostkeys

log = logging.getLogger(__name__)


def missing(sshd_data, root, stacks):
    """The ``stacks`` with neither a node copy here nor a shared set in the key store ``root``,
    by name (two directory reads): the sets an apply will likely generate. Only sizes the pool:
    a set found incomplete later is still made, in the calling thread."""
    local, shared = ccc_hostkeys.node_names(sshd_data), ccc_hostkeys.shared_names(root)
    return [stack for stack in stacks if stack not in local and stack not in shared]


def workers_for(count):
    """Key workers for ``count`` missing sets: half the CPUs at most (Docker needs the rest to
    create and start the containers), at least one."""
    return max(1, min(count, (os.cpu_count() or 2) // 2))


def for_run(cluster, stacks, test):
    """The ``Maker`` of a deploy of ``stacks``: spares of the key store first
    (``ccc_hostkey_spares``), workers for the sets they do not cover; none in test mode or when
    the key store is not usable (each apply reports that)."""
    try:
        root = None if test else ccc_hostkeys.store_root(cluster)
    except ValueError:
        root = None
    if root is None:
        return Maker(0)
    rsa_bits = (cluster.get("host_keys") or {}).get("rsa_bits", 3072)
    needed = len(missing(cluster["mount_points"]["local"]["sshd_data"], root, stacks))
    if needed:
        needed -= ccc_hostkey_spares.count(root, rsa_bits)
    return Maker(needed, root)


class Maker:
    """``maker(stack, rsa_bits)`` -> a key set (``ccc_hostkeys.material``): a spare of the key
    store ``root`` when there is one, else made in a forked worker when ``count`` (the sets
    expected to be made) started the pool, else here. ``close`` ends the workers."""

    def __init__(self, count, root=None):
        self._pool = None
        self._root = root
        if count < 1:
            return
        if threading.active_count() > 1:
            log.debug("threads are running: the %d host key set(s) are made in the deploy's threads", count)
            return
        try:
            pool = concurrent.futures.ProcessPoolExecutor(workers_for(count),
                                                          mp_context=multiprocessing.get_context("fork"))
            pool.submit(int).result()  # the fork context starts every worker now, before any thread
        except (OSError, concurrent.futures.process.BrokenProcessPool) as exc:
            log.warning("could not start host key workers (%s): the keys are made in the deploy's threads", exc)
            return
        self._pool = pool

    def __call__(self, stack, rsa_bits):
        spare = ccc_hostkey_spares.take(self._root, stack, rsa_bits) if self._root else None
        if spare is not None:
            return spare
        pool = self._pool
        if pool is not None:
            try:
                return pool.submit(ccc_hostkeys.material, stack, rsa_bits).result()
            except (concurrent.futures.process.BrokenProcessPool, RuntimeError) as exc:
                log.warning("host key worker failed (%s): making the keys of %s here", exc, stack)
        return ccc_hostkeys.material(stack, rsa_bits)

    def close(self):
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
