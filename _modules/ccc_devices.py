"""
Execution module ``ccc_devices``: this node's GPU device groups, as a deploy sees them.
"""

import ccc_device_groups
import ccc_pillar

__virtualname__ = "ccc_devices"


def __virtual__():
    return __virtualname__


def _compute_devices():
    """This node's ``ccc:node:compute_devices``, as plain data (``ccc_pillar``'s unwrapping)."""
    return ccc_pillar.node_settings(ccc_pillar.pillar_ccc(__pillar__), __grains__["id"])["compute_devices"]


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
        salt-call ccc_devices.for_groups device_lab,device_student
    """
    if isinstance(group_names, str):
        group_names = [name.strip() for name in group_names.split(",") if name.strip()]
    uuids, missing = ccc_device_groups.device_ids_for_groups(group_names, _compute_devices())
    return {"device_ids": uuids, "groups_not_on_this_node": missing}
