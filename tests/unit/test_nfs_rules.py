"""The NFS rules (``_utils/ccc_nfs.py``) and the cachefilesd rules (``_utils/ccc_cachefilesd.py``):
mountinfo parsing against real lines of a Linux host (ext4 root, tmpfs, cgroup, a bind from an
ext4 folder) and recorded NFS client lines (nfs4 with fsc, an nfs v3 mount, an escaped space),
the fstab entry and its replacement, option comparison, the containers' "NFS missing" fact, and
the culling thresholds an admin gets refused."""

import pytest

from support import role_files, site  # noqa: F401  (site puts _utils on sys.path)

import ccc_cachefilesd
import ccc_nfs

# Real lines of this project's build machine (/proc/self/mountinfo).
HOST_LINES = """\
22 27 0:21 / /proc rw,relatime shared:4 - proc proc rw
27 1 254:0 / / rw,relatime shared:2 - ext4 /dev/vda rw,discard,resv_strict,resuid=65534,resgid=65534
25 24 0:23 / /dev/shm rw,relatime shared:18 - tmpfs tmpfs rw,size=24683568k
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:16 - cgroup2 cgroup2 rw
46 27 0:40 / /run/ccc-salt/binds rw,nosuid,nodev,noexec,relatime - tmpfs ccc-pins rw,size=4096k,mode=711
47 46 254:0 /srv/ccc/shared/user_data/ana.novak@example.org/ana-main /run/ccc-salt/binds/ana-main/d46b62f56bcd/home rw,relatime - ext4 /dev/vda rw,discard,resv_strict,resuid=65534,resgid=65534
"""
# Recorded from NFS clients (Debian 12, kernel 6.1): v4.2 with FS-cache, a v3 mount, a path with a space.
NFS_LINES = """\
112 27 0:52 / /data/shared/user_data rw,relatime shared:60 - nfs4 nas.lab:/export/users rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.0.0.11,fsc,local_lock=none,addr=10.0.0.2
113 27 0:53 / /data/shared/apps ro,relatime shared:61 - nfs nas.lab:/export/apps ro,vers=3,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,mountaddr=10.0.0.2,mountvers=3,mountport=20048,mountproto=udp,local_lock=none,addr=10.0.0.2
114 27 0:54 / /data/shared/group\\040data rw,relatime shared:62 - nfs4 nas.lab:/export/group rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.0.0.11,local_lock=none,addr=10.0.0.2
"""
CLUSTER = {"mount_points": {"nfs": {"user_data": "/data/shared/user_data", "apps_data": "/data/shared/apps",
                                    "group_data": "/data/shared/group data"}}}
SETTINGS = {"options": ["auto", "async"], "fstype": "nfs", "check_timeout": 10, "mounts": {}}
NFS_SCHEMA = role_files.schema("nfs_storage")


def test_real_host_lines_parse_with_both_option_sets_and_the_bind_shows_its_filesystem():
    mounts = ccc_nfs.parse_mountinfo(HOST_LINES)
    assert [m["mount_point"] for m in mounts] == ["/proc", "/", "/dev/shm", "/sys/fs/cgroup/unified",
                                                  "/run/ccc-salt/binds", "/run/ccc-salt/binds/ana-main/d46b62f56bcd/home"]
    root = ccc_nfs.mount_at(mounts, "/")
    assert (root["fstype"], root["source"]) == ("ext4", "/dev/vda")
    assert {"rw", "relatime", "discard"} <= root["options"]
    assert ccc_nfs.mount_at(mounts, "/srv/ccc/shared/user_data") is None  # a plain folder, no mount point
    assert ccc_nfs.mount_of(mounts, "/srv/ccc/shared/user_data")["mount_point"] == "/"


def test_real_mountinfo_of_this_machine_parses_every_line():
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as handle:
        text = handle.read()
    mounts = ccc_nfs.parse_mountinfo(text)
    assert len(mounts) == len(text.splitlines())
    assert ccc_nfs.mount_at(mounts, "/proc")["fstype"] == "proc"


def test_recorded_nfs_lines_kinds_escapes_and_options():
    mounts = ccc_nfs.parse_mountinfo(NFS_LINES)
    users, apps, group = mounts
    assert (users["fstype"], users["source"], group["mount_point"]) == ("nfs4", "nas.lab:/export/users", "/data/shared/group data")
    assert ccc_nfs.is_kind(users, "nfs") and ccc_nfs.is_kind(users, "nfs4")
    assert ccc_nfs.is_kind(apps, "nfs") and not ccc_nfs.is_kind(apps, "nfs4")
    # fsc and vers=4 (negotiated to 4.2) are there; auto/async/_netdev never show; ro on a rw mount is missing
    assert ccc_nfs.options_missing(["auto", "async", "_netdev", "fsc", "nfsvers=4", "hard"], users["options"]) == []
    assert ccc_nfs.options_missing(["auto", "fsc", "ro"], group["options"]) == ["fsc", "ro"]


def test_check_builds_mounts_adds_fsc_with_cachefilesd_and_keeps_own_options():
    settings = dict(SETTINGS, mounts={"user_data": "nas.lab:/export/users",
                                      "apps_data": {"source": "nas.lab:/export/apps", "options": ["auto", "ro", "fsc"],
                                                    "fstype": "nfs4"}})
    mounts, problems = ccc_nfs.check(settings, CLUSTER, NFS_SCHEMA, cachefilesd_on=True)
    assert problems == []
    assert mounts == [
        {"key": "apps_data", "path": "/data/shared/apps", "source": "nas.lab:/export/apps", "server": "nas.lab",
         "fstype": "nfs4", "options": ["auto", "ro", "fsc"]},
        {"key": "user_data", "path": "/data/shared/user_data", "source": "nas.lab:/export/users", "server": "nas.lab",
         "fstype": "nfs", "options": ["auto", "async", "fsc"]},
    ]
    assert ccc_nfs.check(settings, CLUSTER, NFS_SCHEMA)[0][1]["options"] == ["auto", "async"]


@pytest.mark.parametrize("mounts, timeout, expected", [
    ({"home": "nas:/x"}, 10, "ccc:nfs_storage:mounts:home: no such key in ccc:cluster:mount_points:nfs"),
    ({"user_data": "/export/users"}, 10, "ccc:nfs_storage:mounts:user_data:source must be server:/export"),
    ({"user_data": "nas:export"}, 10, "source must be server:/export"),
    ({"user_data": {"source": "nas:/e", "fstype": "cifs"}}, 10, "fstype must be one of nfs, nfs4"),
    ({"user_data": {"source": "nas:/e", "options": ["rw,fsc x"]}}, 10, "options: 'rw,fsc x' is not a mount option"),
    ({}, 0, "ccc:nfs_storage:check_timeout must be whole seconds 1..120"),
])
def test_check_refuses_bad_settings(mounts, timeout, expected):
    checked, problems = ccc_nfs.check(dict(SETTINGS, mounts=mounts, check_timeout=timeout), CLUSTER, NFS_SCHEMA)
    assert checked == [] and len(problems) == 1 and expected in problems[0]


def test_fstab_entry_replaces_the_old_one_for_the_path_and_keeps_the_rest():
    mount = {"path": "/data/shared/group data", "source": "nas.lab:/export/group", "fstype": "nfs",
             "options": ["auto", "async", "fsc"]}
    line = "nas.lab:/export/group /data/shared/group\\040data nfs auto,async,fsc 0 0"
    assert ccc_nfs.fstab_line(mount) == line
    text = ("# /etc/fstab\nUUID=abc / ext4 errors=remount-ro 0 1\n"
            "old:/g /data/shared/group\\040data nfs auto 0 0\nold2:/g /data/shared/group\\040data/ nfs ro 0 0\n")
    new, old = ccc_nfs.fstab_update(text, mount)
    assert new == f"# /etc/fstab\nUUID=abc / ext4 errors=remount-ro 0 1\n{line}\n"
    assert old == ["old:/g /data/shared/group\\040data nfs auto 0 0", "old2:/g /data/shared/group\\040data/ nfs ro 0 0"]
    assert ccc_nfs.fstab_update(new, mount) == (new, [line])
    assert ccc_nfs.fstab_update("", mount)[0] == line + "\n"


def test_containers_fact_off_by_default_and_on_when_required():
    ccc = {"nfs_storage": {"mounts": {"apps_data": {"source": "nas:/a", "fstype": "nfs4"}}}}
    assert ccc_nfs.required_points(ccc, CLUSTER) == {}
    cluster = {"mount_points": dict(CLUSTER["mount_points"], nfs_required=True)}
    required = ccc_nfs.required_points(ccc, cluster)
    assert required == {"/data/shared/user_data": "nfs", "/data/shared/apps": "nfs4", "/data/shared/group data": "nfs"}
    # apps is an nfs v3 mount where nfs4 is configured; group data is fine; user_data missing on a plain host
    missing = ccc_nfs.storage_fact(required, ccc_nfs.parse_mountinfo(NFS_LINES))
    assert list(missing) == ["/data/shared/apps"]
    assert missing["/data/shared/apps"] == ("/data/shared/apps is not on its nfs4 share (on nfs /data/shared/apps: "
                                            "the node's own disk, the share is not mounted)")
    on_host = ccc_nfs.storage_fact(required, ccc_nfs.parse_mountinfo(HOST_LINES))
    assert on_host["/data/shared/user_data"] == ("/data/shared/user_data is not on its nfs share (on ext4 /: the node's "
                                                 "own disk, the share is not mounted)")


def test_missing_for_only_what_a_deploy_uses():
    missing = {"/data/shared/apps": "apps missing", "/data/shared/user_data": "users missing"}
    resolution = {"directories": [{"root": "/data/shared/user_data", "parts": ["a@b.org"]}],
                  "spec": {"mounts": [{"source": "/data/shared/user_data/a@b.org/box",
                                       "pin": {"root": "/data/shared/user_data", "parts": ["a@b.org", "box"]}},
                                      {"source": "/data/shared/datasets"}]}}
    assert ccc_nfs.missing_for(missing, ccc_nfs.paths_used(resolution)) == ["users missing"]
    assert ccc_nfs.missing_for(missing, ["/data/shared/apps-old"]) == []
    assert ccc_nfs.missing_for(missing, ["/data/shared/apps/matlab"]) == ["apps missing"]


CACHE = {"cache_dir": "/data/nfs-cache", "brun": "10%", "bcull": 7, "bstop": "3", "frun": 10, "fcull": 7, "fstop": 3,
         "daemon_opts": ""}
CACHE_SCHEMA = role_files.schema("cachefilesd")


def test_cachefilesd_config_text():
    checked, problems = ccc_cachefilesd.check(CACHE, CACHE_SCHEMA)
    assert problems == []
    assert ccc_cachefilesd.conf_text(checked, "gpu1").splitlines()[1:] == [
        "dir /data/nfs-cache", "tag gpu1-cache", "brun 10%", "bcull 7%", "bstop 3%", "frun 10%", "fcull 7%", "fstop 3%"]
    assert "RUN=yes\n" in ccc_cachefilesd.default_text(checked)


@pytest.mark.parametrize("change, expected", [
    ({"brun": 101}, "ccc:cachefilesd:brun must be a percentage 0..99 (10, \"10\" or \"10%\"), got 101"),
    ({"fstop": "-1%"}, "ccc:cachefilesd:fstop must be a percentage 0..99 (10, \"10\" or \"10%\"), got '-1%'"),
    ({"bcull": True}, "ccc:cachefilesd:bcull must be a percentage 0..99 (10, \"10\" or \"10%\"), got True"),
    ({"bcull": 10}, "ccc:cachefilesd: brun > bcull > bstop is required, got 10% > 10% > 3%"),
    ({"fstop": 8}, "ccc:cachefilesd: frun > fcull > fstop is required, got 10% > 7% > 8%"),
    ({"cache_dir": "cache"}, "ccc:cachefilesd:cache_dir must be an absolute folder other than /, got 'cache'"),
    ({"daemon_opts": "-s; rm -rf /"}, "ccc:cachefilesd:daemon_opts must be plain daemon options"),
])
def test_cachefilesd_refuses_bad_thresholds(change, expected):
    problems = ccc_cachefilesd.check(dict(CACHE, **change), CACHE_SCHEMA)[1]
    assert len(problems) == 1 and problems[0].startswith(expected)
