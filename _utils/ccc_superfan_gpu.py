"""
The superfan_gpu role as the rest of ccc-salt sees it: the service it runs on a node.

The role (``salt/cluster/superfan_gpu/``) installs the fan controller agent as one systemd unit;
``salt-run ccc.status`` (``ccc_role_services``) asks ``services`` which units to check, and the
role's ``init.sls`` asks ``problems`` about its own keys before it writes them into a shell command
and a modules-load file. Pure.
"""

import re

ROLE = "superfan_gpu"
UNIT = "ccc-fan-controller.service"


def services(settings, node_id):
    """The services the role runs on ``node_id`` with ``settings`` (``ccc_cluster.role_settings``):
    the controller's unit whenever the role is applied there; ``settings`` change nothing (the
    unit runs with any curve or zone list)."""
    del settings, node_id  # the same single unit on every node the role is applied on
    return [{"kind": "unit", "name": UNIT, "role": ROLE}]


_MODULE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]{0,127}$")


def problems(settings):
    """What is wrong with the role's own keys (``packages``, ``kernel_modules``), as sentences
    an admin can act on; empty when they are usable. The controller's keys are checked by
    ``ccc_fan_config``."""
    found = []
    for key, pattern, what in (("packages", _PACKAGE, "a Debian package name"),
                               ("kernel_modules", _MODULE, "a kernel module name (letters, digits, _ and -)")):
        value = (settings or {}).get(key)
        if not isinstance(value, list):
            found.append(f"ccc:fans:{key} must be a list, got {value!r}")
            continue
        found.extend(f"ccc:fans:{key}: {item!r} is not {what}" for item in value
                     if not (isinstance(item, str) and pattern.match(item)))
    return found
