"""
GPU device groups of a node: ``ccc:node:compute_devices`` maps a group name to that node's
GPU UUIDs; a container gets the GPUs of the groups it is allowed. No group ever means "all".
"""

import re

import ccc_quote

GPU_UUID_PATTERN = re.compile(r"^(GPU|MIG)-[0-9A-Za-z-]{4,64}$")


def check_compute_devices(compute_devices):
    """
    Return a list of problems with a node's ``compute_devices`` mapping (empty when valid).
    """
    if compute_devices in (None, {}):
        return []
    if not isinstance(compute_devices, dict):
        return ["ccc:node:compute_devices must be a mapping of device group -> list of GPU UUIDs"]
    problems = []
    for group, uuids in compute_devices.items():
        if not isinstance(uuids, list):
            problems.append(f"device group {ccc_quote.quote_value(group)} must list GPU UUIDs")
            continue
        for uuid in uuids:
            if not isinstance(uuid, str) or not GPU_UUID_PATTERN.fullmatch(uuid):
                problems.append(f"device group {ccc_quote.quote_value(group)}: {ccc_quote.quote_value(uuid)}"
                                " is not a GPU or MIG UUID")
    return problems


def group_devices(compute_devices, group):
    """
    The GPU UUIDs of ``group`` on this node: the well-formed UUIDs of its list. A malformed
    entry (a bare string, ``all``, a typo) gives none (``check_compute_devices`` says why), so a
    pillar mistake never widens what a container sees: ``[all]`` would have become
    ``NVIDIA_VISIBLE_DEVICES=all``, a string its characters.
    """
    listed = compute_devices.get(group) if isinstance(compute_devices, dict) and isinstance(group, str) else None
    if not isinstance(listed, list):
        return []
    return [uuid for uuid in listed if isinstance(uuid, str) and GPU_UUID_PATTERN.fullmatch(uuid)]


def device_ids_for_groups(groups, compute_devices):
    """
    Resolve device groups to this node's GPU UUIDs.

    Returns ``(uuids, missing_groups)``: the UUIDs of every listed group in order, without
    duplicates (only well-formed ones, ``group_devices``), and the groups this node does not define.
    """
    uuids, missing = [], []
    for group in groups or []:
        if not isinstance(group, str) or not isinstance(compute_devices, dict) or group not in compute_devices:
            missing.append(group)
            continue
        for uuid in group_devices(compute_devices, group):
            if uuid not in uuids:
                uuids.append(uuid)
    return uuids, missing
