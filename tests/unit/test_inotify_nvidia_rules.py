"""The inotify and nvidia roles' pure rules (``_utils/ccc_inotify.py``, ``_utils/ccc_nvidia.py``):
which sysctls are set and what a container node is told; driver package names, stale branches,
versions, when a reboot is needed, the unattended-upgrades drop-in and the driver repository."""

import re

import pytest

from support import role_files, site  # noqa: F401  (site puts _utils on sys.path)

import ccc_inotify
import ccc_nvidia
import ccc_role_schema

PROC_CLOSED = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.127.05  Tue Oct  8 03:22:07 UTC 2024\nGCC version: gcc 12\n"
NVIDIA_SCHEMA = role_files.schema("nvidia")
PROC_OPEN = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  560.35.03  Release Build  (dvs-builder)\n"


def test_only_set_inotify_values_become_sysctls():
    wanted, problems = ccc_inotify.sysctls({"max_user_watches": 1048576, "max_user_instances": None,
                                            "max_queued_events": 32768}, role_files.schema("inotify"))
    assert problems == []
    assert wanted == {"fs.inotify.max_user_watches": 1048576, "fs.inotify.max_queued_events": 32768}


def test_wrong_inotify_values_are_named():
    wanted, problems = ccc_inotify.sysctls({"max_user_watches": "lots", "max_user_instances": 0, "max_watches": 5},
                                        role_files.schema("inotify"))
    assert wanted == {}
    assert problems == ["ccc:inotify:max_user_watches must be a whole number >= 1 or null, got 'lots'",
                        "ccc:inotify:max_user_instances must be a whole number >= 1 or null, got 0",
                        "ccc:inotify has unknown keys: max_watches (known: max_user_watches, max_user_instances, "
                        "max_queued_events)"]


def test_container_nodes_are_told_what_happens():
    assert ccc_inotify.container_verdict(None, False) is None
    ok, text = ccc_inotify.container_verdict("docker", True)
    assert ok and "apply to the kernel of the machine that runs it" in text
    ok, text = ccc_inotify.container_verdict("lxc", False)
    assert not ok and "lxc container with a read-only /proc/sys" in text and "nothing was changed" in text


def test_driver_packages_from_the_branch_or_a_list():
    assert ccc_nvidia.packages({"driver_version": 550}) == ["nvidia-headless-550", "nvidia-utils-550"]
    assert ccc_nvidia.packages({"driver_version": "535-server", "packages": ["nvidia-driver-535-server"]}) == [
        "nvidia-driver-535-server"]
    for bad, named in (({"driver_version": "550; reboot"}, "ccc:nvidia:driver_version must be a driver branch"),
                       ({"driver_version": None}, "ccc:nvidia:driver_version must be a driver branch"),
                       ({"driver_version": "550", "packages": ["nvidia utils"]},
                        "ccc:nvidia:packages: 'nvidia utils' is not a Debian package name")):
        problems = nvidia_problems(**bad)
        assert len(problems) == 1 and problems[0].startswith(named)


def nvidia_problems(**changes):
    """The nvidia schema's problems with the role's defaults changed by ``changes``."""
    return ccc_role_schema.problems("nvidia", dict(role_files.defaults("nvidia"), **changes), NVIDIA_SCHEMA)


def test_other_branches_are_stale():
    installed = {"nvidia-headless-535": "535.1", "nvidia-utils-535": "535.1", "nvidia-kernel-common-550": "550.1",
                 "nvidia-utils-550": "550.1", "nvidia-container-toolkit": "1.17", "nvidia-dkms-550-open": "550.1"}
    wanted = ["nvidia-headless-550", "nvidia-utils-550"]
    assert ccc_nvidia.stale_packages(installed, "550", wanted) == [
        "nvidia-dkms-550-open", "nvidia-headless-535", "nvidia-utils-535"]


def test_versions_and_reboot_reasons():
    assert ccc_nvidia.loaded_version(PROC_CLOSED) == "550.127.05"
    assert ccc_nvidia.loaded_version(PROC_OPEN) == "560.35.03"
    assert ccc_nvidia.loaded_version("") is None
    assert ccc_nvidia.package_driver_version("550.127.05-0ubuntu1") == "550.127.05"
    assert ccc_nvidia.package_driver_version("1:560.35.03-1") == "560.35.03"
    assert ccc_nvidia.package_driver_version("") is None
    assert ccc_nvidia.version_package(["nvidia-headless-550", "nvidia-utils-550"]) == "nvidia-utils-550"
    assert ccc_nvidia.reboot_reason(None, "550.127.05", True) == "the NVIDIA driver packages changed"
    assert ccc_nvidia.reboot_reason("550.120", "550.127.05", False) == (
        "the loaded NVIDIA kernel module is 550.120 but 550.127.05 is installed")
    assert ccc_nvidia.reboot_reason("550.127.05", "550.127.05", False) is None
    assert ccc_nvidia.reboot_reason(None, "550.127.05", False) is None  # no module loaded: nothing to compare


def test_blacklist_drop_in_is_an_apt_list():
    text = ccc_nvidia.blacklist_text(["nvidia-", "libnvidia-"])
    assert re.search(r'Unattended-Upgrade::Package-Blacklist \{\n    "nvidia-";\n    "libnvidia-";\n\};\n$', text)
    for bad, named in (([], "ccc:nvidia:unattended_upgrades_blacklist must be a non-empty list of patterns"),
                       (['nvidia-"; };'], "ccc:nvidia:unattended_upgrades_blacklist: 'nvidia-\"; };' is not an allowed"),
                       (["("], "ccc:nvidia:unattended_upgrades_blacklist: '(' is not an allowed pattern")):
        problems = nvidia_problems(unattended_upgrades_blacklist=bad)
        assert len(problems) == 1 and problems[0].startswith(named)


def test_driver_repository_line_and_key():
    key = "-----BEGIN PGP PUBLIC KEY BLOCK-----\nabc\n-----END PGP PUBLIC KEY BLOCK-----"
    repo = ccc_nvidia.repo({"repo": {"url": "https://ppa.launchpadcontent.net/graphics-drivers/ppa/ubuntu",
                                     "suite": "jammy", "components": ["main"], "key": key}})
    assert repo["line"] == ("deb [signed-by=/etc/apt/keyrings/ccc-nvidia-driver.asc] "
                            "https://ppa.launchpadcontent.net/graphics-drivers/ppa/ubuntu jammy main")
    assert repo["key"] == key + "\n"
    assert ccc_nvidia.repo({"repo": None}) is None
    assert nvidia_problems(repo={"url": "https://x.org/u", "suite": "jammy", "components": "main contrib",
                                "key": key}) == []
    for bad, named in (({"url": "ftp://x", "suite": "jammy", "components": ["main"], "key": key},
                        "ccc:nvidia:repo:url must be an http(s) URL, got 'ftp://x'"),
                       ({"url": "https://x.org/u", "suite": "jammy main]", "components": ["main"], "key": key},
                        "ccc:nvidia:repo:suite must be a plain word"),
                       ({"url": "https://x.org/u", "suite": "jammy", "components": ["main"], "key": "ABCD1234"},
                        "ccc:nvidia:repo:key must be the repository's ASCII-armored public key"),
                       ({"url": "https://x.org/u", "suite": "jammy", "key": key},
                        "ccc:nvidia:repo:components is required")):
        problems = nvidia_problems(repo=bad)
        assert len(problems) == 1 and problems[0].startswith(named)
