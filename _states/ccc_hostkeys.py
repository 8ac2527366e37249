"""
State module ``ccc_hostkeys`` (the sshd_hostkeys role): ``backed_up`` keeps root-only tar
copies of the shared SSH host key sets on this node, writing one only when the sets changed;
``node_copies_current`` moves sets left in the state dir into a key store the admin set elsewhere and brings rotated
sets to this node's container copies.
"""

import os

from salt.exceptions import CommandExecutionError

import ccc_hostkeys
import ccc_pillar

__virtualname__ = "ccc_hostkeys"


def __virtual__():
    return __virtualname__


def backed_up(name, keep=5):
    """
    ``name``: the backup folder (0700). A new ``host-keys-<UTC time>-<digest>.tar`` (0600) is
    written when the shared sets in ``<store>/host-keys`` differ from the newest backup;
    the newest ``keep`` backups are kept. The keys themselves never appear in the output.
    The files are moved and written by the execution module (``ccc_hostkeys.migrate``,
    ``ccc_hostkeys.backup``); this state compares and reports.
    """
    ret = {"name": name, "result": True, "changes": {}, "comment": ""}
    cluster = ccc_pillar.cluster_settings(ccc_pillar.pillar_ccc(__pillar__))
    try:
        root = ccc_hostkeys.store_root(cluster)
    except ValueError as exc:
        ret.update(result=False, comment=f"host key backup: {exc}")
        return ret
    source = os.path.join(root, "host-keys")
    storage = os.path.dirname(root.rstrip("/"))
    if not os.path.isdir(storage):
        ret.update(result=False, comment=f"{storage} does not exist on this node (storage not mounted?): "
                                         "the host keys cannot be backed up")
        return ret
    if not __opts__["test"]:
        try:  # sets still at the old place are backed up from the store they belong in
            moved = __salt__["ccc_hostkeys.migrate"]()
        except CommandExecutionError as exc:
            ret.update(result=False, comment=str(exc))
            return ret
        if moved:
            ret["changes"]["moved to the key store"] = moved
    if not os.path.isdir(source):
        ret["comment"] = f"no host key sets in {source} yet (no container deployed): nothing to back up"
        return ret
    try:
        steps = __salt__["ccc_hostkeys.backup_plan"](name, keep)
    except CommandExecutionError as exc:
        ret.update(result=False, comment=f"host key backup: {exc}")
        return ret
    if not steps["write"] and not steps["prune"]:
        ret["comment"] = f"backup of {steps['sets']} host key set(s) is current ({steps['digest']})"
        return ret
    changes = dict(ret["changes"], **{key: steps[key] for key in ("write", "prune") if steps[key]})
    if __opts__["test"]:
        ret.update(result=None, changes=changes,
                   comment=f"would back up {steps['sets']} host key set(s) to {name}")
        return ret
    try:
        __salt__["ccc_hostkeys.backup"](name, keep)
    except CommandExecutionError as exc:
        ret.update(result=False, comment=str(exc))
        return ret
    ret.update(changes=changes, comment=f"backed up {steps['sets']} host key set(s) to {name}")
    return ret


def node_copies_current(name):
    """
    ``name``: the node's ``sshd_data`` folder. Key sets still in the
    state dir (``<state_dir>/host-keys``) are moved into ``host_keys:store_dir`` first, when the
    admin set one (``ccc_hostkeys.migrate``). Every stack with a node copy there gets its
    shared set again when that set changed (``ccc_hostkeys.refresh``), file by file, atomically;
    a container serves the new keys after its next restart. Stacks are never added here (the
    containers role does that), and nothing changes while the shared storage is away.
    """
    ret = {"name": name, "result": True, "changes": {}, "comment": ""}
    cluster = ccc_pillar.cluster_settings(ccc_pillar.pillar_ccc(__pillar__))
    try:
        where = ccc_hostkeys.store(cluster)
    except ValueError as exc:
        ret.update(result=False, comment=f"the host key store cannot be used: {exc}")
        return ret
    try:
        moved = [] if __opts__["test"] else __salt__["ccc_hostkeys.migrate"]()
        stale = __salt__["ccc_hostkeys.outdated"](name)
    except CommandExecutionError as exc:
        ret.update(result=False, comment=str(exc))
        return ret
    if moved:
        ret["changes"]["moved to the key store"] = moved
    if not stale:
        ret["comment"] = "the node's host key copies match the shared sets" + (
            f"; moved {len(moved)} key set(s) from the state dir into {where['root']}" if moved else "")
        return ret
    if __opts__["test"]:
        ret.update(result=None, changes={"refresh": stale},
                   comment=f"would copy the rotated host keys of {', '.join(stale)}")
        return ret
    done = []
    for stack in stale:
        try:
            if __salt__["ccc_hostkeys.refresh"](name, stack):
                done.append(stack)
        except CommandExecutionError as exc:
            ret.update(result=False, comment=str(exc))
            break
    if done:
        ret["changes"]["refreshed"] = done
    if ret["result"]:
        ret["comment"] = (f"copied the rotated host keys of {', '.join(done)}; each container serves them "
                          "after its next restart")
    return ret
