"""
Execution module ``ccc_devices``: this node's GPU device groups, as a deploy sees them.
"""

import ccc_device_groups

__virtualname__ = "ccc_devices"


def __virtual__():
    return __virtualname__


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
    return {"groups": compute_devices, "problems": ccc_device_groups.check_compute_devices(compute_devices)}


def for_groups(group_names):
    """
    Show the GPU UUIDs this node would hand to a container allowed ``group_names``.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_devices.for_groups '["device_lab", "device_student"]'
    """
    compute_devices = _compute_devices()
    uuids, missing = ccc_device_groups.device_ids_for_groups(group_names, compute_devices)
    return {"device_ids": uuids, "groups_not_on_this_node": missing}
