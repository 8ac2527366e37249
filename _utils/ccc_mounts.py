"""
The mounts of a container and the folders they need: storage roots, user folders (as
descriptor walks, pinned by the node), private data groups, admin extras. Pure: pillar in,
plain data out.
"""

import os

import ccc_pillar
import ccc_quote
import ccc_rules


def container_mounts(cluster, record, user_type, facts):
    """
    The container's mounts and the folders they need: ``(mounts, directories, problems)``.
    ``record`` is the record as it applies (the user's accepted settings over the admin's).

    Every source below a storage root carries a ``pin`` (``{"name", "root", "parts"}``): the
    node mounts it from a descriptor into a root-only pin folder and Docker gets that folder
    (``ccc_pins``), never a path through a user's folder. Folders are ``{"root", "parts"}``
    entries created by descriptor (``ccc_userdirs``). ``problems`` are admin-facing.
    """
    stack = record["STACK_NAME"]
    data_groups, problems = _valid_groups(
        ccc_pillar.granted(user_type, record, "private_data_groups"), "private data group")
    live_groups, live_problems = private_mount_groups(user_type, record)
    mounts = _storage_mounts(cluster, record, f"/home/{record['USER_NAME']}", user_type.get("access"))
    if ccc_rules.truthy(record.get("USE_HOST_TIMEDATE")):
        mounts.extend(_bind(path, path, read_only=True) for path in facts.host_timezone_files)
    mounts.append(_pinned("private", cluster["mount_points"]["nfs"]["user_data"], [record["USER_EMAIL"], "private"],
                          "/storage/private", propagation="rslave", shared=True))
    mounts.extend(_pinned(f"group-{group}", cluster["mount_points"]["nfs"]["private_data"], [group],
                          f"/storage/private/{group}") for group in data_groups)
    mounts.extend(_admin_mounts(cluster, record, facts.name))
    directories = _folders(cluster, record, data_groups + [g for g in live_groups if g not in data_groups])
    return mounts, directories, [f"{stack}: {problem}" for problem in problems + live_problems]


def _bind(source, target, read_only=False, propagation=None):
    mount = {"source": source, "target": target, "read_only": read_only}
    if propagation:
        mount["propagation"] = propagation
    return mount


def _pinned(name, root, parts, target, read_only=False, propagation=None, shared=False):
    """A bind of ``root/parts`` that the node pins (``ccc_pins``): ``shared`` pins let live
    private data mounts made inside them reach the container."""
    mount = _bind(os.path.join(root, *parts), target, read_only, propagation)
    mount["pin"] = {"name": name, "root": root, "parts": list(parts), **({"shared": True} if shared else {})}
    return mount


def _storage_mounts(cluster, record, home, access):
    """The storage every CCC container gets, in the order CCC images expect."""
    nfs, local = cluster["mount_points"]["nfs"], cluster["mount_points"]["local"]
    email, stack = record["USER_EMAIL"], record["STACK_NAME"]
    read_only_shared = access in (cluster.get("restricted_access_classes") or [])
    return [
        _pinned("home", nfs["user_data"], [email, record.get("STORAGE_NAME") or stack], home),
        _pinned("settings", nfs["user_data"], [email, "container-settings"], f"{home}/.containers"),
        _bind(nfs["apps_data"], "/opt/apps", read_only=True),
        _pinned("user", nfs["user_data"], [email], "/storage/user"),
        _bind(nfs["group_data"], "/storage/group", read_only=read_only_shared),
        _bind(nfs["dataset_data"], "/storage/datasets", read_only=read_only_shared),
        _pinned("hdd", local["hdd_data"], [email], "/storage/local/hdd"),
        _pinned("ssd", local["ssd_data"], [email], "/storage/local/ssd"),
        _bind(os.path.join(local["sshd_data"], "stacks", stack), "/home/.sshd",
              read_only=ccc_rules.truthy(cluster.get("sshd_keys_read_only"))),
    ]


def _admin_mounts(cluster, record, node):
    """``ADMIN_USER_ACCESS`` (every user's data and the node's logs) and ``ENABLE_DOCKER_ACCESS``."""
    nfs = cluster["mount_points"]["nfs"]
    mounts = []
    if ccc_rules.truthy(record.get("ADMIN_USER_ACCESS")):
        mounts.append(_bind(nfs["user_data"], "/storage/admin/users"))
        mounts.append(_bind(nfs["private_data"], "/storage/admin/privates"))
        mounts.append(_bind(cluster["admin_log_dir"], f"/storage/admin/logs-{node}"))
    if ccc_rules.truthy(record.get("ENABLE_DOCKER_ACCESS")):
        mounts.append(_bind("/var/run/docker.sock", "/var/run/docker.sock"))
    return mounts


def _folders(cluster, record, groups):
    """The folders the mounts need, created by descriptor when missing, owned by the NFS user
    (the admin log folder by root)."""
    nfs, local = cluster["mount_points"]["nfs"], cluster["mount_points"]["local"]
    email = record["USER_EMAIL"]
    owner = ccc_pillar.file_owner(cluster)

    def folder(root, parts, mode=0o755, by=owner):
        return {"root": root, "parts": list(parts), "owner": by, "mode": mode, "path": os.path.join(root, *parts)}

    directories = [
        folder(nfs["user_data"], [email]),
        folder(nfs["user_data"], [email, record.get("STORAGE_NAME") or record["STACK_NAME"]], 0o750),
        folder(nfs["user_data"], [email, "container-settings"]),
        folder(nfs["user_data"], [email, "private"]),
        folder(local["hdd_data"], [email]),
        folder(local["ssd_data"], [email]),
    ]
    directories.extend(folder(nfs["private_data"], [group]) for group in groups)
    if ccc_rules.truthy(record.get("ADMIN_USER_ACCESS")):
        directories.append(folder(cluster["admin_log_dir"], [], by=(0, 0)))
    return directories


def _valid_groups(groups, what):
    """The groups whose names are safe folder names, and a problem for each other one."""
    valid = [group for group in groups if ccc_rules.is_stack_name(group)]
    problems = [f"{what} {ccc_quote.quote_value(group)} is not a valid name" for group in groups if group not in valid]
    return valid, problems


def private_mount_groups(user_type, record):
    """
    The "live" private data groups of a container: bind-mounted on the node under the user's
    ``private/`` directory (seen in the container through the rslave ``/storage/private``), so
    granting or revoking one never recreates the container. Returns ``(groups, problems)``.
    """
    return _valid_groups(ccc_pillar.granted(user_type, record, "private_mount_groups"), "private data mount group")


def wanted_private_mounts(ccc, stacks_on_node):
    """
    Map STACK_NAME -> its live private groups, for the containers running on this node. Each
    container has its own ``private`` pin, so a grant reaches exactly the containers it names
    and revoking it from one never unmounts it in another. A container whose admin record has
    a problem maps to None: the deploy holds it as it was, and its live groups stay as they
    are too (an admin's typo never takes a user's data away mid-run). One pillar no longer
    lists has no grant, and is left out.
    """
    wanted, index = {}, ccc_pillar.entries_by_stack(ccc)
    for stack in stacks_on_node:
        record, problems = ccc_pillar.container_record(ccc, stack, index=index)
        if record is None:
            continue
        if problems:
            wanted[stack] = None
            continue
        user_type = ((ccc or {}).get("user_types") or {}).get(record.get("USER_TYPE")) or {}
        wanted[stack], _ = private_mount_groups(user_type, record)
    return wanted
