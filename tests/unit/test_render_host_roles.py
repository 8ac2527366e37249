"""The host-base cluster roles (fail2ban, nvidia, inotify, sshd_hostkeys) rendered and run with
``test=True`` for every sample node, masterless on this machine (nothing is applied): what an
admin sees from ``salt nodeN state.apply cluster test=True``. fail2ban's own checker reads the
jail the role would write (Debian's package unpacked in the test cache, see
``support.fail2ban_check``)."""

import os

import pytest

from support import fail2ban_check, site

import ccc_hostkeys
import ccc_pillar

ROLES = "fail2ban,nvidia,inotify,sshd_hostkeys"
NODES = ("node1", "node2", "node3")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """``{node: (SaltNode, {state id: result})}`` after ``state.apply cluster test=True``; node1's
    shared key store holds one host key set, so its backup has something to do."""
    result = {}
    for node in NODES:
        root = tmp_path_factory.mktemp(node)
        salt_node = site.SaltNode(root / "work", node, "unix:///nonexistent.sock", root / "storage",
                                  extra_ccc={"only_roles": ROLES})
        if node == "node1":
            ccc = site.node_ccc(node, root / "storage", "unix:///nonexistent.sock")
            store = ccc_hostkeys.store_root(ccc_pillar.cluster_settings(ccc))
            ccc_hostkeys.ensure(str(root / "storage" / "local" / "sshd_data"), store, "box", rsa_bits=1024)
        output, _ = salt_node.salt_call("state.apply", "cluster", "test=True", check=False)
        assert isinstance(output, dict), output
        result[node] = (salt_node, {key.split("_|-")[1]: value for key, value in output.items()})
    return result


@pytest.mark.parametrize("node", NODES)
def test_every_role_renders_and_nothing_fails(rendered, node):
    _, states = rendered[node]
    failed = {key: value["comment"] for key, value in states.items() if value["result"] is False}
    assert failed == {}
    assert states["ccc-cluster-roles-summary"]["name"].startswith(
        "cluster roles applied: fail2ban, nvidia, inotify, sshd_hostkeys; cleaned: none")
    for state in ("ccc-cluster-fail2ban-package", "ccc-cluster-fail2ban-jail", "ccc-cluster-fail2ban-service",
                  "ccc-cluster-nvidia-packages", "ccc-cluster-nvidia-persistenced-service",
                  "ccc-cluster-nvidia-upgrades-blacklist", "ccc-cluster-sshd_hostkeys-backup"):
        assert state in states, sorted(states)


@pytest.mark.parametrize("node, branch", [("node1", "550"), ("node2", "550"), ("node3", "535")])
def test_driver_branch_per_node_and_reboot_only_reported(rendered, node, branch):
    _, states = rendered[node]
    packages = states["ccc-cluster-nvidia-packages"]
    assert sorted(packages["changes"]) == [f"nvidia-headless-{branch}", f"nvidia-utils-{branch}"]
    reboot = states["ccc-cluster-nvidia-reboot-needed"]
    assert reboot["result"] is None
    assert "reboot needed: the NVIDIA driver packages changed. ccc-salt never reboots a node" in reboot["comment"]


@pytest.mark.parametrize("node", NODES)
def test_inotify_sysctls_from_the_sample(rendered, node):
    _, states = rendered[node]
    if os.access("/proc/sys/fs/inotify/max_user_watches", os.W_OK):
        watches = states["ccc-cluster-inotify-fs.inotify.max_user_watches"]
        assert watches["result"] in (None, True) and "1048576" in watches["comment"]
        assert "ccc-cluster-inotify-fs.inotify.max_user_instances" in states
        assert "ccc-cluster-inotify-fs.inotify.max_queued_events" not in states  # not set: left alone
    else:  # this machine is a container with a read-only /proc/sys: the role must say so
        assert "read-only /proc/sys" in states["ccc-cluster-inotify-container"]["comment"]


def test_host_key_backup_planned_only_where_keys_exist(rendered):
    backup = rendered["node1"][1]["ccc-cluster-sshd_hostkeys-backup"]
    assert backup["result"] is None and backup["comment"].startswith("would back up 1 host key set(s)")
    assert backup["changes"]["write"].startswith("host-keys-")
    other = rendered["node2"][1]["ccc-cluster-sshd_hostkeys-backup"]
    assert other["result"] is True and "nothing to back up" in other["comment"]


def test_sample_jail_passes_fail2ban_checker(rendered, tmp_path):
    salt_node, _ = rendered["node1"]
    jail, _ = salt_node.salt_call("ccc_fail2ban.jail")
    assert jail["problems"] == []
    config = fail2ban_check.config_with_jail(tmp_path, jail["text"])
    checked = fail2ban_check.client(config, "-t")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    dump = fail2ban_check.client(config, "-d").stdout
    assert "['set', 'sshd', 'maxretry', 5]" in dump
    assert "['set', 'sshd', 'addignoreip', '127.0.0.0/8', '::1/128', '192.168.10.0/24']" in dump
    assert "fail2ban-ignore-country <ip> SI']" in dump


def test_wrong_settings_fail_clearly_and_write_nothing(rendered):
    salt_node, _ = rendered["node2"]
    salt_node.write_pillar({"only_roles": ROLES, "fail2ban": {"maxretry": "many", "ignoreip": ["10.0.0.300"]},
                            "inotify": {"max_user_watches": -5}, "nvidia": {"driver_version": "550;reboot"}})
    try:
        output, code = salt_node.salt_call("state.apply", "cluster", "test=True", check=False)
    finally:
        salt_node.write_pillar({"only_roles": ROLES})
    states = {key.split("_|-")[1]: value for key, value in output.items()}
    assert code != 0
    assert states["ccc-cluster-fail2ban-settings"]["comment"] == (
        "ccc:fail2ban is not valid, nothing changed: ccc:fail2ban:ignoreip: '10.0.0.300' is not an IP address or "
        "network (e.g. 10.0.0.0/8, ::1); ccc:fail2ban:maxretry must be a whole number >= 1, got 'many'")
    assert "max_user_watches must be a whole number >= 1 or null, got -5" in states["ccc-cluster-inotify-settings"]["comment"]
    assert "driver branch such as 550" in states["ccc-cluster-nvidia-settings"]["comment"]
    assert not [key for key in states if key.startswith(("ccc-cluster-fail2ban-jail", "ccc-cluster-nvidia-packages",
                                                         "ccc-cluster-inotify-fs."))]


def test_absent_roles_render_their_clean_states(rendered):
    salt_node, _ = rendered["node3"]
    salt_node.write_pillar({"only_roles": ROLES, "roles": {role: "absent" for role in ROLES.split(",")}})
    try:
        output, _ = salt_node.salt_call("state.apply", "cluster", "test=True", check=False)
    finally:
        salt_node.write_pillar({"only_roles": ROLES})
    states = {key.split("_|-")[1]: value for key, value in output.items()}
    assert {key: value["comment"] for key, value in states.items() if value["result"] is False} == {}
    assert "cleaned: fail2ban, nvidia, inotify, sshd_hostkeys" in states["ccc-cluster-roles-summary"]["name"]
    for state in ("ccc-cluster-fail2ban-clean-files", "ccc-cluster-nvidia-clean-files", "ccc-cluster-nvidia-clean-unhold",
                  "ccc-cluster-inotify-clean", "ccc-cluster-sshd_hostkeys-clean-backups"):
        assert state in states, sorted(states)
    assert not [key for key in states if key.startswith(("ccc-cluster-fail2ban-jail", "ccc-cluster-nvidia-packages"))]
