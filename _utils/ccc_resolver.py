"""
The pure resolver: pillar + a user's settings + node facts -> what runs on this node (a Docker
spec), why, and what the user and the admin are told. No I/O: the caller reads everything
first (settings file, last accepted settings, node facts) and acts on the result.
"""

import copy
import hashlib
import json

import ccc_covers
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
    """Home directory names that other, still active containers of the same user use (a purge
    keeps those)."""
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
    """``ccc:cluster:reserved_subdomains`` with ``{node}`` expanded for every cluster node."""
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
    return taken_except(subdomain_claims(ccc, stored_settings), except_stack)


def subdomain_claims(ccc, stored_settings):
    """Every FRP HTTP subdomain in use (``taken_subdomains``) -> the STACK_NAMEs that claim it,
    in pillar order: read once per run, then ``taken_except`` per container (each container's
    own walk over every other was the square of the containers)."""
    claims = {}
    users = (ccc or {}).get("users") or {}
    nodes = ccc_pillar.cluster_nodes(ccc)
    for entry in (ccc or {}).get("containers") or []:
        stack = entry.get("STACK_NAME") if isinstance(entry, dict) else None
        if stack is None:
            continue
        stored = (stored_settings or {}).get(stack)
        frp = _merge_frp(ccc_pillar.merged_record(users, entry).get("FRP_PORTS"),
                         stored.get("FRP_PORTS") if isinstance(stored, dict) else None)
        for http in frp.get("HTTP") if isinstance(frp.get("HTTP"), list) else []:
            if isinstance(http, dict) and http.get("subdomain"):
                # The raw name and every name FRP will serve (``<node>-<sub>`` when prefixed).
                for name in [str(http["subdomain"])] + ccc_schema.served_subdomains(http, nodes):
                    owners = claims.setdefault(name, [])
                    if stack not in owners:
                        owners.append(stack)
    return claims


def taken_except(claims, except_stack=None):
    """``taken_subdomains`` from ``subdomain_claims``: each name -> its first claimant other
    than ``except_stack``."""
    taken = {}
    for name, owners in claims.items():
        for stack in owners:
            if stack != except_stack:
                taken[name] = stack
                break
    return taken


def _merge_frp(admin, user):
    """CCC semantics: the user's TCP list replaces the admin's, and likewise HTTP."""
    merged = dict(admin) if isinstance(admin, dict) else {}
    merged.update(user if isinstance(user, dict) else {})
    return merged


def _effective(record, overrides):
    """
    The record as it applies: the user's accepted settings over the admin's record, each key
    replacing the admin's value, except ``FRP_PORTS`` (merged per list, ``_merge_frp``).
    """
    effective = {**record, **overrides}
    effective["FRP_PORTS"] = _merge_frp(record.get("FRP_PORTS"), overrides.get("FRP_PORTS"))
    return effective


def resolve_container(ccc, stack, facts, settings_text=None, settings_error=None, last_good=None,
            taken=None, cluster=None, record=None):
    """
    Work out what should happen to one container on one node, and why.

    Returns a dict with ``action`` (``run``, ``remove`` or ``hold``), ``reason``, ``spec`` (for
    ``run``), ``placement`` (with ``placement_source`` and ``allowed_nodes``),
    ``device_groups``, ``admin_errors``, ``user_messages``, ``notes``, ``settings_status`` and
    ``settings_to_store``. ``hold`` means: change nothing and report the errors. Each step
    below may decide, and then the result is returned as it stands. ``cluster``
    (``ccc_pillar.cluster_settings``) and ``record`` (``ccc_pillar.container_record``'s
    ``(record, problems)``) are passed by a caller that has them (``ccc_plan``).
    """
    cluster = ccc_pillar.cluster_settings(ccc) if cluster is None else cluster
    record, problems = ccc_pillar.container_record(ccc, stack) if record is None else record
    result = _new_result(stack, facts.name)
    if problems:
        return _held(result, problems, "the admin configuration of this container is invalid")
    result.update(paths=ccc_pillar.settings_paths(cluster, record), record=record)
    if _disabled(ccc, record, result):
        return result
    user_type = ccc_pillar.user_type_of(ccc, record)
    rules = _cluster_rules(ccc, cluster, user_type, record, taken)
    overrides = _user_settings(result, record, settings_text, settings_error, last_good, rules)
    if not _placed_here(result, user_type, record, overrides.get("DEPLOYMENT_NODES")):
        return result
    spec, errors = _build_spec(cluster, record, _effective(record, overrides), user_type, facts, result)
    if errors:
        return _held(result, errors, "the container cannot be built on this node")
    spec["labels"][ccc_rules.SPEC_HASH_LABEL] = spec_hash(spec)
    result.update(action="run", spec=spec)
    return result


def _new_result(stack, node):
    """A resolution that holds until a step decides otherwise."""
    return {
        "stack": stack, "node": node, "action": "hold", "reason": "", "spec": None,
        "placement": [], "placement_source": None, "allowed_nodes": None, "device_groups": {},
        "admin_errors": [], "user_messages": [], "notes": [],
        "settings_status": None, "settings_to_store": None, "purge": False, "paths": None,
        "default_settings_text": None, "directories": [], "record": None,
    }


def _held(result, errors, reason):
    """``result`` decided as ``hold`` (change nothing) for the admin ``errors``."""
    result["admin_errors"].extend(errors)
    result["reason"] = reason
    return result


def _disabled(ccc, record, result):
    """``DISABLED`` removes the container (and with ``PURGE_USER_DATA`` its data); a purge
    without ``DISABLED`` is only a note. True when the container is disabled."""
    purge = ccc_rules.truthy(record.get("PURGE_USER_DATA"))
    if not ccc_rules.truthy(record.get("DISABLED")):
        if purge:
            result["notes"].append("PURGE_USER_DATA is ignored: it acts only together with DISABLED")
        return False
    result.update(action="remove", reason="DISABLED by the administrators", purge=purge)
    if purge:
        result["storage_in_use"] = _storage_in_use_by_others(ccc, record)
    return True


def _cluster_rules(ccc, cluster, user_type, record, taken):
    """The cluster's rules for this container's settings (``ccc_schema.validate_user_settings``)."""
    nodes = ccc_pillar.cluster_nodes(ccc)
    return {
        "allowed_nodes": ccc_pillar.granted(user_type, record, "nodes"),
        "cluster_nodes": nodes,
        "image_prefixes": cluster["image_policy"].get("allowed_prefixes") or [],
        "shm_size_max": ccc_schema.parse_size(cluster["shm_size_max"]) if cluster.get("shm_size_max") else None,
        "shm_size_default": cluster["shm_size_default"],
        "reserved_subdomains": _reserved_subdomains(cluster, nodes),
        "taken_subdomains": {k: v for k, v in (taken or {}).items() if v != record["STACK_NAME"]},
    }


def _user_settings(result, record, settings_text, settings_error, last_good, rules):
    """Decide which of the user's settings apply (``_user_overrides``) and note it in ``result``;
    returns them."""
    overrides, status, messages, to_store = _user_overrides(record, settings_text, settings_error, last_good, rules)
    result.update(settings_status=status, settings_to_store=to_store)
    result["user_messages"].extend(messages)
    if status == "missing":
        result["default_settings_text"] = ccc_report.default_settings_text(record, rules["shm_size_default"])
    return overrides


def _placed_here(result, user_type, record, wanted):
    """
    Fill in the placement (``ccc_pillar.placement``). True when the container runs on this
    node; otherwise the result says why not: placed elsewhere (remove here) or nowhere (hold).
    """
    stack = record["STACK_NAME"]
    placement, refused, source = ccc_pillar.placement(user_type, record, wanted)
    result.update(placement=placement, placement_source=source,
                  allowed_nodes=ccc_pillar.granted(user_type, record, "nodes"))
    if refused:
        result["notes"].append(
            f"nodes not allowed for this container are ignored: {ccc_quote.clip_text(', '.join(map(str, refused)))}")
    if not placement:
        result["user_messages"].append("There is no node to run this container on: none of DEPLOYMENT_NODES is allowed.")
        _held(result, [f"{stack}: no allowed node in DEPLOYMENT_NODES {ccc_quote.quote_value(refused)}"], "empty placement")
        return False
    result["reason"] = f"placed on {', '.join(placement)}"
    if result["node"] not in placement:
        result["action"] = "remove"
        return False
    return True


def _build_spec(cluster, record, settings, user_type, facts, result):
    """
    The Docker spec of a container that runs here, and the admin errors that stop it.
    ``record`` is the admin's record, ``settings`` the record as it applies (``_effective``).
    """
    stack = record["STACK_NAME"]
    networks, errors = _networks(cluster, user_type, stack)
    image, image_info = _choose_image(cluster, record, settings, facts, result, errors)
    mounts, result["directories"], mount_errors = ccc_mounts.container_mounts(cluster, settings, user_type, facts)
    errors.extend(mount_errors)
    covered = ccc_covers.covers(cluster, mounts)  # root-only folders inside a bind: an empty tmpfs there
    result["directories"].extend(ccc_covers.folders(covered))
    device_ids = _gpus(user_type, record, facts, result)
    environment = _environment(cluster, settings, facts, image, device_ids, result, errors)
    labels, ports = _labels(settings, facts.name, image_info)
    privileged = ccc_rules.truthy(record.get("RUN_PRIVILEGED"))
    hardening = hardening_settings(cluster, user_type, record)
    spec = {
        "name": stack,
        "image": image,
        "hostname": facts.name,
        "environment": dict(sorted(environment.items())),
        "labels": dict(sorted(labels.items())),
        "mounts": mounts,
        **({"covers": [cover["target"] for cover in covered]} if covered else {}),
        "networks": networks,
        "exposed_ports": ports,
        "shm_size": ccc_schema.parse_size(settings.get("SHM_SIZE") or cluster["shm_size_default"]),
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


def _networks(cluster, user_type, stack):
    """The networks of the user type's access class, plus the claims network."""
    access = user_type.get("access")
    networks = list((cluster.get("access_networks") or {}).get(access) or [])
    errors = [] if networks else [
        f"{stack}: user type access {ccc_quote.quote_value(access)} has no networks in ccc:cluster:access_networks"]
    if cluster.get("claims_network") and cluster["claims_network"] not in networks:
        networks.append(cluster["claims_network"])
    return networks, errors


def _gpus(user_type, record, facts, result):
    """This node's GPU UUIDs for the container's device groups; the groups go to
    ``result["device_groups"]`` and each group this node lacks to the notes."""
    groups = ccc_pillar.granted(user_type, record, "device_groups")
    device_ids, missing = ccc_device_groups.device_ids_for_groups(groups, facts.compute_devices)
    result["device_groups"] = {group: ccc_device_groups.group_devices(facts.compute_devices, group)
                               for group in groups if isinstance(group, str)}
    for group in missing:
        result["notes"].append(f"device group {ccc_quote.quote_value(group)} has no GPUs on {facts.name}")
    return device_ids


def _pubkeys(settings, facts, result):
    """The user's keys, then the GitHub keys of ``USER_PUBKEY_FROM_GITHUB``, each once."""
    pubkeys = [line.strip() for line in (settings.get("USER_PUBKEY") or "").split("\n") if line.strip()]
    login = settings.get("USER_PUBKEY_FROM_GITHUB")
    if login:
        keys, error = facts.github_keys(login)
        if error:
            result["user_messages"].append(f"USER_PUBKEY_FROM_GITHUB: {ccc_quote.clip_text(error, ccc_quote.ERROR_CHARS)}")
        pubkeys.extend(key for key in keys or [] if key not in pubkeys)
    return pubkeys


def _install(settings, facts, errors):
    """``INSTALL_*`` and ``USER_GROUPS``: ``ENABLE_DOCKER_ACCESS`` adds Docker's apt source,
    key and CLI package before the user's, and the node's docker group."""
    install = {key: settings.get(key) or "" for key in
               ("INSTALL_REPOSITORY_KEYS", "INSTALL_REPOSITORY_SOURCES", "INSTALL_PACKAGES")}
    if not ccc_rules.truthy(settings.get("ENABLE_DOCKER_ACCESS")):
        return install
    if facts.docker_gid is None:
        errors.append(f"{settings['STACK_NAME']}: ENABLE_DOCKER_ACCESS needs a 'docker' group on {facts.name}")
    for key, docker, separator in (("INSTALL_REPOSITORY_KEYS", "https://download.docker.com/linux/ubuntu/gpg", ","),
                                   ("INSTALL_REPOSITORY_SOURCES", "https://download.docker.com/linux/ubuntu stable", ","),
                                   ("INSTALL_PACKAGES", "docker-ce-cli", " ")):
        install[key] = separator.join(filter(None, [docker, install[key]]))
    install["USER_GROUPS"] = f"docker={facts.docker_gid}"
    return install


def _environment(cluster, settings, facts, image, device_ids, result, errors):
    """The CCC contract variables, over the admin's ``EXTRA_ENVS`` (which cannot override them)."""
    stack, user_name = settings["STACK_NAME"], settings["USER_NAME"]
    home = f"/home/{user_name}"
    environment = {str(key): str(extra) for key, extra in (settings.get("EXTRA_ENVS") or {}).items()}
    environment.update(_install(settings, facts, errors))
    environment.update({
        "USER_NAME": user_name,
        "USER_ID": str(ccc_pillar.file_owner(cluster)[0]),
        "USER_PUBKEY": "\n".join(_pubkeys(settings, facts, result)),
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
    return environment


def _labels(settings, node, image_info):
    """FRP, identity and management labels, and the exposed ports."""
    labels, ports = frp_labels(settings["FRP_PORTS"], settings["USER_EMAIL"], settings["USER_NAME"], node)
    labels.update(identity_labels(settings))
    for image_label in (image_info or {}).get("labels") or {}:
        # Image labels are inherited by Docker; an frp.* label the admin did not grant is voided.
        if image_label.startswith("frp.") and image_label not in labels:
            labels[image_label] = ""
    labels.update({ccc_rules.MANAGED_BY_LABEL: ccc_rules.MANAGED_BY_VALUE, ccc_rules.STACK_LABEL: settings["STACK_NAME"]})
    return labels, ports


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


def _choose_image(cluster, record, settings, facts, result, errors):
    """The user's image when it can be had, else the admin's (and the user is told why)."""
    admin_image, wanted = record["CONTAINER_IMAGE"], settings["CONTAINER_IMAGE"]
    if wanted != admin_image:
        credentialed = any(wanted.startswith(p) for p in cluster["image_policy"].get("credentialed_prefixes") or [])
        info, error = facts.image_lookup(wanted, credentialed)
        if info is not None:
            return wanted, _image_checked(result, wanted, info)
        result["user_messages"].append(
            f"IMAGE ERROR: cannot use {ccc_quote.quote_value(wanted)} ({ccc_quote.clip_text(error, ccc_quote.ERROR_CHARS)});"
            f" the default image {ccc_quote.quote_value(admin_image)} is used instead."
        )
    info, error = facts.image_lookup(admin_image, True)
    if info is None:
        errors.append(f"{record['STACK_NAME']}: the admin image {ccc_quote.quote_value(admin_image)} is not available:"
                      f" {ccc_quote.clip_text(error, ccc_quote.ERROR_CHARS)}")
        return admin_image, info
    return admin_image, _image_checked(result, admin_image, info)


def _image_checked(result, ref, info):
    """Under ``image_policy:pull: always`` the apply compares the container's image with the id
    the tag has now (``image_id``); a re-pull that failed is a note for the admin."""
    if info.get("current_id"):
        result["image_id"] = info["current_id"]
    if info.get("current_id") and info.get("note"):
        result["notes"].append(f"image {ccc_quote.quote_value(ref)} "
                               f"{ccc_quote.clip_text(info['note'], ccc_quote.ERROR_CHARS)}")
    return info


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
        without_pass = ccc_rules.truthy(http.get("https_without_pass"))
        labels[f"frp.{port}"] = "https" if without_pass else "http"
        labels[f"frp.{port}.http.subdomain"] = ccc_schema.served_subdomains(http, [node])[0]
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
