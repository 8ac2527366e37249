"""
Mounts of a container: storage roots, user folders (as descriptor walks), private groups.
"""

import os

import ccc_pillar
import ccc_rules


def _mounts(cluster, record, user_type, value, facts, access, errors):
    """
    The container's mounts and the folders they need.

    Every source below a storage root carries a ``pin`` (``{"name", "root", "parts"}``): the
    node mounts it from a descriptor into a root-only pin folder and Docker gets that folder
    (``ccc_pins``), never a path through a user's folder. Folders are ``{"root", "parts"}``
    entries created by descriptor (``ccc_userdirs``).
    """
    nfs = cluster["mount_points"]["nfs"]
    local = cluster["mount_points"]["local"]
    email = record["USER_EMAIL"]
    stack = record["STACK_NAME"]
    home = f"/home/{value('USER_NAME')}"
    storage = record.get("STORAGE_NAME") or stack
    read_only_shared = access in (cluster.get("restricted_access_classes") or [])
    uid, gid = cluster["nfs_user"]["uid"], cluster["nfs_user"].get("gid", cluster["nfs_user"]["uid"])

    def bind(source, target, read_only=False, propagation=None):
        mount = {"source": source, "target": target, "read_only": read_only}
        if propagation:
            mount["propagation"] = propagation
        return mount

    def pinned(name, root, parts, target, read_only=False, propagation=None, shared=False):
        mount = bind(os.path.join(root, *parts), target, read_only, propagation)
        mount["pin"] = {"name": name, "root": root, "parts": list(parts), **({"shared": True} if shared else {})}
        return mount

    mounts = [
        pinned("home", nfs["user_data"], [email, storage], home),
        pinned("settings", nfs["user_data"], [email, "container-settings"], f"{home}/.containers"),
        bind(nfs["apps_data"], "/opt/apps", read_only=True),
        pinned("user", nfs["user_data"], [email], "/storage/user"),
        bind(nfs["group_data"], "/storage/group", read_only=read_only_shared),
        bind(nfs["dataset_data"], "/storage/datasets", read_only=read_only_shared),
        pinned("hdd", local["hdd_data"], [email], "/storage/local/hdd"),
        pinned("ssd", local["ssd_data"], [email], "/storage/local/ssd"),
        bind(os.path.join(local["sshd_data"], "stacks", stack), "/home/.sshd",
             read_only=bool(cluster.get("sshd_keys_read_only"))),
    ]
    if value("USE_HOST_TIMEDATE"):
        mounts.extend(bind(path, path, read_only=True) for path in facts.host_timezone_files)
    mounts.append(pinned("private", nfs["user_data"], [email, "private"], "/storage/private",
                         propagation="rslave", shared=True))
    private_groups = list(dict.fromkeys(
        (user_type.get("allowed_private_data_groups") or []) + (record.get("ADDITIONAL_PRIVATE_DATA_GROUPS") or [])
    ))
    for group in private_groups:
        if not ccc_rules.STACK_NAME_PATTERN.match(str(group)):
            errors.append(f"{stack}: private data group {group!r} is not a valid name")
            continue
        mounts.append(pinned(f"group-{group}", nfs["private_data"], [group], f"/storage/private/{group}"))
    if ccc_rules.truthy(record.get("ADMIN_USER_ACCESS")):
        mounts.append(bind(nfs["user_data"], "/storage/admin/users"))
        mounts.append(bind(nfs["private_data"], "/storage/admin/privates"))
        mounts.append(bind(cluster["admin_log_dir"], f"/storage/admin/logs-{facts.name}"))
    if ccc_rules.truthy(record.get("ENABLE_DOCKER_ACCESS")):
        mounts.append(bind("/var/run/docker.sock", "/var/run/docker.sock"))

    def folder(root, parts, mode=0o755):
        return {"root": root, "parts": list(parts), "owner": (uid, gid), "mode": mode,
                "path": os.path.join(root, *parts)}

    directories = [
        folder(nfs["user_data"], [email]),
        folder(nfs["user_data"], [email, storage], 0o750),
        folder(nfs["user_data"], [email, "container-settings"]),
        folder(nfs["user_data"], [email, "private"]),
        folder(local["hdd_data"], [email]),
        folder(local["ssd_data"], [email]),
    ]
    live_groups, live_problems = private_mount_groups(user_type, record)
    errors.extend(f"{stack}: {problem}" for problem in live_problems)
    directories.extend(
        folder(nfs["private_data"], [group])
        for group in dict.fromkeys(private_groups + live_groups) if ccc_rules.STACK_NAME_PATTERN.match(str(group))
    )
    if ccc_rules.truthy(record.get("ADMIN_USER_ACCESS")):
        directories.append({"root": cluster["admin_log_dir"], "parts": [], "owner": (0, 0), "mode": 0o755,
                            "path": cluster["admin_log_dir"]})
    return mounts, directories


def private_mount_groups(user_type, record):
    """
    The "live" private data groups of a container: bind-mounted on the node under the user's
    ``private/`` directory (seen in the container through the rslave ``/storage/private``), so
    granting or revoking one never recreates the container. Returns ``(groups, problems)``.
    """
    groups, problems = [], []
    for group in list((user_type or {}).get("allowed_private_data_mount_groups") or []) + list(
        (record or {}).get("ADDITIONAL_PRIVATE_DATA_MOUNT_GROUPS") or []
    ):
        if not isinstance(group, str) or not ccc_rules.STACK_NAME_PATTERN.match(group):
            problems.append(f"private data mount group {group!r} is not a valid name")
        elif group not in groups:
            groups.append(group)
    return groups, problems


def wanted_private_mounts(ccc, stacks_on_node):
    """
    Map STACK_NAME -> its live private groups, for the containers running on this node. Each
    container has its own ``private`` pin, so a grant reaches exactly the containers it names
    and revoking it from one never unmounts it in another.
    """
    wanted = {}
    for stack in stacks_on_node:
        record, problems = ccc_pillar.container_record(ccc, stack)
        if record is None or problems:
            continue
        user_type = ((ccc or {}).get("user_types") or {}).get(record.get("USER_TYPE")) or {}
        wanted[stack], _ = private_mount_groups(user_type, record)
    return wanted
