"""The host-base cluster roles applied for real on a systemd test node (tests/support/sysnode.py):
fail2ban from the node's apt repo with its sshd jail active, inotify limits set and kept across a
reboot, the NVIDIA driver from the repo's stand-in packages (FAKES, see tests/support/aptrepo.py:
no GPU, no NVIDIA archive) held, persistenced running and "reboot needed" reported without a
reboot, and the containers' host keys backed up, rotated and copied to the node's folder.

The node is made with ``host_sysctl=True``: the fs.inotify values it sets are the host kernel's,
so they are raised by one from the host's own and restored afterwards."""

import base64
import io
import json
import pathlib
import tarfile

import pytest

pytestmark = pytest.mark.docker

from support import site  # noqa: F401  (puts _utils on sys.path)

import ccc_hostkeys

ROLES = "fail2ban,nvidia,inotify,sshd_hostkeys"
INOTIFY = ("max_user_watches", "max_user_instances")
SHARED = "/srv/ccc/shared/user_data"
SSHD = "/srv/ccc/local/sshd"


def sh(node, command):
    """Run a shell command in the node: (returncode, stdout + stderr)."""
    result = node.exec(command, check=False)
    return result.returncode, result.stdout + result.stderr


def apply(node):
    call = node.salt_call("state.apply", "cluster", check=False)
    return call.states()


def host_inotify():
    return {key: int(pathlib.Path(f"/proc/sys/fs/inotify/{key}").read_text()) for key in INOTIFY}


@pytest.fixture(scope="module")
def node(request, sysnodes, tmp_path_factory):
    """A node with the four roles on, the test apt repository as its source, and one stack's
    host keys in its shared and node folders."""
    saved = host_inotify()
    request.addfinalizer(lambda: [pathlib.Path(f"/proc/sys/fs/inotify/{k}").write_text(str(v)) for k, v in saved.items()])
    made = sysnodes("host-roles", host_sysctl=True)
    made.add_apt_source()
    wanted = {key: value + 1 for key, value in saved.items()}
    pillar = {"ccc": {"roles": {"nvidia": True}, "only_roles": ROLES,
                      "cluster": {"mount_points": {"nfs": {"user_data": SHARED}, "local": {"sshd_data": SSHD}}},
                      "fail2ban": {"ignore_country": None, "maxretry": 4, "ignoreip": ["127.0.0.1/8", "10.9.0.0/16"]},
                      "inotify": wanted, "nvidia": {"driver_version": "550"},
                      "sshd_hostkeys": {"backup_dir": "/var/backups/ccc-test/host-keys", "keep": 3}}}
    made.write_pillar("site/nodes/host-roles.sls", json.dumps(pillar))
    made.salt_call("saltutil.sync_all")
    # One stack as the containers role leaves it: a shared set and the node's copy.
    work = tmp_path_factory.mktemp("keys")
    (work / "shared").mkdir()
    (work / "sshd").mkdir()
    ccc_hostkeys.ensure(str(work / "sshd"), str(work / "shared" / ".ccc-salt"), "box", rsa_bits=1024)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(str(work / "shared" / ".ccc-salt" / "host-keys"), "shared/.ccc-salt/host-keys")
        tar.add(str(work / "sshd" / "stacks"), "sshd/stacks")
    code, out = sh(made, f"mkdir -p /srv/ccc/local && echo {base64.b64encode(buffer.getvalue()).decode()} | base64 -d"
                         f" | tar xz -C /srv/ccc/local && mkdir -p {SHARED} && mv /srv/ccc/local/shared/.ccc-salt {SHARED}/")
    assert code == 0, out
    made.wanted_inotify = wanted
    return made


@pytest.fixture(scope="module")
def applies(node):
    """(first apply, PID 1's start time before the applies and after them, second apply); the
    node's reboot flag files are kept in ``node.flagged`` (a later reboot clears /run)."""
    boot = sh(node, "cut -d' ' -f22 /proc/1/stat")[1].strip()
    first = apply(node)
    second = apply(node)
    node.flagged = sh(node, "cat /var/run/reboot-required /var/run/reboot-required.pkgs")[1]
    return first, (boot, sh(node, "cut -d' ' -f22 /proc/1/stat")[1].strip()), second


def test_first_apply_succeeds_and_second_changes_nothing(applies):
    first, _, second = applies
    assert {k: v["comment"] for k, v in first.items() if v["result"] is not True} == {}
    assert {k: v["changes"] for k, v in second.items() if v["changes"]} == {}
    assert all(v["result"] is True for v in second.values())


def test_fail2ban_jail_is_active(node, applies):
    code, out = sh(node, "fail2ban-client status sshd")
    assert code == 0 and "Currently banned" in out, out
    code, out = sh(node, "fail2ban-client get sshd maxretry; fail2ban-client get sshd ignoreip")
    assert out.split()[0] == "4" and "10.9.0.0/16" in out
    assert sh(node, "systemctl is-enabled fail2ban")[1].strip() == "enabled"


def test_inotify_values_set_and_kept_after_reboot(node, applies):
    config = "/etc/sysctl.d/60-ccc-inotify.conf"
    for key, value in node.wanted_inotify.items():
        assert sh(node, f"sysctl -n fs.inotify.{key}")[1].strip() == str(value)
    node.restart()
    code, out = sh(node, f"cat {config}")
    assert code == 0
    for key, value in node.wanted_inotify.items():
        assert f"fs.inotify.{key} = {value}" in out
        assert sh(node, f"sysctl -n fs.inotify.{key}")[1].strip() == str(value)


def test_driver_held_persistenced_running_reboot_only_reported(node, applies):
    first, (boot_before, boot_after), _ = applies
    reboot = first["ccc-cluster-nvidia-reboot-needed"]
    assert reboot["result"] is True and reboot["comment"].startswith("reboot needed: the NVIDIA driver packages changed")
    assert boot_before == boot_after  # PID 1 never restarted: no reboot
    assert node.flagged == "*** System restart required ***\nnvidia-headless-550\nnvidia-utils-550\n"
    held = sh(node, "apt-mark showhold")[1].split()
    assert {"nvidia-headless-550", "nvidia-utils-550"} <= set(held)
    assert sh(node, "systemctl is-enabled nvidia-persistenced; systemctl is-active nvidia-persistenced")[1].split() == [
        "enabled", "active"]
    code, out = sh(node, "apt-config dump Unattended-Upgrade::Package-Blacklist")
    assert '"nvidia-"' in out and '"libnvidia-"' in out


def test_host_keys_backed_up_rotated_and_copied(node, applies):
    code, out = sh(node, "stat -c '%a %U %n' /var/backups/ccc-test/host-keys /var/backups/ccc-test/host-keys/*.tar")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("700 root") and len(lines) == 2 and lines[1].startswith("600 root")
    # The set stays in the state dir on the user-data share (the default store: it follows moves
    # on any export layout), root-only; ADMIN_USER_ACCESS containers see an empty tmpfs there.
    first, _, _ = applies
    assert "moved to the key store" not in first["ccc-cluster-sshd_hostkeys-backup"]["changes"]
    assert sh(node, f"stat -c '%a %U' {SHARED}/.ccc-salt/host-keys")[1].strip() == "700 root"
    old = node.salt_call("ccc_hostkeys.fingerprints", "box").data
    rotated = node.salt_call("ccc_hostkeys.rotate", "box").data
    assert rotated["old"] == old and rotated["new"]["ed25519"] != old["ed25519"]
    node_pub = f"{SSHD}/stacks/box/keys/ssh_host_ed25519_key.pub"
    assert sh(node, f"ssh-keygen -lf {node_pub}")[1].split()[1] == old["ed25519"]
    states = apply(node)
    assert states["ccc-cluster-sshd_hostkeys-node-copies"]["changes"] == {"refreshed": ["box"]}
    assert sh(node, f"ssh-keygen -lf {node_pub}")[1].split()[1] == rotated["new"]["ed25519"]
    assert len(sh(node, "ls /var/backups/ccc-test/host-keys")[1].split()) == 2  # the rotated sets backed up too
