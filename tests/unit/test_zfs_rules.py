"""The zfs role's pure rules: ``ccc:zfs`` checking (bad pillars are problems or refusals, never
commands), reading ``zpool status -P`` as OpenZFS prints it, comparing layouts by resolved
device, the create command (never forced), property and probe verdicts, module parameters."""

import pytest

from support import role_files, site  # noqa: F401  (site puts _utils on the path)

import ccc_zfs

SCHEMA = role_files.schema("zfs")

STATUS = """  pool: tank
 state: ONLINE
  scan: scrub repaired 0B in 00:10:02 with 0 errors on Sun Mar  9 00:34:03 2025
config:

\tNAME                                          STATE     READ WRITE CKSUM
\ttank                                          ONLINE       0     0     0
\t  mirror-0                                    ONLINE       0     0     0
\t    /dev/disk/by-id/ata-WDC_A-part1           ONLINE       0     0     0
\t    /dev/disk/by-id/ata-WDC_B-part1           ONLINE       0     0     0
\t  raidz2-1                                    ONLINE       0     0     0
\t    /dev/sdd1                                 ONLINE       0     0     0
\t    /dev/sde1                                 ONLINE       0     0     0
\t    /dev/sdf1                                 ONLINE       0     0     0
\tlogs
\t  /dev/nvme0n1p1                              ONLINE       0     0     0
\tcache
\t  /dev/nvme0n1p2                              ONLINE       0     0     0
\tspares
\t  /dev/sdg1                                   AVAIL

errors: No known data errors
"""


def test_zpool_status_is_read_as_a_tree():
    assert ccc_zfs.parse_status(STATUS, "tank") == [
        {"section": "data", "type": "mirror", "devices": ["/dev/disk/by-id/ata-WDC_A-part1", "/dev/disk/by-id/ata-WDC_B-part1"]},
        {"section": "data", "type": "raidz2", "devices": ["/dev/sdd1", "/dev/sde1", "/dev/sdf1"]},
        {"section": "logs", "type": "disk", "devices": ["/dev/nvme0n1p1"]},
        {"section": "cache", "type": "disk", "devices": ["/dev/nvme0n1p2"]},
        {"section": "spares", "type": "disk", "devices": ["/dev/sdg1"]}]
    with pytest.raises(ValueError, match="no config tree for pool other"):
        ccc_zfs.parse_status(STATUS, "other")


# How the node resolves paths: by-id links to sdX, ZFS's first partitions to their whole disks.
LINKS = {"/dev/disk/by-id/ata-WDC_A": "/dev/sdb", "/dev/disk/by-id/ata-WDC_B": "/dev/sdc",
         "/dev/disk/by-id/ata-WDC_A-part1": "/dev/sdb1", "/dev/disk/by-id/ata-WDC_B-part1": "/dev/sdc1"}


def identify(path):
    real = LINKS.get(path, path)
    parent = real[:-1] if real[-1].isdigit() and real.startswith("/dev/sd") else None
    return [real] + ([parent] if parent else [])


def test_layouts_compare_by_resolved_device_whole_disks_matching_their_zfs_partition():
    tree = ccc_zfs.parse_status(STATUS, "tank")
    pillar = [{"type": "mirror", "disks": ["/dev/sdc", "/dev/disk/by-id/ata-WDC_A"]},
              {"type": "raidz2", "disks": ["/dev/sdd", "/dev/sde", "/dev/sdf"]},
              {"type": "log", "disks": ["/dev/nvme0n1p1"]}, {"type": "cache", "disks": ["/dev/nvme0n1p2"]},
              {"type": "spare", "disks": ["/dev/sdg"]}]
    assert ccc_zfs.layout_differences(ccc_zfs.wanted_layout(pillar), tree, identify) == []
    pillar[1]["disks"][2] = "/dev/sdf2"  # another partition of the same disk is another device
    assert ccc_zfs.layout_differences(ccc_zfs.wanted_layout(pillar), tree, identify) == [
        "pillar wants raidz2(/dev/sdd, /dev/sde, /dev/sdf2), which the pool does not have",
        "the pool has raidz2(/dev/sdd, /dev/sde, /dev/sdf1), which pillar does not name"]


@pytest.mark.parametrize("settings, problem", [
    ({"pools": []}, "ccc:zfs:pools must be a mapping"),
    ({"pools": {"tank": {"type": "mirror", "disks": ["/dev/sdb"]}}}, "a mirror needs at least 2 disks"),
    ({"pools": {"tank": {"type": "raid5", "disks": ["/dev/sdb"]}}}, "type 'raid5' is not one of"),
    ({"pools": {"tank": {"disks": ["sdb"]}}}, "'sdb' is not an absolute device path"),
    ({"pools": {"tank": {"disks": ["/dev/sdb; zpool destroy x"]}}}, "is not an absolute device path"),
    ({"pools": {"tank": {"disks": ["/dev/../dev/sdb"]}}}, "is not an absolute device path"),
    ({"pools": {"tank": {"disks": []}}}, "disks must be a non-empty list"),
    ({"pools": {"mirror": {"disks": ["/dev/sdb"]}}}, "not a pool name ZFS accepts"),
    ({"pools": {"a": {"disks": ["/dev/sdb"]}, "b": {"disks": ["/dev/sdb"]}}}, "disk /dev/sdb is also in pool a"),
    ({"pools": {"a": {"type": "mirror", "disks": ["/dev/sdb", "/dev/sdb"]}}}, "disk /dev/sdb is named twice"),
    ({"pools": {"a": {"disks": ["/dev/sdb"], "properties": {"atime": "off -f"}}}},
     "properties:atime must be an allowed property value"),
    ({"pools": {"a": {"disks": ["/dev/sdb"], "properties": {"-f": "on"}}}}, "is not a property name"),
    ({"pools": {"a": {"disks": ["/dev/sdb"], "state": "destroyed"}}}, "state must be present or absent"),
    ({"datasets": {"tank/x": {}}}, "its pool tank is not in ccc:zfs:pools"),
    ({"pools": {"tank": {"disks": ["/dev/sdb"]}}, "datasets": {"tank/x": {"mount_point": "nope"}}}, "'nope' is not a key"),
    ({"pools": {"tank": {"disks": ["/dev/sdb"]}}, "datasets": {"tank/v": {"properties": {"volsize": "10G"}}}}, "volumes"),
    ({"module_parameters": {"zfs_arc_min": 8, "zfs_arc_max": 4}}, "zfs_arc_min (8) is above zfs_arc_max (4)"),
    ({"module_parameters": {"arc_max": 4}}, "not a zfs module parameter name"),
    ({"module_parameters": {"zfs_arc_max": "4G"}}, "must be a whole number"),
    ({"module_parameters": None, "pools": {"t": {"disks": ["/dev/sdb"], "pool_properties": []}}}, "must be a mapping"),
])
def test_bad_pillars_are_problems_before_any_command(settings, problem):
    plan = ccc_zfs.plan(settings, SCHEMA, {"hdd_data": "/srv/hdd"})
    assert any(problem in text for text in plan["problems"]), plan["problems"]


def test_absent_pools_and_datasets_are_refused_with_the_manual_command():
    plan = ccc_zfs.plan({"pools": {"tank": {"state": "absent"}, "keep": {"disks": ["/dev/sdb"]}},
                         "datasets": {"keep/old": {"state": "absent"}}}, SCHEMA)
    assert plan["problems"] == [] and list(plan["pools"]) == ["keep"] and plan["datasets"] == {}
    assert plan["refused"] == [
        "ccc:zfs: pool tank is marked state: absent, but ccc-salt never destroys a pool (its data would be lost). "
        "If you really mean it, run by hand: zpool destroy tank and then remove tank from ccc:zfs",
        "ccc:zfs: dataset keep/old is marked state: absent, but ccc-salt never destroys a dataset (its data would be "
        "lost). If you really mean it, run by hand: zfs destroy keep/old and then remove keep/old from ccc:zfs"]


def test_the_create_command_is_never_forced():
    pool = ccc_zfs.plan({"pools": {"tank": {"vdevs": [{"type": "cache", "disks": ["/dev/nvme0n1"]},
                                                      {"type": "raidz", "disks": ["/dev/sdb", "/dev/sdc"]}],
                                            "properties": {"atime": False}, "pool_properties": {"ashift": 12}}}},
                        SCHEMA)["pools"]["tank"]
    assert ccc_zfs.create_argv("tank", pool) == ["zpool", "create", "-o", "ashift=12", "-O", "atime=off", "tank",
                                                 "raidz1", "/dev/sdb", "/dev/sdc", "cache", "/dev/nvme0n1"]


def test_properties_compare_sizes_in_bytes_and_skip_create_only_ones():
    read = {"recordsize": "1048576", "quota": "0", "compression": "lz4", "atime": "on"}
    wanted = {"recordsize": "1M", "quota": "none", "compression": "LZ4", "atime": "off", "ashift": "12"}
    assert ccc_zfs.property_differences(wanted, read) == {"atime": {"old": "on", "new": "off"}}
    assert ccc_zfs.size_bytes("1.5K") == "1536" and ccc_zfs.size_bytes("lots") is None


@pytest.mark.parametrize("code, text, verdict", [
    (2, "", None),
    (0, "DEVNAME=/dev/sdb\nLABEL=old\nTYPE=zfs_member\nUSAGE=filesystem\n", "not blank (LABEL=old, TYPE=zfs_member, USAGE=filesystem)"),
    (0, "DEVNAME=/dev/sdb\nPTTYPE=gpt\n", "not blank (PTTYPE=gpt)"),
    (0, "DEVNAME=/dev/sdb\nSOMETHING=x\n", "not blank (a signature)"),
    (4, "", "could not be probed (blkid exited 4)"),
])
def test_the_disk_probe_verdict(code, text, verdict):
    found = ccc_zfs.probe_verdict("/dev/sdb", code, text)
    assert (found is None) if verdict is None else (verdict in found)


def test_module_parameters_file_and_live_order():
    assert ccc_zfs.modprobe_text({"zfs_arc_min": 4, "zfs_arc_max": 16}) == (
        ccc_zfs.HEADER + "options zfs zfs_arc_max=16\noptions zfs zfs_arc_min=4\n")
    # raising both above the running maximum: the maximum first, else the kernel refuses the minimum
    assert ccc_zfs.live_order({"zfs_arc_min": 8, "zfs_arc_max": 16}, {"zfs_arc_max": "4"}) == ["zfs_arc_max", "zfs_arc_min"]
    assert ccc_zfs.live_order({"zfs_arc_min": 1, "zfs_arc_max": 2}, {"zfs_arc_max": "4"}) == ["zfs_arc_min", "zfs_arc_max"]
