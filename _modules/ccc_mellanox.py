"""
Execution module ``ccc_mellanox``: the mellanox role's checked plan (rules in
``_utils/ccc_mellanox.py``), with whether OFED is already installed on this node.
"""

import os

import ccc_mellanox
import ccc_role_settings

__virtualname__ = "ccc_mellanox"


def __virtual__():
    return __virtualname__


def plan(settings=None):
    """
    What the mellanox role does on this node: ``{"problems", "repositories", "remove",
    "packages", "service", "ofed_installed"}``; OFED counts as installed when its uninstaller
    (``ofed_marker``, ``/usr/sbin/ofed_uninstall.sh``) exists, and then nothing is removed.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_mellanox.plan
    """
    settings, schema = ccc_role_settings.given("mellanox", settings, __pillar__, __salt__["cp.get_file_str"])
    installed = os.path.exists(settings.get("ofed_marker") or "/usr/sbin/ofed_uninstall.sh")
    return dict(ccc_mellanox.plan(settings, installed, schema), ofed_installed=installed)
