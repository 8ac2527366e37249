"""
The ``ccc`` pillar as a model: built-in defaults, merges, container records, selection and
placement (which nodes a container may run on). Plain data in, plain data out.
"""

import copy
import os
import re

import ccc_rules
import ccc_schema

CLUSTER_DEFAULTS = {
    "mount_points": {
        "nfs": {
            "user_data": "/data/shared/user_data",
            "group_data": "/data/shared/group_data",
            "apps_data": "/data/shared/apps",
            "dataset_data": "/data/shared/datasets",
            "private_data": "/data/shared/private_data",
        },
        "local": {
            "hdd_data": "/data/storage/hdd",
            "ssd_data": "/data/storage/ssd",
            "sshd_data": "/data/storage/sshd",
        },
    },
    "nfs_user": {"name": "nfs-user", "uid": 1000, "gid": 1000},
    "access_networks": {},
    "restricted_access_classes": ["restricted"],
    "claims_network": "claims",
    "networks": {},
    "apps": [],
    "runtime": None,
    "image_policy": {"allowed_prefixes": ["vicoslab/ccc:"], "pull": "missing", "credentialed_prefixes": []},
    "shm_size_default": "2g",
    "shm_size_max": "64g",
    "reserved_subdomains": ["portainer", "patroller", "{node}-metrics", "{node}-monitor"],
    "remove_orphans": True,
    "orphans": {"max_share": 0.5},
    "sshd_keys_read_only": True,
    "host_keys": {"rsa_bits": 3072},
    "hardening": {"no_new_privileges": True, "cap_drop": ["MKNOD", "NET_RAW", "SETFCAP"], "pids_limit": 16384},
    "github_keys_url": "https://github.com/{login}.keys",
    "state_dir": None,
    "admin_log_dir": "/var/log/ccc-salt",
    "docs_url": "https://github.com/vicoslab/ccc-deployment/blob/master/USER_INSTRUCTION.md",
}
NODE_DEFAULTS = {"name": None, "docker_url": "unix:///var/run/docker.sock", "compute_devices": {},
                 "binds_dir": "/run/ccc-salt/binds", "state_dir": "/var/lib/ccc-salt"}


def deep_merge(base, override):
    """
    Merge ``override`` into a copy of ``base``: dicts recursively, everything else replaced
    (lists too), as Salt's smart pillar merge does.
    """
    merged = copy.deepcopy(base)
    for key, value in (override or {}).items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def cluster_settings(ccc):
    """
    Return ``ccc:cluster`` merged over the built-in defaults (the only place defaults live).
    """
    cluster = deep_merge(CLUSTER_DEFAULTS, (ccc or {}).get("cluster"))
    if not cluster.get("state_dir"):
        cluster["state_dir"] = os.path.join(cluster["mount_points"]["nfs"]["user_data"], ".ccc-salt")
    return cluster


def node_settings(ccc, minion_id):
    """
    Return ``ccc:node`` merged over the defaults, with the node name defaulting to the minion id.
    """
    node = deep_merge(NODE_DEFAULTS, (ccc or {}).get("node"))
    node["name"] = node.get("name") or minion_id
    node["compute_devices"] = node.get("compute_devices") or {}
    return node


def cluster_nodes(ccc):
    """
    Every node a container may run on: the user types' ``default_nodes`` and ``allowed_nodes``
    and every container record's ``ALLOWED_NODES`` and ``DEPLOYMENT_NODES`` (its user's record
    included). The one list behind ``{node}`` in reserved subdomains and ``<node>-<sub>`` in
    taken ones: a node granted only through a container's ``ALLOWED_NODES`` serves FRP
    subdomains like any other.
    """
    users = (ccc or {}).get("users") or {}
    holders = [(user_type or {}, ("default_nodes", "allowed_nodes"))
               for user_type in ((ccc or {}).get("user_types") or {}).values()]
    holders += [(merged_record(users, entry), ("ALLOWED_NODES", "DEPLOYMENT_NODES"))
                for entry in (ccc or {}).get("containers") or [] if isinstance(entry, dict)]
    nodes = []
    for holder, keys in holders:
        for key in keys:
            listed = holder.get(key) if isinstance(holder, dict) else None
            for node in listed if isinstance(listed, list) else []:
                if isinstance(node, str) and node not in nodes:
                    nodes.append(node)
    return nodes


def _split_filter(value):
    if value in (None, "", []):
        return []
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return [str(item).strip() for item in value]


def select(ccc, containers=None, users=None):
    """
    Select containers by STACK_NAME and/or user email; no filter selects all.

    Returns ``{"selected": [STACK_NAME...], "errors": [...], "filtered": bool}``. The two filters
    form a union. A name matching nothing is an error; an empty selection is not.
    """
    wanted_stacks = _split_filter(containers)
    wanted_users = _split_filter(users)
    entries = [entry for entry in (ccc or {}).get("containers") or [] if isinstance(entry, dict)]
    errors = []
    stacks, seen = [], set()
    for entry in entries:
        stack = entry.get("STACK_NAME")
        if not isinstance(stack, str) or not ccc_rules.STACK_NAME_PATTERN.match(stack):
            errors.append(f"container entry with invalid STACK_NAME {stack!r} is skipped")
            continue
        if stack in seen:
            errors.append(f"STACK_NAME {stack!r} is defined more than once; every definition is skipped")
            continue
        seen.add(stack)
        stacks.append((stack, entry.get("USER_EMAIL")))
    duplicates = {msg.split("'")[1] for msg in errors if "more than once" in msg}
    stacks = [(stack, email) for stack, email in stacks if stack not in duplicates]

    known_stacks = {stack for stack, _ in stacks}
    known_users = set(((ccc or {}).get("users") or {}).keys()) | {email for _, email in stacks}
    for name in wanted_stacks:
        if name not in known_stacks:
            errors.append(f"containers filter: no container named {name!r}")
    for email in wanted_users:
        if email not in known_users:
            errors.append(f"users filter: no user {email!r}")
    filtered = bool(wanted_stacks or wanted_users)
    selected = [
        stack
        for stack, email in stacks
        if not filtered or stack in wanted_stacks or email in wanted_users
    ]
    return {"selected": selected, "errors": errors, "filtered": filtered}


def merged_record(users, entry):
    """
    A container entry overlaid on its user's record (shallow: the entry's keys win), no checks.
    """
    record = dict((users or {}).get(entry.get("USER_EMAIL")) or {})
    record.update(entry)
    record.setdefault("USER_EMAIL", entry.get("USER_EMAIL"))
    return record


def container_record(ccc, stack, check=True):
    """
    The admin-side record of a container: its user's record overlaid by the container entry.

    Returns ``(record, problems)``; problems are admin-facing and mean the container cannot be
    deployed as configured. ``check=False`` skips the admin-record checks (for callers that
    only need the record's paths; the resolver checks it).
    """
    entries = [e for e in (ccc or {}).get("containers") or [] if isinstance(e, dict) and e.get("STACK_NAME") == stack]
    if not entries:
        return None, [f"no container named {stack!r} in pillar ccc:containers"]
    if len(entries) > 1:
        return None, [f"STACK_NAME {stack!r} is defined more than once"]
    users = (ccc or {}).get("users") or {}
    record = merged_record(users, entries[0])
    if not check:
        return record, []
    problems = []
    if record["USER_EMAIL"] not in users:
        problems.append(f"{stack}: USER_EMAIL {record['USER_EMAIL']!r} has no entry in ccc:users")
    problems.extend(_check_admin_record(ccc, record))
    return record, problems


def _check_admin_record(ccc, record):
    stack = record["STACK_NAME"]
    problems = []
    email = record.get("USER_EMAIL")
    if not isinstance(email, str) or not ccc_rules.EMAIL_PATTERN.match(email):
        problems.append(f"{stack}: USER_EMAIL {email!r} is not a valid address")
    for key in ("CONTAINER_IMAGE", "USER_NAME", "USER_TYPE", "USER_FULLNAME"):
        if not record.get(key):
            problems.append(f"{stack}: {key} is required (in the container or its user record)")
    user_type = record.get("USER_TYPE")
    if user_type and user_type not in ((ccc or {}).get("user_types") or {}):
        problems.append(f"{stack}: USER_TYPE {user_type!r} is not defined in ccc:user_types")
    storage = record.get("STORAGE_NAME")
    if storage is not None and (not isinstance(storage, str) or not ccc_rules.STACK_NAME_PATTERN.match(storage)):
        problems.append(f"{stack}: STORAGE_NAME {storage!r} must look like a STACK_NAME")
    for key in ("USER_FULLNAME", "USER_MENTOR"):
        value = record.get(key)
        if value is not None and (not isinstance(value, str) or re.search(r"[\x00-\x1f\x7f]", value)):
            problems.append(f"{stack}: {key} must be a single line of text")
    for key, value in (record.get("EXTRA_ENVS") or {}).items():
        if not ccc_rules.ENV_NAME_PATTERN.match(str(key)) or not isinstance(value, (str, int, float, bool)):
            problems.append(f"{stack}: EXTRA_ENVS entry {key!r} must be NAME: scalar")
    if record.get("EXTRA_ENVS") is not None and not isinstance(record.get("EXTRA_ENVS"), dict):
        problems.append(f"{stack}: EXTRA_ENVS must be a mapping")
    # Pillar strings may come from users too: the user-settable keys obey the same schema.
    admin_section = {k: record[k] for k in ccc_schema.USER_SETTABLE_KEYS if k in record and k != "DEPLOYMENT_NODES"}
    problems.extend(f"{stack}: {msg}" for msg in ccc_schema.validate_user_settings(admin_section, stack, {}))
    return problems


def settings_paths(cluster, record):
    """
    Paths of a container's settings directory, file, feedback file and last-good copy.
    """
    user_dir = os.path.join(cluster["mount_points"]["nfs"]["user_data"], record["USER_EMAIL"])
    settings_dir = os.path.join(user_dir, "container-settings")
    stack = record["STACK_NAME"]
    return {
        "user_dir": user_dir,
        "settings_dir": settings_dir,
        "settings_file": os.path.join(settings_dir, f"{stack}.yml"),
        "feedback_file": os.path.join(settings_dir, f"{stack}.deploy"),
        "last_good_file": os.path.join(cluster["state_dir"], "last-good", f"{stack}.json"),
        # The same folder as a descriptor walk (``ccc_userdirs``): root, then components.
        "settings_folder": {"root": cluster["mount_points"]["nfs"]["user_data"],
                            "parts": [record["USER_EMAIL"], "container-settings"]},
    }


def _allowed_nodes(user_type, record):
    return list(dict.fromkeys((user_type.get("allowed_nodes") or []) + (record.get("ALLOWED_NODES") or [])))


def allowed_nodes(ccc, stack):
    """
    The nodes a container may ever run on (its user type's ``allowed_nodes`` plus its
    ``ALLOWED_NODES``), whatever its settings say: where a settings edit must be applied.
    """
    record, problems = container_record(ccc, stack)
    if record is None or not isinstance(((ccc or {}).get("user_types") or {}).get(record.get("USER_TYPE")), dict):
        return []
    return _allowed_nodes(ccc["user_types"][record["USER_TYPE"]], record)


def plain(value):
    """
    Deep copy of pillar data as plain dicts and lists.

    Salt 3008 wraps pillar in display-masking containers; the resolver works on plain data
    (and its results must show real values to the admin).
    """
    if isinstance(value, dict):
        return {key: plain(item) for key, item in dict.items(value)}
    if isinstance(value, list):
        return [plain(item) for item in list.__iter__(value)]
    return value


def pillar_ccc(pillar):
    """
    The ``ccc`` pillar key as plain data (``{}`` when missing).
    """
    return plain((pillar or {}).get("ccc") or {})
