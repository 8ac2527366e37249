"""A hostile user against the containers role, for real: root in their own container (as CCC
users often are), swapping their folders for symlinks and device nodes, then waiting for the
container to be restarted, dockerd to be restarted and the node to reboot. Nothing of the host
may ever be reachable, and the user is told why a deploy was refused.

The reboot is simulated the way it looks to Docker and Salt: dockerd stops, every mount of the
node's pin tmpfs is gone, dockerd starts again (and tries to start the unless-stopped
containers), then Salt applies."""

import os
import pathlib
import stat
import time

import inotify_simple
import pytest
import yaml

from support import site
from support.nodes import node_dockerd
from support.site import SaltNode

pytestmark = pytest.mark.docker
ANA = "ana.novak@example.org"


@pytest.fixture
def node1(tmp_path, clean_node1, storage):
    salt = SaltNode(tmp_path / "salt", "node1", clean_node1.url, storage)
    salt.daemon = clean_node1
    salt.client = clean_node1.client()
    return salt


def user_folder(storage):
    return pathlib.Path(storage) / "shared" / "user_data" / ANA


def in_container(node, stack, *command):
    result = node.client.containers.get(stack).exec_run(list(command), user="root")
    return result.exit_code, result.output.decode()


def running(node, stack):
    return node.client.api.inspect_container(stack)["State"]["Running"]


def wait_running(node, stack, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if running(node, stack):
                return True
        except Exception:  # noqa: BLE001 - the daemon may still be starting
            pass
        time.sleep(0.5)
    return False


def restart_dockerd(node):
    node.daemon.stop()
    node.daemon = node_dockerd("node1")
    node.client = node.daemon.client()


def reboot(node, storage):
    """dockerd stops, the node's kernel mounts (the pin tmpfs) are gone, dockerd starts again."""
    node.daemon.stop()
    site.unmount_below(pathlib.Path(storage) / "local" / "binds")
    node.daemon = node_dockerd("node1")
    node.client = node.daemon.client()
    time.sleep(2)  # let dockerd try its unless-stopped restarts


def home_listing(node):
    code, output = in_container(node, "ana-main", "ls", "-a", "/home/ana")
    assert code == 0, output
    return set(output.split())


def test_home_swapped_for_a_symlink_to_root_never_reaches_the_container(node1, storage):
    results, code = node1.apply()
    assert code == 0, results
    home = user_folder(storage) / "ana-main"
    (home / "marker.txt").write_text("mine\n")

    # The attack, from inside the container as root: move the home aside, link / in its place.
    code, output = in_container(node1, "ana-main", "sh", "-c",
                                "mv /storage/user/ana-main /storage/user/ana-main.aside && ln -s / /storage/user/ana-main")
    assert code == 0, output
    assert os.path.islink(home)

    # Container restart: the home is still the folder that was checked (now named .aside).
    node1.client.containers.get("ana-main").restart(timeout=5)
    assert wait_running(node1, "ana-main")
    assert "marker.txt" in home_listing(node1) and "etc" not in home_listing(node1)

    # dockerd restart: Docker starts it again on the same pins.
    restart_dockerd(node1)
    assert wait_running(node1, "ana-main")
    assert "marker.txt" in home_listing(node1) and "etc" not in home_listing(node1)

    # A settings change would recreate it: refused, the running container stays as it is.
    settings = user_folder(storage) / "container-settings" / "ana-main.yml"
    settings.write_text(yaml.safe_dump({"ana-main": {"SHM_SIZE": "3g"}}))
    before = node1.client.containers.get("ana-main").id
    results, code = node1.apply(check=False)
    assert results["ccc-container-ana-main"]["result"] is False
    assert "refusing a user path" in results["ccc-container-ana-main"]["comment"]
    assert node1.client.containers.get("ana-main").id == before and running(node1, "ana-main")
    report = (user_folder(storage) / "container-settings" / "ana-main.deploy").read_text()
    assert "NOT deployed" in report and "symbolic link or not a folder" in report

    # Reboot: Docker cannot start it (its pins are gone), and Salt refuses the symlink.
    reboot(node1, storage)
    assert not running(node1, "ana-main")
    results, code = node1.apply(check=False)
    assert results["ccc-container-ana-main"]["result"] is False
    assert not running(node1, "ana-main")
    assert running(node1, "bor-main")  # other users are not held up
    assert not [p for p in open("/proc/self/mountinfo").read().split("\n") if " / " + str(home) in p]

    # The user puts the real folder back: the next apply brings the container back, same home.
    home.unlink()
    home.with_name("ana-main.aside").rename(home)
    results, code = node1.apply()
    assert code == 0, results
    assert running(node1, "ana-main") and "marker.txt" in home_listing(node1)


def test_every_user_folder_mount_is_pinned_against_swaps(node1, storage):
    """Settings folder, /storage/user and the local SSD folder: same attack, same result."""
    node1.apply()
    folder = user_folder(storage)
    (folder / "container-settings" / "note").write_text("settings\n")
    code, output = in_container(node1, "ana-main", "sh", "-c",
                                "mv /storage/user/container-settings /storage/user/cs.aside && "
                                "ln -s /etc /storage/user/container-settings")
    assert code == 0, output
    restart_dockerd(node1)
    assert wait_running(node1, "ana-main")
    code, output = in_container(node1, "ana-main", "ls", "/home/ana/.containers")
    assert "note" in output.split() and "passwd" not in output.split()


def test_private_group_symlink_is_never_mounted_over_a_host_folder(node1, storage, tmp_path):
    host_dir = tmp_path / "host-sbin"
    host_dir.mkdir()
    (host_dir / "tool").write_text("host binary\n")
    group = pathlib.Path(storage) / "shared" / "private_data" / "lab-shared"
    group.mkdir(parents=True)
    (group / "data.txt").write_text("lab data\n")
    node1.write_pillar({"user_types": {"researcher": {"allowed_private_data_mount_groups": []}}})
    node1.apply()
    # ana links the group's mount point to a host folder before the group is granted.
    os.symlink(str(host_dir), user_folder(storage) / "private" / "lab-shared")
    node1.write_pillar({"user_types": {"researcher": {"allowed_private_data_mount_groups": ["lab-shared"]}}})
    for _ in range(2):  # twice: nothing stacks up on repeated runs
        results, code = node1.apply(check=False)
        state = results["ccc-containers-private-mounts"]
        assert state["result"] is False and "lab-shared" in state["comment"]
    assert str(host_dir) not in open("/proc/self/mountinfo").read()
    assert sorted(os.listdir(host_dir)) == ["tool"]
    # bor (no symlink) got the group.
    code, output = in_container(node1, "bor-main", "cat", "/storage/private/lab-shared/data.txt")
    assert (code, output) == (0, "lab data\n")


def test_device_nodes_planted_as_settings_and_report_are_never_opened(node1, storage):
    node1.apply()
    folder = user_folder(storage) / "container-settings"
    for name in ("ana-main.yml", "ana-main.deploy"):
        (folder / name).unlink()
        os.mknod(folder / name, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # stands in for a watchdog
    watch = inotify_simple.INotify()
    watch.add_watch(str(folder), inotify_simple.flags.OPEN)
    results, code = node1.apply(check=False)
    opened = {event.name for event in watch.read(timeout=100)}
    assert not {"ana-main.yml", "ana-main.deploy"} & opened
    assert "not a regular file" in results["ccc-container-ana-main"]["comment"]
    report = folder / "ana-main.deploy"
    assert stat.S_ISREG(os.lstat(report).st_mode) and "not a regular file" in report.read_text()


def test_hardening_takes_raw_sockets_and_device_nodes_from_container_root(node1, storage):
    """What the kernel enforces for root in the container: no setuid escalation, no raw sockets,
    no device nodes (the bounding set), and a pids limit against fork bombs."""
    node1.apply()
    code, output = in_container(node1, "ana-main", "cat", "/proc/1/status")
    assert code == 0, output
    fields = {key.strip(): value.strip() for key, _, value in (line.partition(":") for line in output.splitlines())}
    assert fields["NoNewPrivs"] == "1"
    bounding = int(fields["CapBnd"], 16)
    assert not bounding & (1 << 13) and not bounding & (1 << 27)  # CAP_NET_RAW, CAP_MKNOD
    attrs = node1.client.api.inspect_container("ana-main")
    assert attrs["HostConfig"]["PidsLimit"] == 16384


def test_each_container_sees_only_its_own_host_keys(node1, storage):
    node1.apply()
    _, ana = in_container(node1, "ana-main", "cat", "/home/.sshd/keys/ssh_host_ed25519_key.pub")
    _, bor = in_container(node1, "bor-main", "cat", "/home/.sshd/keys/ssh_host_ed25519_key.pub")
    assert ana.startswith("ssh-ed25519 ") and bor.startswith("ssh-ed25519 ") and ana != bor
    code, output = in_container(node1, "ana-main", "ls", "/home/.sshd/keys")
    assert sorted(output.split()) == sorted(f"ssh_host_{k}_key{s}" for k in ("rsa", "ecdsa", "ed25519") for s in ("", ".pub"))
    code, _ = in_container(node1, "ana-main", "sh", "-c", "echo x > /home/.sshd/keys/ssh_host_rsa_key")
    assert code != 0  # read-only, even for root in the container
    # Recreated (a settings change) or moved: the same keys.
    settings = user_folder(storage) / "container-settings" / "ana-main.yml"
    settings.write_text(yaml.safe_dump({"ana-main": {"SHM_SIZE": "3g"}}))
    node1.apply()
    assert in_container(node1, "ana-main", "cat", "/home/.sshd/keys/ssh_host_ed25519_key.pub")[1] == ana


def test_nothing_is_created_below_a_missing_storage_root(node1, storage, tmp_path):
    """The NFS user-data root is not mounted: a successful GitHub key fetch caches the keys on
    the node, and nothing (state dir, user folders, host keys) appears where the share belongs."""
    keys = tmp_path / "github"
    keys.mkdir()
    (keys / "ana-gh.keys").write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKDz5T7C1Q1lP5pv3kJx9fBNm3bCZ8Hn0uJqYw0aPj9h gh\n")
    node1.write_pillar({"cluster": {"github_keys_url": f"file://{keys}/{{login}}.keys"},
                        "containers": [dict(c, USER_PUBKEY_FROM_GITHUB="ana-gh") if c["STACK_NAME"] == "ana-main" else c
                                       for c in site.sample_ccc("node1")["containers"]]})
    user_data = pathlib.Path(storage) / "shared" / "user_data"
    user_data.rmdir()  # not mounted
    results, code = node1.apply(check=False)
    assert code != 0
    assert results["ccc-container-ana-main"]["result"] is False
    assert "storage not mounted" in results["ccc-container-ana-main"]["comment"]
    assert not user_data.exists()
    cached = pathlib.Path(storage) / "local" / "node-state" / "node1" / "github-keys" / "ana-gh.keys"
    assert cached.read_text().startswith("ssh-ed25519 ")
    assert managed(node1) == set()


def managed(node):
    return {c.labels["ccc.stack"] for c in node.client.containers.list(all=True, filters={"label": "ccc.managed-by=ccc-salt"})}
