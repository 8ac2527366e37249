"""
Execution module ``ccc_cachefilesd``: the cachefilesd role's checked configuration and whether
this node's kernel can run the FS-cache daemon (rules in ``_utils/ccc_cachefilesd.py``).
"""

import os
import shutil
import subprocess

import ccc_cachefilesd
import ccc_role_settings

__virtualname__ = "ccc_cachefilesd"

DEVICE = "/dev/cachefiles"
MODULE = "/sys/module/cachefiles"


def __virtual__():
    return __virtualname__


def config(settings=None):
    """
    The role's files for this node: ``{"problems": [...], "conf": /etc/cachefilesd.conf text,
    "default": /etc/default/cachefilesd text, "cache_dir": path, "state": started | stopped}``
    (texts None with problems).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_cachefilesd.config
    """
    settings, schema = ccc_role_settings.given("cachefilesd", settings, __pillar__, __salt__["cp.get_file_str"])
    checked, problems = ccc_cachefilesd.check(settings, schema)
    if problems:
        return {"problems": problems, "conf": None, "default": None, "cache_dir": None, "state": None}
    return {"problems": [], "conf": ccc_cachefilesd.conf_text(checked, __grains__["id"]),
            "default": ccc_cachefilesd.default_text(checked), "cache_dir": checked["cache_dir"],
            "state": checked["state"]}


def kernel_support():
    """
    None when the kernel has the cachefiles module (loaded now if it can be), else why the
    daemon cannot run here.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_cachefilesd.kernel_support
    """
    if not (os.path.exists(DEVICE) or os.path.isdir(MODULE)) and shutil.which("modprobe"):
        subprocess.run(["modprobe", "-q", "cachefiles"], capture_output=True, timeout=30, check=False)
    if os.path.exists(DEVICE) or os.path.isdir(MODULE):
        return None
    return (f"this node's kernel has no cachefiles support ({DEVICE} is missing and the cachefiles module "
            "cannot be loaded): the FS-cache daemon cannot run, NFS mounts with fsc work uncached")
