"""
Execution module ``ccc_zfs``: the zfs role's checked plan and what the node's ``zpool``, ``zfs``
and ``blkid`` say (rules in ``_utils/ccc_zfs.py``).

Every command runs as an argument list (never a shell), and ``change`` runs only the four
commands the role may run: ``zpool create`` (never ``-f``), ``zpool set``, ``zfs create`` and
``zfs set``. Anything else, ``destroy`` and ``labelclear`` above all, is refused here too.
"""

import os
import shutil
import subprocess

import ccc_pillar
import ccc_role_settings
import ccc_zfs
from salt.exceptions import CommandExecutionError

__virtualname__ = "ccc_zfs"

ALLOWED = {("zpool", "create"), ("zpool", "set"), ("zfs", "create"), ("zfs", "set")}
SYS_BLOCK = "/sys/class/block"


def __virtual__():
    return __virtualname__


def _run(argv, check=True):
    """``(returncode, stdout, stderr)`` of ``argv``; ``CommandExecutionError`` when it cannot
    run, or (``check``) when it fails."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CommandExecutionError(f"{' '.join(argv[:2])} could not run: {exc}") from exc
    if check and proc.returncode:
        raise CommandExecutionError(f"{' '.join(argv)} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[:500]}")
    return proc.returncode, proc.stdout, proc.stderr


def plan(settings=None):
    """
    What the zfs role manages on this node: ``ccc:zfs`` checked (``ccc_zfs.plan``), with dataset
    ``mount_point`` keys resolved through ``ccc:cluster:mount_points:local``.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_zfs.plan
    """
    settings, schema = ccc_role_settings.given("zfs", settings, __pillar__, __salt__["cp.get_file_str"])
    cluster = ccc_pillar.cluster_settings(ccc_pillar.pillar_ccc(__pillar__))
    local = (cluster.get("mount_points") or {}).get("local") or {}
    return ccc_zfs.plan(settings, schema, local)


def tools():
    """Whether ``zpool``, ``zfs`` and ``blkid`` are on this node's PATH (zfsutils-linux installed).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_zfs.tools
    """
    return all(shutil.which(name) for name in ("zpool", "zfs", "blkid"))


def pools():
    """The imported pools and their health (``zpool list -H -p``).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_zfs.pools
    """
    return ccc_zfs.parse_pool_list(_run(["zpool", "list", "-H", "-p", "-o", "name,health"])[1])


def layout(pool):
    """The vdev tree of ``pool`` from ``zpool status -P`` (full device paths).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_zfs.layout scratch
    """
    try:
        return ccc_zfs.parse_status(_run(["zpool", "status", "-P", "--", pool])[1], pool)
    except ValueError as exc:
        raise CommandExecutionError(str(exc)) from exc


def identify(path):
    """A device path's identities: the resolved path and, for a partition, its whole disk
    (``/sys/class/block/<name>/partition`` exists for partitions).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_zfs.identify /dev/disk/by-id/ata-EXAMPLE-part1
    """
    if not path.startswith("/"):
        return [path]  # a vdev zpool status names by GUID (its device is gone): no file to resolve
    real = os.path.realpath(path)
    found = [real]
    name = os.path.basename(real)
    if real.startswith("/dev/") and os.path.exists(os.path.join(SYS_BLOCK, name, "partition")):
        parent = os.path.basename(os.path.realpath(os.path.join(SYS_BLOCK, name, "..")))
        found.append(f"/dev/{parent}")
    return found


def probe(disk):
    """Why ``disk`` must not go into a new pool (``blkid -p`` low-level probe: any ZFS label,
    file system, partition table, RAID/LVM signature), or None when it is blank.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_zfs.probe /dev/sdb
    """
    if not os.path.exists(disk):
        return f"disk {disk} does not exist on this node"
    code, out, _ = _run(["blkid", "-p", "-o", "export", "--", disk], check=False)
    return ccc_zfs.probe_verdict(disk, code, out)


def datasets(pool):
    """The file systems and volumes of ``pool`` (``zfs list -H -r``).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_zfs.datasets scratch
    """
    return ccc_zfs.parse_name_list(_run(["zfs", "list", "-H", "-o", "name", "-t", "filesystem,volume", "-r", "--", pool])[1])


def get(kind, target, names):
    """Property values of a dataset (``kind`` zfs) or a pool (zpool), ``-H -p`` (bytes as numbers).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_zfs.get zfs scratch/hdd '["recordsize", "compression"]'
    """
    if kind not in ("zfs", "zpool") or not names:
        return {}
    return ccc_zfs.parse_get(_run([kind, "get", "-H", "-p", "-o", "property,value", ",".join(names), target])[1])


def change(argv):
    """Run one of the role's changing commands (``zpool create``/``set``, ``zfs create``/``set``);
    refuses every other command and any ``-f``, whoever asks.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_zfs.change '["zfs", "set", "atime=off", "scratch"]'
    """
    argv = [str(word) for word in argv]
    if tuple(argv[:2]) not in ALLOWED or any(word in ("-f", "--force") or word.startswith("-f") for word in argv[2:]):
        raise CommandExecutionError(f"ccc_zfs refuses to run {' '.join(argv)}: the zfs role only creates and sets properties")
    return _run(argv)[1]
