"""
GPU device groups of a node.

A node's pillar ``ccc:node:compute_devices`` maps a device-group name to the GPU UUIDs of that
node (the same group name maps to other GPUs on another node). A container may use the GPUs of
the groups its user type allows plus its ``ADDITIONAL_DEVICE_GROUPS``. A node without
``compute_devices`` has no GPUs to hand out: no group ever means "all GPUs".

The pure functions take plain data so tests call them without Salt; ``groups`` and
``for_groups`` are the thin Salt-facing wrappers.
"""

import re

__virtualname__ = "ccc_devices"

GPU_UUID_PATTERN = re.compile(r"^(GPU|MIG)-[0-9A-Za-z-]{4,64}$")


def __virtual__():
    return __virtualname__


def check_compute_devices(compute_devices):
    """
    Return a list of problems with a node's ``compute_devices`` mapping (empty when valid).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_devices.check_compute_devices '{"lab": ["GPU-1234abcd"]}'
    """
    if compute_devices in (None, {}):
        return []
    if not isinstance(compute_devices, dict):
        return ["ccc:node:compute_devices must be a mapping of device group -> list of GPU UUIDs"]
    problems = []
    for group, uuids in compute_devices.items():
        if not isinstance(uuids, list):
            problems.append(f"device group {group!r} must list GPU UUIDs")
            continue
        for uuid in uuids:
            if not isinstance(uuid, str) or not GPU_UUID_PATTERN.match(uuid):
                problems.append(f"device group {group!r}: {uuid!r} is not a GPU or MIG UUID")
    return problems


def device_ids_for_groups(groups, compute_devices):
    """
    Resolve device groups to this node's GPU UUIDs.

    Returns ``(uuids, missing_groups)``: the UUIDs of every listed group in order, without
    duplicates, and the groups this node does not define.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_devices.device_ids_for_groups '["lab"]' '{"lab": ["GPU-1234abcd"]}'
    """
    compute_devices = compute_devices or {}
    uuids, missing = [], []
    for group in groups or []:
        if group not in compute_devices:
            missing.append(group)
            continue
        for uuid in compute_devices[group] or []:
            if uuid not in uuids:
                uuids.append(uuid)
    return uuids, missing


def _compute_devices():
    node = dict.get(__pillar__.get("ccc") or {}, "node") or {}
    return {group: list(uuids or []) for group, uuids in dict.items(node.get("compute_devices") or {})}


def groups():
    """
    Show this node's device groups and their GPU UUIDs, with any configuration problems.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_devices.groups
    """
    compute_devices = _compute_devices()
    return {"groups": compute_devices, "problems": check_compute_devices(compute_devices)}


def for_groups(group_names):
    """
    Show the GPU UUIDs this node would hand to a container allowed ``group_names``.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_devices.for_groups '["device_lab", "device_student"]'
    """
    compute_devices = _compute_devices()
    uuids, missing = device_ids_for_groups(group_names, compute_devices)
    return {"device_ids": uuids, "groups_not_on_this_node": missing}
