"""
The nvidia (driver) role's rules: package names, stale driver branches, the loaded and the
installed driver version, when a reboot is needed, the unattended-upgrades blacklist and the
driver's apt repository.

The role never reboots a node (the original did, killing every user's container): it only
says that the node needs one. Plain Python, no Salt imports.
"""

import re

BRANCH = re.compile(r"^[0-9]{2,4}(-[a-z]+)?$")  # 550, 550-server, 550-open
PACKAGE = re.compile(r"^[a-z0-9][a-z0-9.+-]{1,99}$")
# Packages of one driver branch (suffix = the branch); another branch's are purged on a switch.
BRANCH_PREFIXES = ("nvidia-headless-", "nvidia-utils-", "nvidia-compute-utils-", "nvidia-dkms-",
                   "nvidia-kernel-common-", "nvidia-kernel-source-", "nvidia-headless-no-dkms-")
BLACKLIST_ENTRY = re.compile(r"^[A-Za-z0-9.+*^$\[\]()|?\\-]{1,100}$")
REPO_WORD = re.compile(r"^[A-Za-z0-9._/~-]{1,100}$")
URL = re.compile(r"^https?://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~%/+-]*)?$")
KEYRING = "/etc/apt/keyrings/ccc-nvidia-driver.asc"


def packages(settings):
    """The driver packages (``packages``, or ``nvidia-headless-<v>`` and ``nvidia-utils-<v>``
    for ``driver_version``); ``ValueError`` on a malformed name or version."""
    branch = str(settings.get("driver_version") or "")
    if not BRANCH.fullmatch(branch):
        raise ValueError(f"ccc:nvidia:driver_version must be a driver branch such as 550 or 550-server, got {branch!r}")
    names = settings.get("packages") or [f"nvidia-headless-{branch}", f"nvidia-utils-{branch}"]
    if not isinstance(names, list):
        raise ValueError(f"ccc:nvidia:packages must be a list of package names, got {names!r}")
    for name in names:
        if not (isinstance(name, str) and PACKAGE.fullmatch(name)):
            raise ValueError(f"ccc:nvidia:packages: {name!r} is not a Debian package name")
    return list(names)


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
    if not isinstance(entries, list) or not entries:
        raise ValueError("ccc:nvidia:unattended_upgrades_blacklist must be a non-empty list of patterns")
    for entry in entries:
        if not (isinstance(entry, str) and BLACKLIST_ENTRY.fullmatch(entry)):
            raise ValueError(f"ccc:nvidia:unattended_upgrades_blacklist: {entry!r} is not an allowed pattern")
        try:
            re.compile(entry)
        except re.error as exc:
            raise ValueError(f"ccc:nvidia:unattended_upgrades_blacklist: {entry!r} is no regular expression: {exc}") from None
    body = "".join(f'    "{entry}";\n' for entry in entries)
    return ("// Managed by ccc-salt (cluster role nvidia): driver updates need a planned reboot.\n"
            f"Unattended-Upgrade::Package-Blacklist {{\n{body}}};\n")


def repo(settings):
    """The driver's apt repository as ``{"line": sources.list line, "key": armored key}``, or
    None when ``ccc:nvidia:repo`` is not set; ``ValueError`` on a malformed one."""
    value = settings.get("repo")
    if not value:
        return None
    if not isinstance(value, dict):
        raise ValueError("ccc:nvidia:repo must be a mapping with url, suite, components and key")
    url, suite, components, key = (value.get(k) for k in ("url", "suite", "components", "key"))
    if not (isinstance(url, str) and URL.fullmatch(url)):
        raise ValueError(f"ccc:nvidia:repo:url must be an http(s) URL, got {url!r}")
    if isinstance(components, str):
        components = components.split()
    words = [suite] + list(components or [])
    if not components or not all(isinstance(w, str) and REPO_WORD.fullmatch(w) for w in words):
        raise ValueError(f"ccc:nvidia:repo: suite and components must be plain words, got {words!r}")
    if not (isinstance(key, str) and key.strip().startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")):
        raise ValueError("ccc:nvidia:repo:key must be the repository's ASCII-armored public key")
    line = f"deb [signed-by={KEYRING}] {url} {' '.join(words)}"
    return {"line": line, "key": key.strip() + "\n", "keyring": KEYRING}
