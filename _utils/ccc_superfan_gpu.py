"""
The superfan_gpu role as the rest of ccc-salt sees it: the service it runs on a node.

The role (``salt/cluster/superfan_gpu/``) installs the fan controller agent as one systemd unit;
``salt-run ccc.status`` (``ccc_role_services``) asks ``services`` which units to check. The role's
own keys are checked by its ``schema.yaml`` before they reach a shell command and a modules-load
file. Pure.
"""

ROLE = "superfan_gpu"
UNIT = "ccc-fan-controller.service"


def services(settings, node_id):
    """The services the role runs on ``node_id`` with ``settings`` (``ccc_cluster.role_settings``):
    the controller's unit whenever the role is applied there; ``settings`` change nothing (the
    unit runs with any curve or zone list)."""
    del settings, node_id  # the same single unit on every node the role is applied on
    return [{"kind": "unit", "name": UNIT, "role": ROLE}]

