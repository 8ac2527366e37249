"""
State ``ccc_nfs.mounted``: one shared NFS mount of the nfs_storage role, in ``/etc/fstab`` and
mounted now, remounted when its options change.

A server that does not answer, a mount that fails or a mount point that holds something else is
a failure of this state with the reason; nothing is ever unmounted, and the export is never made
as a local folder (``ccc_nfs.mount`` makes only the empty mount point).
"""

import ccc_nfs
import _ccc_state_ret as ccc_state_ret
from salt.exceptions import CommandExecutionError

__virtualname__ = "ccc_nfs"


def __virtual__():
    return __virtualname__


def _differs(mount, source, fstype, options):
    """What stands between the kernel's ``mount`` at the path and the wanted one: ``(remountable
    options missing, problem that a remount cannot fix)``."""
    if mount is None:
        return [], None
    if not ccc_nfs.is_kind(mount, fstype):
        return [], f"a {mount['fstype']} file system ({mount['source']}) is mounted there, not {source}; unmount it first"
    if mount["source"].rstrip("/") != source.rstrip("/"):
        return [], f"{mount['source']} is mounted there, not {source}; unmount it first (nothing is unmounted for you)"
    return ccc_nfs.options_missing(options, set(mount["options"])), None


def mounted(name, source, fstype="nfs", options=None, timeout=10):
    """
    ``source`` (``server:/export``) mounted at ``name`` with ``options`` and in ``/etc/fstab``.
    ``timeout``: seconds the server gets to answer before the mount is refused.
    """
    options = list(options or ["defaults"])
    test = bool(__opts__.get("test"))
    changes = {}
    try:
        fstab = __salt__["ccc_nfs.fstab_set"](name, source, fstype, options, test=test)
        if fstab:
            changes["fstab"] = fstab
        current = __salt__["ccc_nfs.active"](name)
        missing, problem = _differs(current, source, fstype, options)
        if problem:
            return ccc_state_ret.result(name, False, changes, f"{name}: {problem}")
        if current is not None and not missing:
            return ccc_state_ret.result(name, None if (test and changes) else True, changes,
                                        f"{name}: {source} is mounted" + (", fstab entry set" if changes else ""))
        remount = bool(missing)
        action = f"remounted for {', '.join(missing)}" if remount else f"mounted from {source}"
        if test:  # the server is asked only by a real run (test mode contacts nothing)
            changes["mount"] = f"would be {action}"
            return ccc_state_ret.result(name, None, changes, f"{name}: would be {action} (if the server answers)")
        unreachable = __salt__["ccc_nfs.probe"](ccc_nfs.SOURCE.match(source).group("server").strip("[]"), timeout)
        if unreachable:
            return ccc_state_ret.result(name, False, changes, f"{name}: not mounted: {unreachable}")
        __salt__["ccc_nfs.mount"](name, source, fstype, options, remount=remount)
    except CommandExecutionError as exc:
        return ccc_state_ret.result(name, False, changes, f"{name}: not mounted: {exc}")
    changes["mount"] = action
    now = __salt__["ccc_nfs.active"](name)
    still, problem = _differs(now, source, fstype, options)
    if now is None or problem or still:
        why = problem or (f"the kernel does not show {', '.join(still)} after the remount (an NFS remount cannot "
                          "change it: unmount and mount it when nothing uses it)" if still else "it is not mounted afterwards")
        return ccc_state_ret.result(name, False, changes, f"{name}: {why}")
    return ccc_state_ret.result(name, True, changes, f"{name}: {action}")
