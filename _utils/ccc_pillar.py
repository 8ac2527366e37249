"""
The ``ccc`` pillar as a model: built-in defaults, merges, container records, selection,
grants and placement (which nodes a container may and does run on), the NFS owner of user
files. Plain data in, plain data out.
"""

import collections
import copy
import os
import re

import ccc_quote
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
    "moves": {"max_window": 300},
    "sshd_keys_read_only": True,
    "host_keys": {"rsa_bits": 3072, "spare_sets": 0},
    "hardening": {"no_new_privileges": True, "cap_drop": ["MKNOD", "NET_RAW", "SETFCAP"], "pids_limit": 16384},
    "github_keys_url": "https://github.com/{login}.keys",
    "github_keys_max_age": 600,
    "state_dir": None,
    "admin_log_dir": "/var/log/ccc-salt",
    "docs_url": "https://github.com/vicoslab/ccc-deployment/blob/master/USER_INSTRUCTION.md",
}

NODE_DEFAULTS = {"name": None, "docker_url": "unix:///var/run/docker.sock", "compute_devices": {},
                 "binds_dir": "/run/ccc-salt/binds", "state_dir": "/var/lib/ccc-salt", "create_parallelism": 4}

# What a user type grants (its key) and what a container record adds to that (its key).
GRANTS = {
    "nodes": ("allowed_nodes", "ALLOWED_NODES"),
    "device_groups": ("allowed_device_groups", "ADDITIONAL_DEVICE_GROUPS"),
    "private_data_groups": ("allowed_private_data_groups", "ADDITIONAL_PRIVATE_DATA_GROUPS"),
    "private_mount_groups": ("allowed_private_data_mount_groups", "ADDITIONAL_PRIVATE_DATA_MOUNT_GROUPS"),
}


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


def cluster_seconds(cluster, path, zero_allowed=False):
    """
    ``(seconds, problem)``: the ``ccc:cluster`` setting at ``path`` (its keys), a number of
    seconds above 0 (``zero_allowed``: 0 or more); a bad value gives the default
    (``CLUSTER_DEFAULTS``) and the admin's message.
    """
    *parents, last = path
    default, value = CLUSTER_DEFAULTS, cluster or {}
    for key in parents:
        default, value = default[key], value.get(key) or {}
    default = default[last]
    value = value.get(last, default)
    if ccc_rules.is_number(value) and (value >= 0 if zero_allowed else value > 0):
        return float(value), None
    rule = "(0 or more)" if zero_allowed else "above 0"
    return float(default), f"ccc:cluster:{':'.join(path)} must be a number of seconds {rule}, got {value!r}; using {default}"


def file_owner(cluster):
    """
    ``(uid, gid)`` of everything created for users (folders, settings and ``.deploy`` files,
    last accepted settings): the one NFS identity ``ccc:cluster:nfs_user``, the gid defaulting
    to the uid. ``cluster`` is ``cluster_settings``'s result.
    """
    nfs_user = cluster["nfs_user"]
    return int(nfs_user["uid"]), int(nfs_user.get("gid", nfs_user["uid"]))


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


def stack_entries(ccc):
    """
    The container entries that can be deployed, by STACK_NAME in pillar order, and why the
    others cannot: ``(entries, errors)``. An entry with an invalid STACK_NAME is skipped, and a
    STACK_NAME defined more than once is skipped in every definition (which one the admin
    meant is unknown).
    """
    entries = [entry for entry in (ccc or {}).get("containers") or [] if isinstance(entry, dict)]
    counts = collections.Counter(e["STACK_NAME"] for e in entries if ccc_rules.is_stack_name(e.get("STACK_NAME")))
    valid, errors = {}, []
    for entry in entries:
        stack = entry.get("STACK_NAME")
        if not ccc_rules.is_stack_name(stack):
            errors.append(f"container entry with invalid STACK_NAME {ccc_quote.quote_value(stack)} is skipped")
        elif counts[stack] == 1:
            valid[stack] = entry
    errors.extend(f"STACK_NAME {ccc_quote.quote_value(stack)} is defined more than once; every definition is skipped"
                  for stack, count in counts.items() if count > 1)
    return valid, errors


def select(ccc, containers=None, users=None):
    """
    Select containers by STACK_NAME and/or user email; no filter selects all.

    Returns ``{"selected": [STACK_NAME...], "errors": [...], "filtered": bool}``. The two filters
    form a union. A name matching nothing is an error; an empty selection is not.
    """
    wanted_stacks = _split_filter(containers)
    wanted_users = _split_filter(users)
    entries, errors = stack_entries(ccc)
    emails = {stack: entry.get("USER_EMAIL") for stack, entry in entries.items()}
    known_users = set(((ccc or {}).get("users") or {}).keys()) | {e for e in emails.values() if isinstance(e, str)}
    errors.extend(f"containers filter: no container named {ccc_quote.quote_value(name)}"
                  for name in wanted_stacks if name not in entries)
    errors.extend(f"users filter: no user {ccc_quote.quote_value(email)}" for email in wanted_users if email not in known_users)
    filtered = bool(wanted_stacks or wanted_users)
    selected = [stack for stack, email in emails.items() if not filtered or stack in wanted_stacks or email in wanted_users]
    return {"selected": selected, "errors": errors, "filtered": filtered}


def merged_record(users, entry):
    """
    A container entry overlaid on its user's record (shallow: the entry's keys win), no checks.
    """
    record = dict((users or {}).get(entry.get("USER_EMAIL")) or {})
    record.update(entry)
    record.setdefault("USER_EMAIL", entry.get("USER_EMAIL"))
    return record


def entries_by_stack(ccc):
    """
    ``ccc:containers`` as STACK_NAME -> its entries (more than one: defined twice), in one pass.
    A caller that looks up many stacks builds it once and passes it to ``container_record``
    (``index``): a lookup per stack that scanned the list made a run over N containers N².
    """
    index = {}
    for entry in (ccc or {}).get("containers") or []:
        if not isinstance(entry, dict):
            continue
        try:
            index.setdefault(entry.get("STACK_NAME"), []).append(entry)
        except TypeError:  # an unhashable STACK_NAME names no stack (its entry is refused elsewhere)
            continue
    return index


def container_record(ccc, stack, check=True, index=None):
    """
    The admin-side record of a container: its user's record overlaid by the container entry.

    Returns ``(record, problems)``; problems are admin-facing and mean the container cannot be
    deployed as configured. ``check=False`` skips the admin-record checks (for callers that
    only need the record's paths; the resolver checks it). ``index``: ``entries_by_stack(ccc)``
    where the caller has it.
    """
    try:
        entries = (entries_by_stack(ccc) if index is None else index).get(stack) or []
    except TypeError:  # an unhashable name is no STACK_NAME
        entries = []
    if not entries:
        return None, [f"no container named {ccc_quote.quote_value(stack)} in pillar ccc:containers"]
    if len(entries) > 1:
        return None, [f"STACK_NAME {ccc_quote.quote_value(stack)} is defined more than once"]
    users = (ccc or {}).get("users") or {}
    record = merged_record(users, entries[0])
    if not check:
        return record, []
    return record, ccc_quote.cap_problems(_check_admin_record(ccc, record))


def _check_admin_record(ccc, record):
    """What makes an admin record undeployable, one problem per mistake, values quoted."""
    stack, quote = record["STACK_NAME"], ccc_quote.quote_value
    problems = []
    email = record.get("USER_EMAIL")
    if not isinstance(email, str) or email not in ((ccc or {}).get("users") or {}):
        problems.append(f"{stack}: USER_EMAIL {quote(email)} has no entry in ccc:users")
    if not ccc_rules.is_email(email):
        problems.append(f"{stack}: USER_EMAIL {quote(email)} is not a valid address")
    for key in ("CONTAINER_IMAGE", "USER_NAME", "USER_TYPE", "USER_FULLNAME"):
        if not record.get(key):
            problems.append(f"{stack}: {key} is required (in the container or its user record)")
    user_type = record.get("USER_TYPE")
    if user_type and (not isinstance(user_type, str) or user_type not in ((ccc or {}).get("user_types") or {})):
        problems.append(f"{stack}: USER_TYPE {quote(user_type)} is not defined in ccc:user_types")
    storage = record.get("STORAGE_NAME")
    if storage is not None and not ccc_rules.is_stack_name(storage):
        problems.append(f"{stack}: STORAGE_NAME {quote(storage)} must look like a STACK_NAME")
    for key in ("USER_FULLNAME", "USER_MENTOR"):
        value = record.get(key)
        if value is not None and (not isinstance(value, str) or re.search(r"[\x00-\x1f\x7f]", value)):
            problems.append(f"{stack}: {key} must be a single line of text")
    for key in [key for _, key in GRANTS.values()] + ["DEPLOYMENT_NODES"]:
        listed = record.get(key)
        if listed is not None and not (isinstance(listed, list) and all(isinstance(item, str) for item in listed)):
            problems.append(f"{stack}: {key} must be a list of names, not {quote(listed)}")
    extra_envs = record.get("EXTRA_ENVS")
    if extra_envs is not None and not isinstance(extra_envs, dict):
        problems.append(f"{stack}: EXTRA_ENVS must be a mapping")
    for key, value in (extra_envs if isinstance(extra_envs, dict) else {}).items():
        if not ccc_rules.is_env_name(key) or not isinstance(value, (str, int, float, bool)):
            problems.append(f"{stack}: EXTRA_ENVS entry {quote(key)} must be NAME: scalar")
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


def user_type_of(ccc, record):
    """The ``ccc:user_types`` entry of a record's ``USER_TYPE`` (``{}`` when there is none)."""
    name = (record or {}).get("USER_TYPE")
    found = ((ccc or {}).get("user_types") or {}).get(name) if isinstance(name, str) else None
    return found if isinstance(found, dict) else {}


def granted(user_type, record, what):
    """
    What a container is granted (``GRANTS``: nodes, device groups, private data groups, live
    private data groups): its user type's list, then the record's additions, each once, in
    that order. A value that is not a list grants nothing (the record check reports it).
    """
    type_key, record_key = GRANTS[what]
    items = []
    for listed in ((user_type or {}).get(type_key), (record or {}).get(record_key)):
        items.extend(item for item in (listed if isinstance(listed, list) else []) if item not in items)
    return items


def allowed_nodes(ccc, stack):
    """
    The nodes a container may ever run on (its user type's ``allowed_nodes`` plus its
    ``ALLOWED_NODES``), whatever its settings say: where a settings edit must be applied.
    """
    record, _ = container_record(ccc, stack, check=False)
    return granted(user_type_of(ccc, record), record, "nodes") if record else []


def placement(user_type, record, wanted=None):
    """
    Where a container runs, and why: the nodes asked for that it is allowed, in the order
    asked. Asked for are ``wanted`` (the user's accepted ``DEPLOYMENT_NODES``), else the
    record's ``DEPLOYMENT_NODES``, else the user type's ``default_nodes``. Returns
    ``(nodes, refused, source)``: the nodes asked for but not allowed, and where the list came
    from, in words.
    """
    choices = ((wanted, "the user's settings"), ((record or {}).get("DEPLOYMENT_NODES"), "DEPLOYMENT_NODES"),
               ((user_type or {}).get("default_nodes"), "the user type's default_nodes"))
    asked, source = next(((nodes, source) for nodes, source in choices if isinstance(nodes, list) and nodes),
                         ([], "nowhere: no DEPLOYMENT_NODES and no default_nodes"))
    allowed = granted(user_type, record, "nodes")
    return [node for node in asked if node in allowed], [node for node in asked if node not in allowed], source


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


def pillar_ccc(pillar, keys=None):
    """
    The ``ccc`` pillar key as plain data (``{}`` when missing); ``keys``: only those of its keys
    (a caller that reads ``cluster`` and ``node`` need not copy every container and user).
    """
    ccc = (pillar or {}).get("ccc") or {}
    if keys is not None and isinstance(ccc, dict):
        ccc = {key: ccc[key] for key in keys if key in ccc}
    return plain(ccc)


def watched_files(ccc, node):
    """
    The settings files whose edits ``node`` must hear about (the ``ccc_settings`` beacon's
    list): every deployable entry (``stack_entries``) with a valid ``USER_EMAIL`` that is not
    ``DISABLED`` (in its record, user record included) and may run on ``node`` (its granted
    nodes). ``[{"stack", "path"}]`` sorted by stack; ``ValueError`` when the user data root is
    not an absolute path (no file could be named). One pass over the entries: a node of a large
    site asks for this at every beacon reconfiguration.
    """
    cluster = cluster_settings(ccc)
    user_data = cluster["mount_points"]["nfs"].get("user_data")
    if not isinstance(user_data, str) or not os.path.isabs(user_data):
        raise ValueError(f"ccc:cluster:mount_points:nfs:user_data {ccc_quote.quote_value(user_data)} "
                         "is not an absolute path")
    users = (ccc or {}).get("users") if isinstance((ccc or {}).get("users"), dict) else {}
    files = []
    for stack, entry in sorted(stack_entries(ccc)[0].items()):
        if not ccc_rules.is_email(entry.get("USER_EMAIL")):
            continue
        record = merged_record(users, entry)
        if ccc_rules.truthy(record.get("DISABLED")):
            continue
        if node in granted(user_type_of(ccc, record), record, "nodes"):
            files.append({"stack": stack, "path": settings_paths(cluster, record)["settings_file"]})
    return files
