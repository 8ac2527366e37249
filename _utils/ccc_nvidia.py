"""
The nvidia (driver) role's rules: package names, stale driver branches, the loaded and the
installed driver version, when a reboot is needed, the unattended-upgrades blacklist and the
driver's apt repository. The shape of every key is the role's ``schema.yaml``, checked before
anything here reads the settings (no rule of this role compares two keys).

The role never reboots a node (the original did, killing every user's container): it only
says that the node needs one. Plain Python, no Salt imports.
"""

import re

# Packages of one driver branch (suffix = the branch); another branch's are purged on a switch.
BRANCH_PREFIXES = ("nvidia-headless-", "nvidia-utils-", "nvidia-compute-utils-", "nvidia-dkms-",
                   "nvidia-kernel-common-", "nvidia-kernel-source-", "nvidia-headless-no-dkms-")
KEYRING = "/etc/apt/keyrings/ccc-nvidia-driver.asc"


def packages(settings):
    """The driver packages (``packages``, or ``nvidia-headless-<v>`` and ``nvidia-utils-<v>``
    for ``driver_version``)."""
    branch = settings["driver_version"]
    return list(settings.get("packages") or [f"nvidia-headless-{branch}", f"nvidia-utils-{branch}"])


def stale_packages(installed, branch, wanted):
    """Installed packages of another driver branch (to purge before installing ``wanted``)."""
    stale = []
    for name in sorted(installed):
        for prefix in BRANCH_PREFIXES:
            if name.startswith(prefix) and name not in wanted and name[len(prefix):] != str(branch):
                stale.append(name)
                break
    return stale


def version_package(names):
    """The package whose version is the driver's: the first ``nvidia-utils-*``, else the first."""
    return next((name for name in names if name.startswith("nvidia-utils-")), names[0])


def loaded_version(proc_text):
    """The kernel module's version from ``/proc/driver/nvidia/version`` text (None if unknown)."""
    match = re.search(r"Kernel Module(?: for \S+)?\s+([0-9]+\.[0-9]+(?:\.[0-9]+)?)", proc_text or "")
    return match.group(1) if match else None


def package_driver_version(deb_version):
    """The driver version in a package version: ``550.54.15-0ubuntu1`` → ``550.54.15``."""
    match = re.match(r"^(?:[0-9]+:)?([0-9]+\.[0-9]+(?:\.[0-9]+)?)", deb_version or "")
    return match.group(1) if match else None


def reboot_reason(loaded, installed, packages_changed):
    """Why the node needs a reboot for its driver, or None."""
    if packages_changed:
        return "the NVIDIA driver packages changed"
    if loaded and installed and loaded != installed:
        return f"the loaded NVIDIA kernel module is {loaded} but {installed} is installed"
    return None


def blacklist_text(entries):
    """An apt.conf drop-in that adds ``entries`` (Python regular expressions on package names)
    to unattended-upgrades' blacklist; apt merges lists from every file."""
    body = "".join(f'    "{entry}";\n' for entry in entries)
    return ("// Managed by ccc-salt (cluster role nvidia): driver updates need a planned reboot.\n"
            f"Unattended-Upgrade::Package-Blacklist {{\n{body}}};\n")


def repo(settings):
    """The driver's apt repository as ``{"line": sources.list line, "key": armored key}``, or
    None when ``ccc:nvidia:repo`` is not set."""
    value = settings.get("repo")
    if not value:
        return None
    components = value["components"]
    if isinstance(components, str):
        components = components.split()
    line = f"deb [signed-by={KEYRING}] {value['url']} {' '.join([value['suite']] + list(components))}"
    return {"line": line, "key": value["key"].strip() + "\n", "keyring": KEYRING}
