"""
Execution module ``ccc_nvidia``: the nvidia role's checked plan and the node's driver status
(rules in ``_utils/ccc_nvidia.py``).
"""

import ccc_nvidia
import ccc_role_settings

__virtualname__ = "ccc_nvidia"

PROC_VERSION = "/proc/driver/nvidia/version"


def __virtual__():
    return __virtualname__


def plan(settings=None):
    """
    What the nvidia role installs on this node: ``{"problems": [...], "packages": [...],
    "stale": [installed packages of another branch], "blacklist": drop-in text, "repo": None or
    {line, key, keyring}}``. ``settings``: the role's merged settings (default: read through
    ``ccc_cluster.role_settings``).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_nvidia.plan
    """
    if settings is None:
        settings = ccc_role_settings.read("nvidia", __pillar__, __salt__["cp.get_file_str"])
    result = {"problems": ccc_role_settings.problems("nvidia", settings, __salt__["cp.get_file_str"]),
              "packages": [], "stale": [], "blacklist": None, "repo": None}
    if result["problems"]:
        return result
    result.update(packages=ccc_nvidia.packages(settings), repo=ccc_nvidia.repo(settings),
                  blacklist=ccc_nvidia.blacklist_text(settings["unattended_upgrades_blacklist"]))
    if result["packages"]:
        installed = __salt__["pkg.list_pkgs"]()
        result["stale"] = ccc_nvidia.stale_packages(installed, settings.get("driver_version"), result["packages"])
    return result


def loaded_version():
    """The loaded kernel module's driver version (None: no module loaded, e.g. before a reboot).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_nvidia.loaded_version
    """
    try:
        with open(PROC_VERSION, encoding="utf-8", errors="replace") as handle:
            return ccc_nvidia.loaded_version(handle.read(4096))
    except OSError:
        return None


def status(packages=None):
    """
    The driver on this node: the loaded module's version, the installed packages' version and
    whether a reboot is needed for them to match (``packages``: default the role's).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_nvidia.status
    """
    names = packages or plan()["packages"]
    installed = None
    if names:
        installed = ccc_nvidia.package_driver_version(__salt__["pkg.version"](ccc_nvidia.version_package(names)))
    loaded = loaded_version()
    return {"loaded": loaded, "installed": installed,
            "reboot_needed": ccc_nvidia.reboot_reason(loaded, installed, False)}
