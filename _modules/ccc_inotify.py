"""
Execution module ``ccc_inotify``: the inotify role's checked sysctls and whether this node can
set them (rules in ``_utils/ccc_inotify.py``).
"""

import os

import ccc_inotify
import ccc_role_settings

__virtualname__ = "ccc_inotify"

PROBE = "/proc/sys/fs/inotify/max_user_watches"


def __virtual__():
    return __virtualname__


def _container():
    """The kind of container this node is (systemd's ``/run/systemd/container``, Docker's
    ``/.dockerenv``), or None on a real host or VM."""
    try:
        with open("/run/systemd/container", encoding="utf-8") as handle:
            kind = handle.read(64).strip()
        if kind:
            return kind
    except OSError:
        pass
    if os.path.exists("/.dockerenv"):
        return "docker"
    return None


def plan(settings=None):
    """
    The sysctls the inotify role sets on this node and what it must report: ``{"sysctls":
    {name: value}, "problems": [...], "config": file, "container": None or {"ok": bool,
    "reason": text}}``. ``settings``: the role's merged settings (default: read through
    ``ccc_cluster.role_settings``).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_inotify.plan
    """
    settings, schema = ccc_role_settings.given("inotify", settings, __pillar__, __salt__["cp.get_file_str"])
    wanted, problems = ccc_inotify.sysctls(settings, schema)
    verdict = ccc_inotify.container_verdict(_container(), os.access(PROBE, os.W_OK))
    return {"sysctls": wanted, "problems": problems, "config": ccc_inotify.CONFIG_FILE,
            "container": None if verdict is None else {"ok": verdict[0], "reason": verdict[1]}}
