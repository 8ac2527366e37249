"""
State module ``ccc_nvidia``: ``reboot_flagged`` says when the node needs a reboot for its
NVIDIA driver, and marks it the Debian way (``/var/run/reboot-required`` and ``.pkgs``). It
never reboots: the admin picks the moment, because a reboot stops every user's container.
"""

import os

import ccc_nvidia

__virtualname__ = "ccc_nvidia"

FLAG_TEXT = "*** System restart required ***\n"


def __virtual__():
    return __virtualname__


def _flag(name, packages, reason):
    """Write the flag and list ``packages`` in ``<name>.pkgs``; returns the changes made."""
    changes = {}
    current = None
    if os.path.isfile(name):
        with open(name, encoding="utf-8", errors="replace") as handle:
            current = handle.read(4096)
    if current is None:
        with open(name, "w", encoding="utf-8") as handle:
            handle.write(FLAG_TEXT)
        changes["reboot_required"] = reason
    listed = []
    if os.path.isfile(name + ".pkgs"):
        with open(name + ".pkgs", encoding="utf-8", errors="replace") as handle:
            listed = handle.read().split()
    missing = [pkg for pkg in packages if pkg not in listed]
    if missing:
        with open(name + ".pkgs", "a", encoding="utf-8") as handle:
            handle.write("".join(f"{pkg}\n" for pkg in missing))
        changes["reboot_required_pkgs"] = missing
    return changes


def _report(name, packages, reason):
    ret = {"name": name, "result": True, "changes": {}, "comment": ""}
    if reason is None:
        pending = " (a reboot is still pending: " + name + " exists)" if os.path.exists(name) else ""
        ret["comment"] = "the NVIDIA driver needs no reboot" + pending
        return ret
    message = (f"reboot needed: {reason}. ccc-salt never reboots a node; reboot it when its "
               "containers may stop (e.g. drain it first)")
    if __opts__["test"]:
        ret.update(result=None, comment=f"would flag {name}: {message}")
        return ret
    try:
        ret["changes"] = _flag(name, packages, reason)
    except OSError as exc:
        ret.update(result=False, comment=f"{message}; writing {name} failed: {exc}")
        return ret
    ret["comment"] = message
    return ret


def reboot_flagged(name="/var/run/reboot-required", packages=None):
    """
    Flag a reboot when the loaded kernel module's version (``/proc/driver/nvidia/version``)
    differs from the installed packages' (``packages``: the driver packages). A node without a
    loaded module (no GPU yet, or fresh install) needs none by this rule; ``watch`` the package
    state to flag one whenever the packages change (``mod_watch``).
    """
    packages = packages or []
    installed = None
    if packages:
        installed = ccc_nvidia.package_driver_version(__salt__["pkg.version"](ccc_nvidia.version_package(packages)))
    loaded = __salt__["ccc_nvidia.loaded_version"]()
    return _report(name, packages, ccc_nvidia.reboot_reason(loaded, installed, False))


def mod_watch(name, sfun=None, **kwargs):
    """The watched driver packages changed: a reboot is needed (whatever the module says)."""
    return _report(name, kwargs.get("packages") or [], ccc_nvidia.reboot_reason(None, None, True))
