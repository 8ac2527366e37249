"""The nfs_storage and cachefilesd roles applied for real on a systemd test node
(tests/support/sysnode.py), and the containers role's refusal of user data while the NFS share
is missing, through the real ``state.apply containers``.

This machine's kernel has neither an NFS client nor the cachefiles module (no ``nfs`` in
/proc/filesystems, ``modprobe`` unavailable), so no share can be mounted for real and the
FS-cache daemon cannot start; the test asserts what an admin reads then:

* user_data's "server" is the node itself, where a FAKE server only accepts TCP on port 2049 (a
  Python listener: it answers the role's probe and nothing else), so the role gets to the real
  ``mount -t nfs`` of nfs-common, which fails with the kernel's own error (the listener runs on
  the project's venv python, which the node sees at its own path);
* group_data's server is 192.0.2.1 (TEST-NET-1, no host answers): refused before any mount;
* both mount points are in fstab with ``fsc`` (cachefilesd is on), and stay plain empty folders.
* ``ccc:cluster:mount_points:nfs_required`` is on: the containers role creates nothing under the
  plain folder and the user's existing report folder gets a ``.deploy`` saying why.

The compute image is ``ccc-test/tiny:1`` tagged with an allowed name: nothing is ever started."""

import json
import subprocess

import pytest

from support.sysnode import VENV, changed, failed

pytestmark = pytest.mark.docker

SHARED = "/srv/ccc/shared"
USERS, GROUP = f"{SHARED}/user_data", f"{SHARED}/group_data"
EMAIL, STACK = "ana.novak@example.org", "ana-nfs"
IMAGE = "vicoslab/ccc:nfs-test"
ROLES = "docker,cachefilesd,nfs_storage"
FAKE_SERVER = ("import socket,time\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
               "s.bind(('127.0.0.1',2049))\ns.listen(8)\nwhile True:\n    c,_=s.accept()\n    c.close()\n")


def _pillar(containers=()):
    points = {name: f"{SHARED}/{name}" for name in ("user_data", "group_data", "apps_data", "dataset_data", "private_data")}
    return {"ccc": {
        "roles": {"docker": True, "cachefilesd": True, "nfs_storage": True},
        "only_roles": ROLES,
        "cluster": {"mount_points": {"nfs": points, "nfs_required": True, "local": {"sshd_data": "/srv/ccc/local/sshd"}},
                    "nfs_user": {"name": "nfs-lab", "uid": 1500, "gid": 1600},
                    "networks": {"claims": {"subnet": "172.31.2.0/24", "gateway": "172.31.2.1", "bridge_name": "ccc-claims"}}},
        "docker": {"registries": [], "daemon": {}},
        "nfs_storage": {"check_timeout": 3, "mounts": {"user_data": "127.0.0.1:/export/users",
                                                       "group_data": {"source": "192.0.2.1:/export/group", "fstype": "nfs4"}}},
        "cachefilesd": {"cache_dir": "/var/cache/ccc-fscache", "bcull": 8},
        "containers": list(containers),
    }}


@pytest.fixture(scope="module")
def node(sysnodes):
    made = sysnodes("nfs-storage")
    made.add_apt_source()
    made.write_file("/usr/local/sbin/fake-nfs-server", FAKE_SERVER)
    python = str(VENV / "bin" / "python")  # the node image has no python3 of its own; the project's venv is there
    subprocess.run(["docker", "exec", "-d", made.container, python, "/usr/local/sbin/fake-nfs-server"], check=True)
    made.exec(f"for i in $(seq 50); do {python} -c 'import socket; socket.create_connection((\"127.0.0.1\", 2049), 1)' "
              "2>/dev/null && exit 0; sleep 0.1; done; exit 1")
    made.write_pillar("site/nodes/nfs-storage.sls", json.dumps(_pillar()))
    made.salt_call("saltutil.sync_all")
    return made


@pytest.fixture(scope="module")
def runs(node):
    first = node.salt_call("state.apply", "cluster", check=False).states()
    second = node.salt_call("state.apply", "cluster", check=False).states()
    return first, second


def test_user_package_and_fstab(node, runs):
    first, _ = runs
    for state in ("ccc-cluster-nfs_storage-user", "ccc-cluster-nfs_storage-group", "ccc-cluster-nfs_storage-package"):
        assert first[state]["result"] is True, first[state]
    assert node.exec("getent passwd nfs-lab").stdout.strip() == "nfs-lab:x:1500:1600:CCC NFS user:/nonexistent:/usr/sbin/nologin"
    assert node.exec("getent group nfs-lab").stdout.strip().startswith("nfs-lab:x:1600:")
    assert node.exec("getent shadow nfs-lab | cut -d: -f2").stdout.strip() == "!"
    assert node.exec("test -e /nonexistent", check=False).returncode != 0
    assert node.exec("dpkg-query -W -f '${Status}' nfs-common").stdout == "install ok installed"
    fstab = node.exec("cat /etc/fstab").stdout.splitlines()
    assert f"127.0.0.1:/export/users {USERS} nfs auto,async,fsc 0 0" in fstab
    assert f"192.0.2.1:/export/group {GROUP} nfs4 auto,async,fsc 0 0" in fstab


def test_mounts_fail_clearly_and_leave_empty_mount_points(node, runs):
    first, _ = runs
    users, group = first["ccc-cluster-nfs_storage-mount-user_data"], first["ccc-cluster-nfs_storage-mount-group_data"]
    assert users["result"] is False and group["result"] is False
    # the fake server answered the probe: the real mount.nfs ran and its own error is reported
    assert users["comment"].startswith(f"{USERS}: not mounted: mount -t nfs -o auto,async,fsc 127.0.0.1:/export/users {USERS} failed")
    assert group["comment"].startswith(f"{GROUP}: not mounted: NFS server 192.0.2.1 ")
    assert node.exec(f"ls -A {USERS}").stdout == ""
    assert node.exec(f"test -e {GROUP}", check=False).returncode != 0  # never reached: no folder made for it
    assert f" {USERS} " not in node.exec("cat /proc/self/mountinfo").stdout


def test_cachefilesd_configured_and_says_why_it_does_not_run(node, runs):
    first, _ = runs
    assert node.exec("dpkg-query -W -f '${Status}' cachefilesd").stdout == "install ok installed"
    conf = node.exec("grep -v '^#' /etc/cachefilesd.conf").stdout.splitlines()
    assert conf == ["dir /var/cache/ccc-fscache", "tag nfs-storage-cache", "brun 10%", "bcull 8%", "bstop 3%",
                    "frun 10%", "fcull 7%", "fstop 3%"]
    assert "RUN=yes" in node.exec("cat /etc/default/cachefilesd").stdout.splitlines()
    assert node.exec("stat -c '%U %a' /var/cache/ccc-fscache").stdout.split() == ["root", "700"]
    assert node.exec("systemctl is-enabled cachefilesd", check=False).stdout.strip() == "enabled"
    kernel = first["ccc-cluster-cachefilesd-kernel"]
    assert kernel["result"] is False
    assert kernel["comment"].startswith("cachefilesd is installed, configured and enabled, but not started: this "
                                        "node's kernel has no cachefiles support")


def test_second_apply_changes_nothing_and_fails_the_same(runs):
    first, second = runs
    assert changed(second) == {}
    assert failed(second) == failed(first)
    # the sample site's other shares (merged in from sample-pillar: nas.example.org) fail the same clear way
    sample = {f"ccc-cluster-nfs_storage-mount-{key}" for key in ("apps_data", "dataset_data", "private_data")}
    assert set(failed(first)) == {"ccc-cluster-nfs_storage-mount-user_data", "ccc-cluster-nfs_storage-mount-group_data",
                                  "ccc-cluster-cachefilesd-kernel"} | sample
    assert all(": not mounted: NFS server nas.example.org cannot be reached on port 2049" in first[key]["comment"]
               for key in sample)


def test_cachefilesd_kept_stopped_is_stopped_disabled_and_does_not_fail(node, runs):
    """The original's cachefilesd_state: stopped (ccc:cachefilesd:state): the config stays, the
    unit is stopped and disabled, the open-files limit goes, and no kernel module is asked for."""
    pillar = _pillar()
    pillar["ccc"]["cachefilesd"]["state"] = "stopped"
    pillar["ccc"]["only_roles"] = "cachefilesd"
    node.write_pillar("site/nodes/nfs-storage.sls", json.dumps(pillar))
    try:
        states = node.salt_call("state.apply", "cluster", check=False).states()
        again = node.salt_call("state.apply", "cluster", check=False).states()
    finally:
        node.write_pillar("site/nodes/nfs-storage.sls", json.dumps(_pillar()))
    assert failed(states) == {}
    assert set(changed(states)) == {"ccc-cluster-cachefilesd-service", "ccc-cluster-cachefilesd-nofile"}
    assert node.exec("systemctl is-enabled cachefilesd", check=False).stdout.strip() == "disabled"
    assert node.exec("systemctl is-active cachefilesd", check=False).stdout.strip() == "inactive"
    assert node.exec("test -e /etc/security/limits.d/ccc-cachefilesd.conf", check=False).returncode == 1
    assert "dir /var/cache/ccc-fscache" in node.exec("cat /etc/cachefilesd.conf").stdout
    assert (changed(again), failed(again)) == ({}, {})


def test_containers_refuse_user_data_while_the_share_is_missing(node, runs):
    saved = subprocess.run(["docker", "save", "ccc-test/tiny:1"], capture_output=True, check=True).stdout
    subprocess.run(["docker", "exec", "-i", node.container, "docker", "load"], input=saved, capture_output=True, check=True)
    node.exec(["docker", "tag", "ccc-test/tiny:1", IMAGE])
    settings = f"{USERS}/{EMAIL}/container-settings"
    node.exec(f"mkdir -p {settings}")  # the user's report folder, left from before the share went away
    record = {"STACK_NAME": STACK, "USER_EMAIL": EMAIL, "CONTAINER_IMAGE": IMAGE, "DEPLOYMENT_NODES": ["nfs-storage"],
              "ALLOWED_NODES": ["nfs-storage"]}
    node.write_pillar("site/nodes/nfs-storage.sls", json.dumps(_pillar([record])))
    states = node.salt_call("state.apply", "containers", check=False).states()
    comments = " | ".join(failed(states).values())
    assert f"{STACK}: refusing user data on nfs-storage, NFS storage missing: " in comments, comments
    assert f"{USERS} is not on its nfs share (on overlay /: the node's own disk, the share is not mounted)" in comments
    # only the node's usage schedule is set up (it runs whatever the shares do; see below)
    assert changed(states) == {"ccc-containers-usage-accounting": {"ccc-usage-accounting": "added"}}, changed(states)
    # network accounting refuses too: its statistics would start a forked copy on the node's own disk
    collect = node.salt_call("ccc_usage.collect", check=False)
    assert collect.returncode != 0 and f"{USERS} is not on its nfs share" in collect.stdout + collect.stderr, collect
    assert node.exec(f"find {SHARED} -mindepth 1 | sort").stdout.split() == [
        USERS, f"{USERS}/{EMAIL}", settings, f"{settings}/{STACK}.deploy"]
    report = node.exec(f"cat {settings}/{STACK}.deploy").stdout
    assert "NOT deployed on nfs-storage: the shared storage is not mounted there, so nothing of yours was created" in report
    assert node.exec(["docker", "ps", "-aq", "--filter", f"name={STACK}"]).stdout.strip() == ""
