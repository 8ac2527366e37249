"""
The pure resolver: pillar + a user's settings + node facts -> what runs on this node (a Docker
spec), why, and what the user and the admin are told. No I/O: the caller reads everything
first (settings file, last accepted settings, node facts) and acts on the result.

This file decides: which of the user's settings apply, whether the container is disabled, where
it is placed. The spec of a container that runs here is built by ``ccc_container_spec``; the FRP
subdomains other containers hold (``taken``) come from ``ccc_subdomains``.
"""

import hashlib
import json

import ccc_container_spec
import ccc_pillar
import ccc_quote
import ccc_report
import ccc_rules
import ccc_schema
import ccc_settings_file
import ccc_subdomains


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


def _effective(record, overrides):
    """
    The record as it applies: the user's accepted settings over the admin's record, each key
    replacing the admin's value, except ``FRP_PORTS`` (merged per list, ``ccc_subdomains.merge_frp``).
    """
    effective = {**record, **overrides}
    effective["FRP_PORTS"] = ccc_subdomains.merge_frp(record.get("FRP_PORTS"), overrides.get("FRP_PORTS"))
    return effective


def resolve_container(ccc, stack, facts, settings_text=None, settings_error=None, last_good=None,
            taken=None, cluster=None, record=None, nodes=None):
    """
    Work out what should happen to one container on one node, and why.

    Returns a dict with ``action`` (``run``, ``remove`` or ``hold``), ``reason``, ``spec`` (for
    ``run``), ``placement`` (with ``placement_source`` and ``allowed_nodes``),
    ``device_groups``, ``admin_errors``, ``user_messages``, ``notes``, ``settings_status`` and
    ``settings_to_store``. ``hold`` means: change nothing and report the errors. Each step
    below may decide, and then the result is returned as it stands. ``cluster``
    (``ccc_pillar.cluster_settings``), ``record`` (``ccc_pillar.container_record``'s
    ``(record, problems)``) and ``nodes`` (``ccc_pillar.cluster_nodes``) are passed by a caller
    that has them (``ccc_plan``, once per run).
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
    nodes = ccc_pillar.cluster_nodes(ccc) if nodes is None else nodes
    rules = _cluster_rules(cluster, nodes, user_type, record, taken)
    overrides = _user_settings(result, record, (settings_text, settings_error, last_good), rules)
    if result["settings_status"] == "missing":
        result["default_settings_text"] = ccc_report.default_settings_text(
            stack, _values_without_file(cluster, user_type, record))
    if not _placed_here(result, user_type, record, overrides.get("DEPLOYMENT_NODES")):
        return result
    settings = _effective(record, overrides)
    spec, errors = ccc_container_spec.build_spec(cluster, record, settings, user_type, facts, result)
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


def _cluster_rules(cluster, nodes, user_type, record, taken):
    """The cluster's rules for this container's settings (``ccc_schema.validate_user_settings``);
    ``nodes``: ``ccc_pillar.cluster_nodes``."""
    return {
        "allowed_nodes": ccc_pillar.granted(user_type, record, "nodes"),
        "cluster_nodes": nodes,
        "image_prefixes": cluster["image_policy"].get("allowed_prefixes") or [],
        "shm_size_max": ccc_schema.parse_size(cluster["shm_size_max"]) if cluster.get("shm_size_max") else None,
        "reserved_subdomains": ccc_subdomains.reserved_subdomains(cluster, nodes),
        "taken_subdomains": ccc_subdomains.excluding(taken, record["STACK_NAME"]),
    }


def _user_settings(result, record, read, rules):
    """Decide which of the user's settings apply (``_user_overrides``; ``read`` is the settings
    text, its read error and the last accepted settings) and note it in ``result``; returns them."""
    overrides, status, messages, to_store = _user_overrides(record, *read, rules)
    result.update(settings_status=status, settings_to_store=to_store)
    result["user_messages"].extend(messages)
    return overrides


def _values_without_file(cluster, user_type, record):
    """
    Each key a user may set as it applies while the user sets none, for the default settings
    file: the admin's value, else what the deployment fills in (the cluster's SHM default, the
    nodes the admin's placement gives), so the file shows what the container really gets and
    uncommenting a line changes nothing.
    """
    values = {key: record[key] for key in ccc_schema.USER_SETTABLE_KEYS if record.get(key) is not None}
    values["SHM_SIZE"] = ccc_container_spec.shm_size_setting(cluster, record)
    values["DEPLOYMENT_NODES"] = ccc_pillar.placement(user_type, record)[0]
    return values


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
        result["user_messages"].append(
            "There is no node to run this container on: none of DEPLOYMENT_NODES is allowed.")
        _held(result, [f"{stack}: no allowed node in DEPLOYMENT_NODES {ccc_quote.quote_value(refused)}"],
              "empty placement")
        return False
    result["reason"] = f"placed on {', '.join(placement)}"
    if result["node"] not in placement:
        result["action"] = "remove"
        return False
    return True


def spec_hash(spec):
    """
    Stable hash of a container spec (without its own hash label); stored as a label so a no-op
    apply compares one string instead of the whole container.
    """
    material = dict(spec)  # json.dumps reads the rest; only the labels lose a key
    if isinstance(material.get("labels"), dict):
        material["labels"] = {k: v for k, v in material["labels"].items() if k != ccc_rules.SPEC_HASH_LABEL}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:20]
