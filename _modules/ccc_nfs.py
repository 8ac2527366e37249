"""
Execution module ``ccc_nfs``: the nfs_storage role's checked mounts and the node side of
mounting them: the mount table, a bounded "does the server answer" probe, ``mount`` and
``/etc/fstab`` (rules in ``_utils/ccc_nfs.py``).
"""

import os
import socket
import subprocess

import ccc_nfs
import ccc_pillar
import ccc_role_settings
import ccc_safefs
from salt.exceptions import CommandExecutionError

__virtualname__ = "ccc_nfs"

MOUNTINFO = "/proc/self/mountinfo"
FSTAB = "/etc/fstab"


def __virtual__():
    return __virtualname__


def mounts(settings=None):
    """
    The shared mounts of this node, checked: ``{"problems": [...], "mounts": [{key, path,
    source, server, fstype, options}]}`` (``fsc`` added when the cachefilesd role is on here).
    ``settings``: the role's merged settings (default: through ``ccc_cluster.role_settings``).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_nfs.mounts
    """
    settings, schema = ccc_role_settings.given("nfs_storage", settings, __pillar__, __salt__["cp.get_file_str"])
    cluster = ccc_pillar.cluster_settings(ccc_pillar.pillar_ccc(__pillar__))
    checked, problems = ccc_nfs.check(settings, cluster, schema, ccc_role_settings.enabled("cachefilesd", __pillar__))
    return {"problems": problems, "mounts": checked}


def active(path):
    """
    What the kernel has mounted at ``path`` (``{mount_point, fstype, source, options}``), or
    None when ``path`` is no mount point.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_nfs.active /data/shared/user_data
    """
    with open(MOUNTINFO, encoding="utf-8", errors="surrogateescape") as handle:
        found = ccc_nfs.mount_at(ccc_nfs.parse_mountinfo(handle.read()), path)
    return None if found is None else dict(found, options=sorted(found["options"]))


def probe(server, timeout=10):
    """
    None when ``server`` accepts a TCP connection on the NFS port within ``timeout`` seconds,
    else why not (a mount of a dead server would hang; a failed one would leave a plain folder).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_nfs.probe nas.example.org
    """
    try:
        with socket.create_connection((server, ccc_nfs.NFS_PORT), timeout=float(timeout)):
            return None
    except socket.timeout:
        return f"NFS server {server} does not answer on port {ccc_nfs.NFS_PORT} within {timeout} s"
    except OSError as exc:
        return f"NFS server {server} cannot be reached on port {ccc_nfs.NFS_PORT}: {exc.strerror or exc}"


def mount(path, source, fstype, options, remount=False, timeout=60):
    """
    Mount ``source`` at ``path`` (``remount``: apply ``options`` to the mount there); raises
    ``CommandExecutionError`` with mount's own error. The mount point is made when missing
    (root's, 0755); the export is never created here.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_nfs.mount /data/shared/user_data nas:/export/users nfs '[auto, fsc]'
    """
    if isinstance(options, str):
        options = options.split(",")
    if remount:
        command = ["mount", "-o", ",".join(["remount"] + list(options)), path]
    else:
        os.makedirs(path, mode=0o755, exist_ok=True)
        command = ["mount", "-t", fstype, "-o", ",".join(options), source, path]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise CommandExecutionError(f"{' '.join(command)} did not finish within {timeout} s") from None
    except OSError as exc:
        raise CommandExecutionError(f"cannot run mount: {exc}") from exc
    if done.returncode:
        said = " ".join((done.stderr or done.stdout or "").split())[:400]
        raise CommandExecutionError(f"{' '.join(command)} failed (exit {done.returncode}): {said}")
    return True


def fstab_set(path, source, fstype, options, test=False):
    """
    Make ``path``'s ``/etc/fstab`` entry the given one (others for that path go). Returns
    ``{"old": [old entries], "new": entry}`` when it changed (or would, with ``test``), else {}.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_nfs.fstab_set /data/shared/user_data nas:/export/users nfs '[auto, fsc]' test=True
    """
    if isinstance(options, str):
        options = options.split(",")
    wanted = {"path": os.path.normpath(path), "source": source, "fstype": fstype, "options": list(options)}
    try:
        with open(FSTAB, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        text = ""
    new, old = ccc_nfs.fstab_update(text, wanted)
    if new == text or new == text + "\n":
        return {}
    if not test:
        try:  # whole or not at all: a half-written fstab breaks the next boot
            ccc_safefs.replace_file(FSTAB, new.encode("utf-8"), 0o644)
        except OSError as exc:
            raise CommandExecutionError(f"{FSTAB} could not be written ({exc}); it is unchanged") from None
    return {"old": old, "new": ccc_nfs.fstab_line(wanted)}
