"""
Compute containers from pillar: selection, merge, placement, GPU groups and the Docker spec.

Pillar layout (documented in full in ``docs/pillar.md``)::

    ccc:
      cluster:    {mount_points, nfs_user, access_networks, claims_network, apps, image_policy, ...}
      user_types: {<type>: {access, default_nodes, allowed_nodes, allowed_device_groups, ...}}
      users:      {<email>: {USER_FULLNAME, USER_NAME, USER_TYPE, USER_PUBKEY, ...}}
      containers: [{STACK_NAME, USER_EMAIL, CONTAINER_IMAGE, ...}, ...]
      node:       {name, docker_url, compute_devices: {<group>: [GPU UUIDs]}}

Each container is computed from scratch as a pure function of pillar, the user's settings file,
the node's facts and the image; nothing carries over between containers. ``resolve`` does that
without touching Docker (``resolve_container``); ``ccc_docker`` applies a resolution. The Salt
wrappers at the end of this file (``settings``, ``selection``, ``resolve``) are what ``salt-call``
runs.
"""

import copy
import hashlib
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ccc_devices  # noqa: E402  (sibling module, also loaded by Salt as ccc_devices)
import ccc_settings  # noqa: E402

__virtualname__ = "ccc_containers"

MANAGED_BY_LABEL = "ccc.managed-by"
MANAGED_BY_VALUE = "ccc-salt"
STACK_LABEL = "ccc.stack"
SPEC_HASH_LABEL = "ccc.spec-hash"

STACK_NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
EMAIL_PATTERN = re.compile(r"^[A-Za-z0-9_%+-][A-Za-z0-9._%+-]{0,63}@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$")
ENV_NAME_PATTERN = re.compile(r"^[A-Z_][A-Z0-9_]{0,63}$")

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


def __virtual__():
    return __virtualname__


# --------------------------------------------------------------------------------------------
# Pillar access


def deep_merge(base, override):
    """
    Merge ``override`` into a copy of ``base``: dicts recursively, everything else replaced
    (lists too), as Salt's smart pillar merge does.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.deep_merge '{"a": {"b": 1}}' '{"a": {"c": 2}}'
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

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.cluster_settings "$(salt-call --out=json pillar.get ccc)"
    """
    cluster = deep_merge(CLUSTER_DEFAULTS, (ccc or {}).get("cluster"))
    if not cluster.get("state_dir"):
        cluster["state_dir"] = os.path.join(cluster["mount_points"]["nfs"]["user_data"], ".ccc-salt")
    return cluster


def node_settings(ccc, minion_id):
    """
    Return ``ccc:node`` merged over the defaults, with the node name defaulting to the minion id.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.node_settings "$(salt-call --out=json pillar.get ccc)" node1
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

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.cluster_nodes "$(salt-call --out=json pillar.get ccc)"
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

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.select "$(salt-call --out=json pillar.get ccc)" containers=box1,box2
    """
    wanted_stacks = _split_filter(containers)
    wanted_users = _split_filter(users)
    entries = [entry for entry in (ccc or {}).get("containers") or [] if isinstance(entry, dict)]
    errors = []
    stacks, seen = [], set()
    for entry in entries:
        stack = entry.get("STACK_NAME")
        if not isinstance(stack, str) or not STACK_NAME_PATTERN.match(stack):
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

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.merged_record '{"a@b.org": {"USER_NAME": "a"}}' '{"STACK_NAME": "box1", "USER_EMAIL": "a@b.org"}'
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

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.container_record "$(salt-call --out=json pillar.get ccc)" box1
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
    if not isinstance(email, str) or not EMAIL_PATTERN.match(email):
        problems.append(f"{stack}: USER_EMAIL {email!r} is not a valid address")
    for key in ("CONTAINER_IMAGE", "USER_NAME", "USER_TYPE", "USER_FULLNAME"):
        if not record.get(key):
            problems.append(f"{stack}: {key} is required (in the container or its user record)")
    user_type = record.get("USER_TYPE")
    if user_type and user_type not in ((ccc or {}).get("user_types") or {}):
        problems.append(f"{stack}: USER_TYPE {user_type!r} is not defined in ccc:user_types")
    storage = record.get("STORAGE_NAME")
    if storage is not None and (not isinstance(storage, str) or not STACK_NAME_PATTERN.match(storage)):
        problems.append(f"{stack}: STORAGE_NAME {storage!r} must look like a STACK_NAME")
    for key in ("USER_FULLNAME", "USER_MENTOR"):
        value = record.get(key)
        if value is not None and (not isinstance(value, str) or re.search(r"[\x00-\x1f\x7f]", value)):
            problems.append(f"{stack}: {key} must be a single line of text")
    for key, value in (record.get("EXTRA_ENVS") or {}).items():
        if not ENV_NAME_PATTERN.match(str(key)) or not isinstance(value, (str, int, float, bool)):
            problems.append(f"{stack}: EXTRA_ENVS entry {key!r} must be NAME: scalar")
    if record.get("EXTRA_ENVS") is not None and not isinstance(record.get("EXTRA_ENVS"), dict):
        problems.append(f"{stack}: EXTRA_ENVS must be a mapping")
    # Pillar strings may come from users too: the user-settable keys obey the same schema.
    admin_section = {k: record[k] for k in ccc_settings.USER_SETTABLE_KEYS if k in record and k != "DEPLOYMENT_NODES"}
    problems.extend(f"{stack}: {msg}" for msg in ccc_settings.validate_user_settings(admin_section, stack, {}))
    return problems


# --------------------------------------------------------------------------------------------
# Resolution


class NodeFacts:
    """
    What the resolver needs to know about the node and the outside world.

    ``image_lookup(ref, credentials)`` returns ``(info, error)`` where ``info`` has ``labels``;
    ``github_keys(login)`` returns ``(keys, error)``. Tests pass plain lambdas.
    """

    def __init__(self, name, compute_devices=None, docker_gid=None, host_timezone_files=(),
                 image_lookup=None, github_keys=None):
        self.name = name
        self.compute_devices = compute_devices or {}
        self.docker_gid = docker_gid
        self.host_timezone_files = list(host_timezone_files)
        self.image_lookup = image_lookup or (lambda ref, credentials: ({"labels": {}}, None))
        self.github_keys = github_keys or (lambda login: ([], None))


def settings_paths(cluster, record):
    """
    Paths of a container's settings directory, file, feedback file and last-good copy.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.resolve box1  # shows these paths under "paths"
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

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.allowed_nodes "$(salt-call --out=json pillar.get ccc)" box1
    """
    record, problems = container_record(ccc, stack)
    if record is None or not isinstance(((ccc or {}).get("user_types") or {}).get(record.get("USER_TYPE")), dict):
        return []
    return _allowed_nodes(ccc["user_types"][record["USER_TYPE"]], record)


def _storage_in_use_by_others(ccc, record):
    """Home directory names that other, still active containers of the same user use."""
    return [
        other.get("STORAGE_NAME") or other.get("STACK_NAME")
        for other in (ccc or {}).get("containers") or []
        if isinstance(other, dict) and other.get("USER_EMAIL") == record["USER_EMAIL"]
        and other.get("STACK_NAME") != record["STACK_NAME"] and not ccc_settings.truthy(other.get("DISABLED"))
    ]


def _user_overrides(record, settings_text, settings_error, last_good, rules):
    """
    Decide which user settings apply. Returns (overrides, status, messages, to_store).

    An accepted file applies as it is (it was just checked against today's rules); a missing
    file means the admin's values. A rejected file keeps the last accepted settings, but those
    were accepted under the rules of their day (the image policy, the SHM maximum, the allowed
    nodes or the subdomains may have changed since): they are re-checked key by key, and a key
    that no longer passes is dropped, so the admin's value applies for that key only, and the
    user is told which and why (``_recheck_last_good``).
    """
    stack = record["STACK_NAME"]
    if settings_error is None and settings_text is None:
        return {}, "missing", [], None
    problems = []
    section = None
    if settings_error is not None:
        problems = [settings_error]
    else:
        try:
            section = ccc_settings.parse_settings_text(settings_text, stack)
        except ccc_settings.SettingsError as exc:
            problems = [str(exc)]
        else:
            problems = ccc_settings.validate_user_settings(section, stack, rules)
    if not problems:
        return section, "applied", [], section
    if last_good is None:
        kept = "Your settings were NOT applied; the administrator's defaults are used."
        return {}, "rejected", [kept] + problems, None
    kept = "Your settings were NOT applied; the container keeps your last accepted settings."
    overrides, dropped = _recheck_last_good(last_good, stack, rules)
    return overrides, "rejected", [kept] + problems + dropped, None


def _recheck_last_good(last_good, stack, rules):
    """The last accepted settings that still pass today's rules, each key checked on its own,
    and a message per key dropped. Returns ``(settings, messages)``."""
    if not isinstance(last_good, dict):
        return {}, ["Your last accepted settings cannot be read; the administrator's defaults are used."]
    kept, messages = {}, []
    for key, value in last_good.items():
        problems = ccc_settings.validate_user_settings({key: value}, stack, rules)
        if problems:
            messages.append(
                "A last accepted setting is no longer allowed and is not used (the administrator's value"
                f" applies instead): {'; '.join(problems)}"
            )
        else:
            kept[key] = value
    return kept, messages


def _reserved_subdomains(cluster, nodes):
    reserved = []
    for name in cluster.get("reserved_subdomains") or []:
        if "{node}" in name:
            reserved.extend(name.replace("{node}", node) for node in nodes)
        else:
            reserved.append(name)
    return reserved


def taken_subdomains(ccc, stored_settings, except_stack=None):
    """
    Map every FRP HTTP subdomain in use (as written and, when prefixed, as ``<node>-<sub>`` for
    every cluster node) to its STACK_NAME, from pillar and accepted user settings.

    ``stored_settings`` maps STACK_NAME -> the last accepted user section (or None).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.taken_subdomains "$(salt-call --out=json pillar.get ccc)" '{}'
    """
    taken = {}
    users = (ccc or {}).get("users") or {}
    nodes = cluster_nodes(ccc)
    for entry in (ccc or {}).get("containers") or []:
        if not isinstance(entry, dict):
            continue
        stack = entry.get("STACK_NAME")
        record = merged_record(users, entry)
        frp = _merge_frp(record.get("FRP_PORTS"), (stored_settings.get(stack) or {}).get("FRP_PORTS"))
        for http in (frp or {}).get("HTTP") or []:
            if isinstance(http, dict) and stack != except_stack and http.get("subdomain"):
                subdomain = str(http["subdomain"])
                # The raw name and every name FRP will serve (``<node>-<sub>`` when prefixed).
                prefix = http.get("subdomain_hostname_prefix", True)
                for name in [subdomain] + ccc_settings.effective_subdomains(subdomain, prefix, nodes):
                    taken.setdefault(name, stack)
    return taken


def _merge_frp(admin, user):
    """CCC semantics: the user's TCP list replaces the admin's, and likewise HTTP."""
    merged = dict(admin or {})
    merged.update(user or {})
    return merged


def resolve_container(ccc, stack, facts, settings_text=None, settings_error=None, last_good=None,
            taken=None):
    """
    Work out what should happen to one container on one node, and why.

    Returns a dict with ``action`` (``run``, ``remove`` or ``hold``), ``reason``, ``spec`` (for
    ``run``), ``placement``, ``admin_errors``, ``user_messages``, ``notes``, ``settings_status``
    and ``settings_to_store``. ``hold`` means: change nothing and report the errors.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.resolve box1
    """
    cluster = cluster_settings(ccc)
    result = {
        "stack": stack, "node": facts.name, "action": "hold", "reason": "", "spec": None,
        "placement": [], "admin_errors": [], "user_messages": [], "notes": [],
        "settings_status": None, "settings_to_store": None, "purge": False, "paths": None,
        "default_settings_text": None, "directories": [], "record": None,
    }
    record, problems = container_record(ccc, stack)
    if problems:
        result["admin_errors"] = problems
        result["reason"] = "the admin configuration of this container is invalid"
        return result
    paths = settings_paths(cluster, record)
    result.update(paths=paths, record=record)

    if ccc_settings.truthy(record.get("DISABLED")):
        purge = ccc_settings.truthy(record.get("PURGE_USER_DATA"))
        result.update(action="remove", reason="DISABLED by the administrators", purge=purge)
        if purge:
            result["storage_in_use"] = _storage_in_use_by_others(ccc, record)
        return result
    if ccc_settings.truthy(record.get("PURGE_USER_DATA")):
        result["notes"].append("PURGE_USER_DATA is ignored: it acts only together with DISABLED")

    user_type = ccc["user_types"][record["USER_TYPE"]] or {}
    allowed_nodes = _allowed_nodes(user_type, record)
    nodes = cluster_nodes(ccc)
    rules = {
        "allowed_nodes": allowed_nodes,
        "cluster_nodes": nodes,
        "image_prefixes": cluster["image_policy"].get("allowed_prefixes") or [],
        "shm_size_max": ccc_settings.parse_size(cluster["shm_size_max"]) if cluster.get("shm_size_max") else None,
        "reserved_subdomains": _reserved_subdomains(cluster, nodes),
        "taken_subdomains": {k: v for k, v in (taken or {}).items() if v != stack},
    }
    overrides, status, messages, to_store = _user_overrides(record, settings_text, settings_error, last_good, rules)
    result.update(settings_status=status, settings_to_store=to_store)
    result["user_messages"].extend(messages)
    if status == "missing":
        result["default_settings_text"] = default_settings_text(record)

    def value(key, default=None):
        return overrides[key] if key in overrides else record.get(key, default)

    deployment = value("DEPLOYMENT_NODES") or user_type.get("default_nodes") or []
    placement = [node for node in deployment if node in allowed_nodes]
    refused = [node for node in deployment if node not in allowed_nodes]
    if refused:
        result["notes"].append(f"nodes not allowed for this container are ignored: {', '.join(refused)}")
    result["placement"] = placement
    if not placement:
        message = "There is no node to run this container on: none of DEPLOYMENT_NODES is allowed."
        result["admin_errors"].append(
            f"{stack}: no allowed node in DEPLOYMENT_NODES {ccc_settings.quote_value(deployment)}"
        )
        result["user_messages"].append(message)
        result["reason"] = "empty placement"
        return result
    if facts.name not in placement:
        result.update(action="remove", reason=f"placed on {', '.join(placement)}")
        return result

    spec, spec_errors = _build_spec(ccc, cluster, record, user_type, overrides, value, facts, result)
    if spec_errors:
        result["admin_errors"].extend(spec_errors)
        result["reason"] = "the container cannot be built on this node"
        return result
    spec["labels"][SPEC_HASH_LABEL] = spec_hash(spec)
    result.update(action="run", reason=f"placed on {', '.join(placement)}", spec=spec)
    return result


def _build_spec(ccc, cluster, record, user_type, overrides, value, facts, result):
    stack = record["STACK_NAME"]
    email = record["USER_EMAIL"]
    errors = []
    access = user_type.get("access")
    networks = list((cluster.get("access_networks") or {}).get(access) or [])
    if not networks:
        errors.append(f"{stack}: user type access {access!r} has no networks in ccc:cluster:access_networks")
    if cluster.get("claims_network") and cluster["claims_network"] not in networks:
        networks.append(cluster["claims_network"])

    image, image_info = _choose_image(cluster, record, overrides, facts, result, errors)

    user_name = value("USER_NAME")
    home = f"/home/{user_name}"
    mounts, directories = _mounts(cluster, record, user_type, value, facts, access, errors)
    result["directories"] = directories

    pubkeys = [line.strip() for line in (value("USER_PUBKEY") or "").split("\n") if line.strip()]
    login = value("USER_PUBKEY_FROM_GITHUB")
    if login:
        keys, error = facts.github_keys(login)
        if error:
            result["user_messages"].append(f"USER_PUBKEY_FROM_GITHUB: {error}")
        pubkeys.extend(key for key in keys or [] if key not in pubkeys)

    install_keys = value("INSTALL_REPOSITORY_KEYS") or ""
    install_sources = value("INSTALL_REPOSITORY_SOURCES") or ""
    install_packages = value("INSTALL_PACKAGES") or ""
    env_groups = None
    if ccc_settings.truthy(record.get("ENABLE_DOCKER_ACCESS")):
        if facts.docker_gid is None:
            errors.append(f"{stack}: ENABLE_DOCKER_ACCESS needs a 'docker' group on {facts.name}")
        env_groups = f"docker={facts.docker_gid}"
        install_keys = ",".join(filter(None, ["https://download.docker.com/linux/ubuntu/gpg", install_keys]))
        install_sources = ",".join(filter(None, ["https://download.docker.com/linux/ubuntu stable", install_sources]))
        install_packages = " ".join(filter(None, ["docker-ce-cli", install_packages]))

    device_ids, missing_groups = ccc_devices.device_ids_for_groups(
        list(user_type.get("allowed_device_groups") or []) + list(record.get("ADDITIONAL_DEVICE_GROUPS") or []),
        facts.compute_devices,
    )
    for group in missing_groups:
        result["notes"].append(f"device group {group!r} has no GPUs on {facts.name}")

    environment = {}
    for key, extra in (record.get("EXTRA_ENVS") or {}).items():
        environment[str(key)] = str(extra)
    environment.update({
        "USER_NAME": user_name,
        "USER_ID": str(cluster["nfs_user"]["uid"]),
        "USER_PUBKEY": "\n".join(pubkeys),
        "INSTALL_PACKAGES": install_packages,
        "INSTALL_REPOSITORY_KEYS": install_keys,
        "INSTALL_REPOSITORY_SOURCES": install_sources,
        "RUNIT_STATUS_FILE": f"{home}/.containers/{stack}.status",
        "RUNIT_WORKING_ENV_FILE": f"{home}/.containers/{stack}.env-backup",
        "APPS": ":".join(cluster.get("apps") or []),
        "CONTAINER_NAME": stack,
        "CONTAINER_NODE": facts.name,
        "CONTAINER_IMAGE": image,
        "CONTAINER_WELCOME_MSG": welcome_message(cluster, stack, user_name),
        # Explicit, so an image default of "all" can never expose GPUs the user was not given.
        "NVIDIA_VISIBLE_DEVICES": ",".join(device_ids) if device_ids else "void",
    })
    if env_groups:
        environment["USER_GROUPS"] = env_groups

    frp = _merge_frp(record.get("FRP_PORTS"), overrides.get("FRP_PORTS"))
    labels, ports = frp_labels(frp, email, user_name, facts.name)
    labels.update(identity_labels(record))
    for image_label in (image_info or {}).get("labels") or {}:
        # Image labels are inherited by Docker; an frp.* label the admin did not grant is voided.
        if image_label.startswith("frp.") and image_label not in labels:
            labels[image_label] = ""
    labels.update({MANAGED_BY_LABEL: MANAGED_BY_VALUE, STACK_LABEL: stack})

    privileged = ccc_settings.truthy(record.get("RUN_PRIVILEGED"))
    hardening = hardening_settings(cluster, user_type, record)
    spec = {
        "name": stack,
        "image": image,
        "hostname": facts.name,
        "environment": dict(sorted(environment.items())),
        "labels": dict(sorted(labels.items())),
        "mounts": mounts,
        "networks": networks,
        "exposed_ports": ports,
        "shm_size": ccc_settings.parse_size(value("SHM_SIZE") or cluster["shm_size_default"]),
        "restart_policy": "unless-stopped",
        "privileged": privileged,
        "security_opt": ["seccomp=unconfined"] if privileged else (
            ["no-new-privileges"] if hardening["no_new_privileges"] else []),
        "cap_drop": [] if privileged else sorted(hardening["cap_drop"]),
        "pids_limit": hardening["pids_limit"],
        "device_ids": device_ids,
        "runtime": cluster.get("runtime") or None,
    }
    return spec, errors


def hardening_settings(cluster, user_type, record):
    """
    The container hardening: ``ccc:cluster:hardening`` < the user type's ``hardening`` < the
    container's ``HARDENING`` (admin pillar only). ``RUN_PRIVILEGED`` turns it off, as the admin
    asked for a privileged container.

    Defaults keep what CCC images need (root boot hooks run apt, sshd privilege separation,
    runit's chpst) and take away what a user who became root in the container could abuse:
    raw sockets (ARP spoofing on the shared bridges), device nodes, file capabilities, setuid
    escalation, fork bombs.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.hardening_settings '{"hardening": {"pids_limit": 100}}' '{}' '{}'
    """
    merged = deep_merge(CLUSTER_DEFAULTS["hardening"], (cluster or {}).get("hardening"))
    merged = deep_merge(merged, (user_type or {}).get("hardening"))
    merged = deep_merge(merged, (record or {}).get("HARDENING") if isinstance((record or {}).get("HARDENING"), dict) else {})
    limit = merged.get("pids_limit")
    return {
        "no_new_privileges": ccc_settings.truthy(merged.get("no_new_privileges")),
        "cap_drop": sorted({str(cap).upper().removeprefix("CAP_") for cap in merged.get("cap_drop") or []}),
        "pids_limit": int(limit) if limit not in (None, 0, False, "") else None,
    }


def _choose_image(cluster, record, overrides, facts, result, errors):
    admin_image = record["CONTAINER_IMAGE"]
    wanted = overrides.get("CONTAINER_IMAGE", admin_image)
    if wanted != admin_image:
        credentialed = any(wanted.startswith(p) for p in cluster["image_policy"].get("credentialed_prefixes") or [])
        info, error = facts.image_lookup(wanted, credentialed)
        if info is not None:
            return wanted, info
        result["user_messages"].append(
            f"IMAGE ERROR: cannot use {ccc_settings.quote_value(wanted)} ({error}); the default image"
            f" {admin_image!r} is used instead."
        )
    info, error = facts.image_lookup(admin_image, True)
    if info is None:
        errors.append(f"{record['STACK_NAME']}: the admin image {admin_image!r} is not available: {error}")
    return admin_image, info


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
        if not STACK_NAME_PATTERN.match(str(group)):
            errors.append(f"{stack}: private data group {group!r} is not a valid name")
            continue
        mounts.append(pinned(f"group-{group}", nfs["private_data"], [group], f"/storage/private/{group}"))
    if ccc_settings.truthy(record.get("ADMIN_USER_ACCESS")):
        mounts.append(bind(nfs["user_data"], "/storage/admin/users"))
        mounts.append(bind(nfs["private_data"], "/storage/admin/privates"))
        mounts.append(bind(cluster["admin_log_dir"], f"/storage/admin/logs-{facts.name}"))
    if ccc_settings.truthy(record.get("ENABLE_DOCKER_ACCESS")):
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
        for group in dict.fromkeys(private_groups + live_groups) if STACK_NAME_PATTERN.match(str(group))
    )
    if ccc_settings.truthy(record.get("ADMIN_USER_ACCESS")):
        directories.append({"root": cluster["admin_log_dir"], "parts": [], "owner": (0, 0), "mode": 0o755,
                            "path": cluster["admin_log_dir"]})
    return mounts, directories


def private_mount_groups(user_type, record):
    """
    The "live" private data groups of a container: bind-mounted on the node under the user's
    ``private/`` directory (seen in the container through the rslave ``/storage/private``), so
    granting or revoking one never recreates the container. Returns ``(groups, problems)``.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.private_mount_groups '{"allowed_private_data_mount_groups": ["lab"]}' '{}'
    """
    groups, problems = [], []
    for group in list((user_type or {}).get("allowed_private_data_mount_groups") or []) + list(
        (record or {}).get("ADDITIONAL_PRIVATE_DATA_MOUNT_GROUPS") or []
    ):
        if not isinstance(group, str) or not STACK_NAME_PATTERN.match(group):
            problems.append(f"private data mount group {group!r} is not a valid name")
        elif group not in groups:
            groups.append(group)
    return groups, problems


def wanted_private_mounts(ccc, stacks_on_node):
    """
    Map STACK_NAME -> its live private groups, for the containers running on this node. Each
    container has its own ``private`` pin, so a grant reaches exactly the containers it names
    and revoking it from one never unmounts it in another.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.wanted_private_mounts "$(salt-call --out=json pillar.get ccc)" '["box1"]'
    """
    wanted = {}
    for stack in stacks_on_node:
        record, problems = container_record(ccc, stack)
        if record is None or problems:
            continue
        user_type = ((ccc or {}).get("user_types") or {}).get(record.get("USER_TYPE")) or {}
        wanted[stack], _ = private_mount_groups(user_type, record)
    return wanted


def frp_labels(frp_ports, email, user_name, node):
    """
    Build the FRP labels (a real dict, never text) and the exposed ports of a container.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.frp_labels '{"TCP": [22]}' a@b.org alice node1
    """
    labels, ports = {}, []
    for port in (frp_ports or {}).get("TCP") or []:
        labels[f"frp.{int(port)}"] = "tcp"
        labels[f"frp.{int(port)}.health_check"] = "false"
        ports.append(int(port))
    labels["frp.enabled"] = "true"
    labels["frp.notify_email"] = email
    for http in (frp_ports or {}).get("HTTP") or []:
        port = int(http["port"])
        without_pass = bool(http.get("https_without_pass"))
        labels[f"frp.{port}"] = "https" if without_pass else "http"
        prefix = http.get("subdomain_hostname_prefix", True)
        labels[f"frp.{port}.http.subdomain"] = f"{node}-{http['subdomain']}" if prefix else http["subdomain"]
        if "pass" in http and not without_pass:
            labels[f"frp.{port}.http.username"] = http.get("user") or user_name
            labels[f"frp.{port}.http.password"] = str(http["pass"])
        health = http.get("health_check", "false")
        labels[f"frp.{port}.health_check"] = "true" if ccc_settings.truthy(health) else "false"
        ports.append(port)
    return labels, list(dict.fromkeys(ports))


def identity_labels(record):
    """
    The ``ccc-user.*`` labels Patroller and the FRP notifier read.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.identity_labels '{"USER_FULLNAME": "A B", "USER_EMAIL": "a@b.org"}'
    """
    labels = {"ccc-user.name": record["USER_FULLNAME"], "ccc-user.email": record["USER_EMAIL"]}
    if record.get("USER_MENTOR"):
        labels["ccc-user.mentor"] = record["USER_MENTOR"]
    return labels


def welcome_message(cluster, stack, user_name):
    """
    The ``CONTAINER_WELCOME_MSG`` shown at SSH login (constant per container: no error text, so a
    message elsewhere never forces a restart).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.welcome_message '{"apps": []}' box1 alice
    """
    names = sorted({
        os.path.splitext(os.path.basename(app.rsplit(",", 1)[-1]))[0] for app in cluster.get("apps") or []
    })
    return "\n".join([
        f" * Pre-installed APPS: '{' '.join(names)}'",
        "",
        "Available shared and local storage:",
        " * /storage/user         * /storage/local/hdd",
        " * /storage/group        * /storage/local/ssd",
        " * /storage/datasets",
        "",
        f"Container config: '/home/{user_name}/.containers/{stack}.yml'"
        f" (last deploy report: '{stack}.deploy')",
        "",
        f"FOR MORE DOCUMENTATION SEE: {cluster.get('docs_url', '')}",
    ])


def spec_hash(spec):
    """
    Stable hash of a container spec (without its own hash label); stored as a label so a no-op
    apply compares one string instead of the whole container.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.spec_hash '{"name": "box1"}'
    """
    material = copy.deepcopy(spec)
    material.get("labels", {}).pop(SPEC_HASH_LABEL, None)
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:20]


def default_settings_text(record):
    """
    The commented settings file written for a container that has none.

    Every line is commented, so the file changes nothing until the user uncomments a line.
    Admin values appear as JSON scalars (valid YAML), never raw text.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.default_settings_text '{"STACK_NAME": "box1", "CONTAINER_IMAGE": "img"}'
    """
    stack = record["STACK_NAME"]

    def show(key, default):
        return json.dumps(record.get(key, default))

    lines = [
        f"# Settings of your container '{stack}'. Uncomment a line and save to change it;",
        "# the container is redeployed within seconds. What happened is written to",
        f"# '{stack}.deploy' next to this file (errors included).",
        "#",
        "# You may set: CONTAINER_IMAGE, DEPLOYMENT_NODES, INSTALL_PACKAGES, INSTALL_REPOSITORY_KEYS,",
        "# INSTALL_REPOSITORY_SOURCES, SHM_SIZE, USER_NAME, USER_PUBKEY, USER_PUBKEY_FROM_GITHUB,",
        "# FRP_PORTS and USE_HOST_TIMEDATE. Values below are your current defaults.",
        f"{stack}:",
        f"#  CONTAINER_IMAGE: {show('CONTAINER_IMAGE', '')}",
        f"#  DEPLOYMENT_NODES: {show('DEPLOYMENT_NODES', [])}",
        f"#  INSTALL_PACKAGES: {show('INSTALL_PACKAGES', '')}",
        f"#  INSTALL_REPOSITORY_KEYS: {show('INSTALL_REPOSITORY_KEYS', '')}",
        f"#  INSTALL_REPOSITORY_SOURCES: {show('INSTALL_REPOSITORY_SOURCES', '')}",
        f"#  SHM_SIZE: {show('SHM_SIZE', '2g')}",
        f"#  USER_NAME: {show('USER_NAME', '')}",
        f"#  USER_PUBKEY: {show('USER_PUBKEY', '')}",
        f"#  USER_PUBKEY_FROM_GITHUB: {show('USER_PUBKEY_FROM_GITHUB', '')}",
        "#  USE_HOST_TIMEDATE: false",
    ]
    frp = record.get("FRP_PORTS") or {}
    if frp:
        lines.append("#  FRP_PORTS:")
        lines.append(f"#    TCP: {json.dumps([int(p) for p in frp.get('TCP') or []])}")
        if frp.get("HTTP"):
            lines.append("#    HTTP:")
            for http in frp["HTTP"]:
                shown = {k: v for k, v in http.items() if k != "pass"}
                lines.append(f"#      - {json.dumps(shown, sort_keys=True)}")
    return "\n".join(lines) + "\n"


def feedback_report(resolution, outcome, when):
    """
    The plain-language report written to ``~/.containers/<STACK_NAME>.deploy``.

    ``outcome`` is a short sentence about what the node did. Returns ``(text, body)``; the body
    (without the timestamp) decides whether the file needs rewriting.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.resolve box1  # the report a deploy would write is under "feedback"
    """
    spec = resolution.get("spec") or {}
    lines = [
        f"container: {resolution['stack']}",
        f"node: {resolution['node']}",
        f"result: {outcome}",
        f"placement: {', '.join(resolution.get('placement') or []) or 'none'}",
    ]
    status_words = {
        "applied": "your settings file was accepted",
        "missing": "no settings file yet (a commented one was written for you); defaults used",
        "rejected": "your settings file was REJECTED (see messages)",
    }
    if resolution.get("settings_status"):
        lines.append(f"settings: {status_words[resolution['settings_status']]}")
    if spec:
        gpus = spec["device_ids"]
        lines.extend([
            f"image: {spec['image']}",
            f"gpus: {', '.join(gpus) if gpus else 'none'}",
            f"shm_size: {ccc_settings.format_size(spec['shm_size'])}",
            f"packages: {spec['environment']['INSTALL_PACKAGES'] or 'none'}",
            f"ports: {', '.join(str(p) for p in spec['exposed_ports']) or 'none'}",
        ])
    body = _bounded_body(lines, resolution.get("user_messages") or [], MAX_REPORT_BYTES - _REPORT_HEADER_BYTES)
    return f"# ccc-salt deploy report, written {when}\n{body}", body


MAX_REPORT_BYTES = 8 * 1024  # the whole .deploy report
_REPORT_HEADER_BYTES = 128  # kept for its first line, "# ccc-salt deploy report, written <when>"


def _bounded_body(lines, messages, limit):
    """
    The report body: ``lines``, then as many messages as fit in ``limit`` bytes (UTF-8) and a
    note of how many did not. The report lands in the user's home on every change, so neither
    one long message nor many of them may make it large.
    """
    body = "\n".join(lines) + "\n" + ("messages:\n" if messages else "")
    used = len(body.encode())
    for index, message in enumerate(messages):
        line = f"  - {message}\n"
        if used + len(line.encode()) > limit - 128:  # 128: room for the note below
            body += (f"  - … {len(messages) - index} more message(s) not shown:"
                     f" this report is limited to {MAX_REPORT_BYTES // 1024} KiB\n")
            break
        body += line
        used += len(line.encode())
    return body.encode()[:limit].decode(errors="ignore")  # even over-long lines above stay within the limit


# --------------------------------------------------------------------------------------------
# Salt-facing wrappers


def plain(value):
    """
    Deep copy of pillar data as plain dicts and lists.

    Salt 3008 wraps pillar in display-masking containers; the resolver works on plain data
    (and its results must show real values to the admin).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.settings  # returns plain values
    """
    if isinstance(value, dict):
        return {key: plain(item) for key, item in dict.items(value)}
    if isinstance(value, list):
        return [plain(item) for item in list.__iter__(value)]
    return value


def pillar_ccc(pillar):
    """
    The ``ccc`` pillar key as plain data (``{}`` when missing).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.settings
    """
    return plain((pillar or {}).get("ccc") or {})


def _pillar_ccc():
    return pillar_ccc(__pillar__)


def settings():
    """
    Show the effective cluster and node settings (pillar merged over the defaults).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.settings
    """
    ccc = _pillar_ccc()
    return {"cluster": cluster_settings(ccc), "node": node_settings(ccc, __grains__["id"])}


def selection(containers=None, users=None):
    """
    Show which containers a ``containers=``/``users=`` filter selects.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.selection containers=box1 users=alice@example.org
    """
    return select(_pillar_ccc(), containers, users)


def resolve(name):
    """
    Print what would run on this node for one container, and why, without changing anything
    (no pull, no files written).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.resolve box1
    """
    return __salt__["ccc_docker.redact"](__salt__["ccc_docker.plan"](name, pull=False))
