"""
Live private data groups: each running container's granted groups mounted inside its own
``private`` pin (seen through its ``rslave`` ``/storage/private``), revoked ones unmounted,
without recreating the container; pin sets of stacks with no managed container released.
"""

import logging
import os

import ccc_engine
import ccc_mountfd
import ccc_pins
import ccc_private_groups
import ccc_safefs

log = logging.getLogger(__name__)


def reconcile(client, cluster, binds_dir, containers, wanted, owner, test=False):
    """
    Make the mounts match ``wanted`` (STACK_NAME -> groups; None: leave that container's mounts
    as they are, ``ccc_mounts.wanted_private_mounts``), undo the earlier version's mounts
    on user paths, release unused pin sets. ``containers``: the node's managed containers, as
    the caller listed them once (``ccc_node_record.managed_containers``). Returns the changes:
    ``mounted``, ``unmounted``, ``released``, ``refused`` (a group whose mount point a user
    replaced), each only when non-empty.
    """
    nfs = cluster["mount_points"]["nfs"]
    changes = {"mounted": [], "unmounted": [], "released": [], "refused": []}
    mounts = ccc_mountfd.mountinfo()
    for record in ccc_private_groups.legacy_private_mounts(nfs["user_data"], mounts):
        problem = None if test else _unmount_user_path(nfs["user_data"], record)
        changes["refused" if problem else "unmounted"].append(f"{record.point}: {problem}" if problem else record.point)
    points, children = {record.point for record in mounts}, ccc_mountfd.children_of(mounts)
    for stack, summary in sorted(containers.items()):
        groups = wanted.get(stack, [])  # not wanted: no grant; None: held, left as it is
        if summary.get("State") != "running" or groups is None:
            continue
        # The list's summary names the mounts already: no inspect per container (500 of them
        # made a no-op apply grow by seconds); an engine that leaves them out is asked.
        attrs = summary if "Mounts" in summary else ccc_engine.inspect(client, summary["Id"])
        private_dir = ccc_private_groups.private_pin(attrs) if attrs else None
        if not private_dir or not private_dir.startswith(os.path.join(binds_dir, "")) or private_dir not in points:
            continue
        done = ccc_private_groups.reconcile_groups(private_dir, nfs["private_data"], groups, owner, test, children)
        for key, value in done.items():
            changes[key].extend(value)
    for stack in ccc_pins.pinned_stacks(binds_dir):
        if stack not in containers:
            changes["released"].append(stack)
            if not test:
                ccc_pins.release(binds_dir, stack)
    return {key: value for key, value in changes.items() if value}


def _unmount_user_path(root, record):
    """Unmount an old mount below a user folder, reached without following links and only if
    it is still that mount (by id); returns why not, or None."""
    parts = record.point[len(os.path.join(root, "")):].split("/")
    try:
        fd = ccc_safefs.walk(root, parts)
    except (FileNotFoundError, ccc_safefs.UnsafePath) as exc:
        log.warning("not unmounting %s: %s", record.point, exc)
        return exc.strerror or str(exc)
    try:
        ccc_mountfd.unmount(fd, record.id)
    except ccc_safefs.UnsafePath as exc:
        log.warning("not unmounting %s: %s", record.point, exc)
        return exc.strerror
    finally:
        os.close(fd)
    return None
