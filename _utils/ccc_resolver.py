"""
The pure resolver: pillar + a user's settings + node facts -> what runs (a Docker spec) and
what the user is told. No I/O; callers read everything first (``ccc_plan``).
"""

import copy
import hashlib
import json

import ccc_device_groups
import ccc_mounts
import ccc_pillar
import ccc_quote
import ccc_report
import ccc_rules
import ccc_schema
import ccc_settings_file


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


def _storage_in_use_by_others(ccc, record):
    """Home directory names that other, still active containers of the same user use."""
    return [
        other.get("STORAGE_NAME") or other.get("STACK_NAME")
        for other in (ccc or {}).get("containers") or []
        if isinstance(other, dict) and other.get("USER_EMAIL") == record["USER_EMAIL"]
        and other.get("STACK_NAME") != record["STACK_NAME"] and not ccc_rules.truthy(other.get("DISABLED"))
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
            section = ccc_settings_file.parse_settings_text(settings_text, stack)
        except ccc_settings_file.SettingsError as exc:
            problems = [str(exc)]
        else:
            problems = ccc_schema.validate_user_settings(section, stack, rules)
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
        problems = ccc_schema.validate_user_settings({key: value}, stack, rules)
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
    """
    taken = {}
    users = (ccc or {}).get("users") or {}
    nodes = ccc_pillar.cluster_nodes(ccc)
    for entry in (ccc or {}).get("containers") or []:
        if not isinstance(entry, dict):
            continue
        stack = entry.get("STACK_NAME")
        record = ccc_pillar.merged_record(users, entry)
        frp = _merge_frp(record.get("FRP_PORTS"), (stored_settings.get(stack) or {}).get("FRP_PORTS"))
        for http in (frp or {}).get("HTTP") or []:
            if isinstance(http, dict) and stack != except_stack and http.get("subdomain"):
                subdomain = str(http["subdomain"])
                # The raw name and every name FRP will serve (``<node>-<sub>`` when prefixed).
                prefix = http.get("subdomain_hostname_prefix", True)
                for name in [subdomain] + ccc_schema.effective_subdomains(subdomain, prefix, nodes):
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
    """
    cluster = ccc_pillar.cluster_settings(ccc)
    result = {
        "stack": stack, "node": facts.name, "action": "hold", "reason": "", "spec": None,
        "placement": [], "admin_errors": [], "user_messages": [], "notes": [],
        "settings_status": None, "settings_to_store": None, "purge": False, "paths": None,
        "default_settings_text": None, "directories": [], "record": None,
    }
    record, problems = ccc_pillar.container_record(ccc, stack)
    if problems:
        result["admin_errors"] = problems
        result["reason"] = "the admin configuration of this container is invalid"
        return result
    paths = ccc_pillar.settings_paths(cluster, record)
    result.update(paths=paths, record=record)

    if ccc_rules.truthy(record.get("DISABLED")):
        purge = ccc_rules.truthy(record.get("PURGE_USER_DATA"))
        result.update(action="remove", reason="DISABLED by the administrators", purge=purge)
        if purge:
            result["storage_in_use"] = _storage_in_use_by_others(ccc, record)
        return result
    if ccc_rules.truthy(record.get("PURGE_USER_DATA")):
        result["notes"].append("PURGE_USER_DATA is ignored: it acts only together with DISABLED")

    user_type = ccc["user_types"][record["USER_TYPE"]] or {}
    allowed_nodes = ccc_pillar._allowed_nodes(user_type, record)
    nodes = ccc_pillar.cluster_nodes(ccc)
    rules = {
        "allowed_nodes": allowed_nodes,
        "cluster_nodes": nodes,
        "image_prefixes": cluster["image_policy"].get("allowed_prefixes") or [],
        "shm_size_max": ccc_schema.parse_size(cluster["shm_size_max"]) if cluster.get("shm_size_max") else None,
        "reserved_subdomains": _reserved_subdomains(cluster, nodes),
        "taken_subdomains": {k: v for k, v in (taken or {}).items() if v != stack},
    }
    overrides, status, messages, to_store = _user_overrides(record, settings_text, settings_error, last_good, rules)
    result.update(settings_status=status, settings_to_store=to_store)
    result["user_messages"].extend(messages)
    if status == "missing":
        result["default_settings_text"] = ccc_report.default_settings_text(record)

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
            f"{stack}: no allowed node in DEPLOYMENT_NODES {ccc_quote.quote_value(deployment)}"
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
    spec["labels"][ccc_rules.SPEC_HASH_LABEL] = spec_hash(spec)
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
    mounts, directories = ccc_mounts._mounts(cluster, record, user_type, value, facts, access, errors)
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
    if ccc_rules.truthy(record.get("ENABLE_DOCKER_ACCESS")):
        if facts.docker_gid is None:
            errors.append(f"{stack}: ENABLE_DOCKER_ACCESS needs a 'docker' group on {facts.name}")
        env_groups = f"docker={facts.docker_gid}"
        install_keys = ",".join(filter(None, ["https://download.docker.com/linux/ubuntu/gpg", install_keys]))
        install_sources = ",".join(filter(None, ["https://download.docker.com/linux/ubuntu stable", install_sources]))
        install_packages = " ".join(filter(None, ["docker-ce-cli", install_packages]))

    device_ids, missing_groups = ccc_device_groups.device_ids_for_groups(
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
        "CONTAINER_WELCOME_MSG": ccc_report.welcome_message(cluster, stack, user_name),
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
    labels.update({ccc_rules.MANAGED_BY_LABEL: ccc_rules.MANAGED_BY_VALUE, ccc_rules.STACK_LABEL: stack})

    privileged = ccc_rules.truthy(record.get("RUN_PRIVILEGED"))
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
        "shm_size": ccc_schema.parse_size(value("SHM_SIZE") or cluster["shm_size_default"]),
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
    """
    merged = ccc_pillar.deep_merge(ccc_pillar.CLUSTER_DEFAULTS["hardening"], (cluster or {}).get("hardening"))
    merged = ccc_pillar.deep_merge(merged, (user_type or {}).get("hardening"))
    merged = ccc_pillar.deep_merge(merged, (record or {}).get("HARDENING") if isinstance((record or {}).get("HARDENING"), dict) else {})
    limit = merged.get("pids_limit")
    return {
        "no_new_privileges": ccc_rules.truthy(merged.get("no_new_privileges")),
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
            f"IMAGE ERROR: cannot use {ccc_quote.quote_value(wanted)} ({error}); the default image"
            f" {admin_image!r} is used instead."
        )
    info, error = facts.image_lookup(admin_image, True)
    if info is None:
        errors.append(f"{record['STACK_NAME']}: the admin image {admin_image!r} is not available: {error}")
    return admin_image, info


def frp_labels(frp_ports, email, user_name, node):
    """
    Build the FRP labels (a real dict, never text) and the exposed ports of a container.
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
        labels[f"frp.{port}.health_check"] = "true" if ccc_rules.truthy(health) else "false"
        ports.append(port)
    return labels, list(dict.fromkeys(ports))


def identity_labels(record):
    """
    The ``ccc-user.*`` labels Patroller and the FRP notifier read.
    """
    labels = {"ccc-user.name": record["USER_FULLNAME"], "ccc-user.email": record["USER_EMAIL"]}
    if record.get("USER_MENTOR"):
        labels["ccc-user.mentor"] = record["USER_MENTOR"]
    return labels


def spec_hash(spec):
    """
    Stable hash of a container spec (without its own hash label); stored as a label so a no-op
    apply compares one string instead of the whole container.
    """
    material = copy.deepcopy(spec)
    material.get("labels", {}).pop(ccc_rules.SPEC_HASH_LABEL, None)
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:20]
