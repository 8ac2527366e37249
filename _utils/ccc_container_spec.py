"""
The Docker spec of a container that runs on this node, built from the admin's record and the
settings as they apply (``ccc_resolver`` decided those): image, mounts, GPUs, environment,
labels, networks and hardening, with the admin errors that stop it and the notes and user
messages met on the way (in the resolution ``result``). Pure: the node's facts come in
``ccc_resolver.NodeFacts``.
"""

import ccc_covers
import ccc_device_groups
import ccc_mounts
import ccc_pillar
import ccc_quote
import ccc_report
import ccc_rules
import ccc_schema


def build_spec(cluster, record, settings, user_type, facts, result):
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
        "shm_size": ccc_schema.parse_size(shm_size_setting(cluster, settings)),
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


def shm_size_setting(cluster, settings):
    """``SHM_SIZE`` as it applies, as written: the settings' own, else ``ccc:cluster:shm_size_default``."""
    return settings.get("SHM_SIZE") or cluster["shm_size_default"]


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
        problem = getattr(facts.github_keys, "problem", None)  # a bad ``github_keys_max_age`` (``ccc_keys``)
        if problem and problem not in result["notes"]:
            result["notes"].append(problem)
        if error:
            result["user_messages"].append(
                f"USER_PUBKEY_FROM_GITHUB: {ccc_quote.clip_text(error, ccc_quote.ERROR_CHARS)}")
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
    docker_apt = "https://download.docker.com/linux/ubuntu"
    for key, docker, separator in (("INSTALL_REPOSITORY_KEYS", f"{docker_apt}/gpg", ","),
                                   ("INSTALL_REPOSITORY_SOURCES", f"{docker_apt} stable", ","),
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
    labels.update({ccc_rules.MANAGED_BY_LABEL: ccc_rules.MANAGED_BY_VALUE,
                   ccc_rules.STACK_LABEL: settings["STACK_NAME"]})
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
    own = (record or {}).get("HARDENING")
    merged = ccc_pillar.deep_merge(merged, own if isinstance(own, dict) else {})
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
            f"IMAGE ERROR: cannot use {ccc_quote.quote_value(wanted)}"
            f" ({ccc_quote.clip_text(error, ccc_quote.ERROR_CHARS)});"
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
