"""The zfs role's state module driving FAKE zpool/zfs/blkid (``tests/support/fakes/zfs_tools.py``:
this machine has no ZFS, and a real disk must never be at stake in a test). The fakes answer like
the real tools from a JSON state and record every command line, so each test asserts what an admin
reads and exactly which commands ran: pools and datasets are created from blank disks and set to
pillar's properties, a second run changes nothing, and no pillar, layout mismatch or error ever
runs a destroy, a forced create or a re-label."""

import os

import pytest
from salt.exceptions import CommandExecutionError

from support import role_files, site  # noqa: F401  (site puts _utils on the path)
from support.scripts import load_module
from support.zfs_fakes import FakeZfs, forbidden

import ccc_zfs


@pytest.fixture
def fake(tmp_path, monkeypatch):
    tools = FakeZfs(tmp_path / "fake")
    for key, value in tools.env().items():
        monkeypatch.setenv(key, value)
    return tools


def salt(test=False, pillar=None):
    """The execution module and the state module, wired as Salt's loader would."""
    dunder_salt = {}
    execution = load_module("_modules/ccc_zfs.py", "ccc_zfs_module", pillar=pillar or {}, salt=dunder_salt)
    for name in ("tools", "pools", "layout", "identify", "probe", "datasets", "get", "change", "plan"):
        dunder_salt[f"ccc_zfs.{name}"] = getattr(execution, name)
    states = load_module("_states/ccc_zfs.py", "ccc_zfs_state", salt=dunder_salt, opts={"test": test})
    return execution, states


def apply(settings, test=False, local=None):
    """What init.sls does with ``settings`` (pools, then datasets that need their pool):
    ``{state name: return}``; a dataset whose pool failed is not run, as ``require`` does."""
    plan = ccc_zfs.plan(settings, role_files.schema("zfs"), local or {})
    assert plan["problems"] == []
    _, states = salt(test)
    results = {}
    for name, pool in plan["pools"].items():
        results[name] = states.pool_present(name, **pool)
    for name, dataset in plan["datasets"].items():
        if results[dataset["pool"]]["result"] is not False:
            results[name] = states.dataset_present(name, dataset["properties"])
    return results


def mirror_settings(disks):
    return {"pools": {"scratch": {"type": "mirror", "disks": disks, "properties": {"atime": "off", "compression": "lz4"},
                                  "pool_properties": {"ashift": 12, "autotrim": "on"}}},
            "datasets": {"scratch/hdd": {"mount_point": "hdd_data", "properties": {"recordsize": "1M"}},
                         "scratch/ssd": {"mount_point": "ssd_data", "properties": {"recordsize": "128K", "quota": "2T"}}}}


LOCAL = {"hdd_data": "/srv/ccc/local/hdd", "ssd_data": "/srv/ccc/local/ssd"}


def test_a_mirror_pool_and_its_datasets_are_created_from_blank_disks_then_left_alone(fake):
    disks = fake.disks("sdb", "sdc")
    results = apply(mirror_settings(disks), local=LOCAL)
    assert {name: (r["result"], r["comment"]) for name, r in results.items()} == {
        "scratch": (True, f"pool scratch created from mirror({disks[0]}, {disks[1]})"),
        "scratch/hdd": (True, "dataset scratch/hdd created"),
        "scratch/ssd": (True, "dataset scratch/ssd created")}
    assert fake.changing_calls() == [
        ["zpool", "create", "-o", "ashift=12", "-o", "autotrim=on", "-O", "atime=off", "-O", "compression=lz4",
         "scratch", "mirror", *disks],
        ["zfs", "create", "-p", "-o", "recordsize=1M", "-o", "mountpoint=/srv/ccc/local/hdd", "scratch/hdd"],
        ["zfs", "create", "-p", "-o", "recordsize=128K", "-o", "quota=2T", "-o", "mountpoint=/srv/ccc/local/ssd", "scratch/ssd"]]
    # the disks were probed before the create (blank: blkid found nothing)
    assert [argv for argv in fake.calls() if argv[0] == "blkid"] == [["blkid", "-p", "-o", "export", "--", d] for d in disks]
    before = len(fake.calls())
    again = apply(mirror_settings(disks), local=LOCAL)
    assert {name: (r["result"], r["changes"]) for name, r in again.items()} == {
        "scratch": (True, {}), "scratch/hdd": (True, {}), "scratch/ssd": (True, {})}
    assert again["scratch"]["comment"] == f"pool scratch is as defined (mirror({disks[0]}, {disks[1]}), ONLINE)"
    assert fake.changing_calls()[3:] == [] and len(fake.calls()) > before


def test_test_mode_says_what_would_happen_and_changes_nothing(fake):
    disks = fake.disks("sdb", "sdc")
    results = apply(mirror_settings(disks), test=True, local=LOCAL)
    assert results["scratch"]["result"] is None
    assert results["scratch"]["comment"] == f"pool scratch would be created from mirror({disks[0]}, {disks[1]}) (its disks are blank)"
    assert results["scratch/hdd"]["comment"] == "dataset scratch/hdd would be created with its pool scratch"
    assert fake.changing_calls() == [] and fake.read()["pools"] == {}


def test_changed_properties_are_set_and_only_those(fake):
    disks = fake.disks("sdb", "sdc")
    apply(mirror_settings(disks), local=LOCAL)
    settings = mirror_settings(disks)
    settings["pools"]["scratch"]["properties"]["compression"] = "zstd"
    settings["pools"]["scratch"]["pool_properties"]["autotrim"] = "off"
    settings["datasets"]["scratch/ssd"]["properties"]["quota"] = "1T"
    results = apply(settings, local=LOCAL)
    assert results["scratch"]["changes"] == {"properties": {"compression": {"old": "lz4", "new": "zstd"}},
                                             "pool_properties": {"autotrim": {"old": "on", "new": "off"}}}
    assert results["scratch/ssd"]["changes"] == {"properties": {"quota": {"old": str(2 << 40), "new": "1T"}}}
    assert fake.changing_calls()[3:] == [["zfs", "set", "compression=zstd", "scratch"], ["zpool", "set", "autotrim=off", "scratch"],
                                         ["zfs", "set", "quota=1T", "scratch/ssd"]]


def _existing(fake, vdevs, name="scratch"):
    """A pool the node already has (made through the fake zpool, as an admin would)."""
    words = ["create", name]
    for kind, disks in vdevs:
        words += ([kind] if kind != "stripe" else []) + disks
    os.spawnvpe(os.P_WAIT, "zpool", ["zpool"] + words, fake.env())
    assert name in fake.read()["pools"]
    fake.log_file.write_text("")


def _bad_cases():
    """(why, setup(fake, disks) → settings): pillars and node states that must never lead to a
    destroy, forced create or re-label, each failing its state with a message."""
    def mirror_other_disk(fake, d):
        _existing(fake, [("mirror", [d[0], d[1]])])
        return {"pools": {"scratch": {"type": "mirror", "disks": [d[0], d[2]]}}}

    def stripe_wanted_mirror(fake, d):
        _existing(fake, [("stripe", [d[0], d[1]])])
        return {"pools": {"scratch": {"type": "mirror", "disks": [d[0], d[1]]}}}

    def raidz_vs_mirror(fake, d):
        _existing(fake, [("raidz", [d[0], d[1], d[2]])])
        return {"pools": {"scratch": {"type": "mirror", "disks": [d[0], d[1], d[2]]}}}

    def extra_disk(fake, d):
        _existing(fake, [("mirror", [d[0], d[1]])])
        return {"pools": {"scratch": {"type": "mirror", "disks": [d[0], d[1], d[2]]}}}

    def cache_not_in_pillar(fake, d):
        _existing(fake, [("mirror", [d[0], d[1]]), ("cache", [d[2]])])
        return {"pools": {"scratch": {"type": "mirror", "disks": [d[0], d[1]]}}}

    def substring_path(fake, d):
        # the original's substring check: "/dev/sd1" would be "found" in a status naming /dev/sd10
        _existing(fake, [("mirror", [d[0], d[3]])])
        return {"pools": {"scratch": {"type": "mirror", "disks": [d[0], d[3][:-1]]}}}

    def disk_in_other_pool(fake, d):
        _existing(fake, [("stripe", [d[1]])], name="other")
        return {"pools": {"scratch": {"type": "mirror", "disks": [d[0], os.path.realpath(d[1])]}}}

    def disk_with_filesystem(fake, d):
        fake.label(d[1], "ext4")
        return {"pools": {"scratch": {"type": "mirror", "disks": [d[0], d[1]]}}}

    def disk_with_exported_pool_label(fake, d):
        fake.label(d[0], "zfs_member")
        return {"pools": {"scratch": {"type": "stripe", "disks": [d[0]]}}}

    def disk_with_partition_table(fake, d):
        fake.label(d[2], "PTTYPE=gpt")
        return {"pools": {"scratch": {"vdevs": [{"type": "mirror", "disks": [d[0], d[1]]}, {"type": "cache", "disks": [d[2]]}]}}}

    def missing_disk(fake, d):
        return {"pools": {"scratch": {"type": "mirror", "disks": [d[0], "/dev/disk/by-id/ata-not-there"]}}}

    def status_fails(fake, d):
        _existing(fake, [("mirror", [d[0], d[1]])])
        state = fake.read()
        state["fail"] = {"zpool status": "internal error: Invalid argument"}
        fake.write(state)
        return {"pools": {"scratch": {"type": "stripe", "disks": [d[2]]}}}

    def create_fails(fake, d):
        state = fake.read()
        state["fail"] = {"zpool create": "cannot create 'scratch': I/O error"}
        fake.write(state)
        return {"pools": {"scratch": {"type": "mirror", "disks": [d[0], d[1]]}}}

    def degraded_member_gone(fake, d):
        _existing(fake, [("mirror", [d[0], d[1]])])
        state = fake.read()
        state["pools"]["scratch"]["vdevs"][0]["devices"][1] = "1234567890123"
        state["pools"]["scratch"]["health"] = "DEGRADED"
        fake.write(state)
        return {"pools": {"scratch": {"type": "mirror", "disks": [d[0], d[1]]}}}

    return [mirror_other_disk, stripe_wanted_mirror, raidz_vs_mirror, extra_disk, cache_not_in_pillar, substring_path,
            disk_in_other_pool, disk_with_filesystem, disk_with_exported_pool_label, disk_with_partition_table,
            missing_disk, status_fails, create_fails, degraded_member_gone]


@pytest.mark.parametrize("test", [False, True])
@pytest.mark.parametrize("case", _bad_cases(), ids=lambda case: case.__name__)
def test_no_mismatch_or_error_ever_destroys_forces_or_relabels(fake, case, test):
    disks = fake.disks("sda", "sdb", "sdc", "sd10")
    settings = case(fake, disks)
    settings["datasets"] = {"scratch/hdd": {"properties": {"recordsize": "1M"}}}
    pools_before = fake.read()["pools"]
    results = apply(settings, test=test)
    if case.__name__ == "create_fails" and test:  # test mode never runs the create that would fail
        assert results["scratch"]["result"] is None and fake.changing_calls() == []
        return
    assert results["scratch"]["result"] is False, results
    assert "scratch/hdd" not in results  # its pool's state failed: require stops it
    comment = results["scratch"]["comment"]
    assert comment.startswith(("pool scratch does not match", "pool scratch is not created", "pool scratch: "))
    assert [argv for argv in fake.calls() if forbidden(argv)] == []
    if case.__name__ != "create_fails":
        assert fake.changing_calls() == []
    assert {k: v for k, v in fake.read()["pools"].items()} == pools_before


def test_a_mismatch_report_names_both_layouts_and_what_to_do(fake):
    d = fake.disks("sda", "sdb", "sdc")
    _existing(fake, [("mirror", [d[0], d[1]])])
    result = apply({"pools": {"scratch": {"type": "mirror", "disks": [d[0], d[2]]}}})["scratch"]
    real = [os.path.realpath(x) for x in d]
    assert result["comment"] == (
        f"pool scratch does not match ccc:zfs:pools:scratch: pillar wants mirror({real[0]}, {real[2]}), which the pool "
        f"does not have; the pool has mirror({real[0]}, {real[1]}), which pillar does not name; the pool now is "
        f"mirror({d[0]}, {d[1]}). Nothing was changed: ccc-salt never destroys, recreates or re-labels a pool. "
        "Make pillar describe the pool as it is, or rebuild the pool by hand after moving its data")


def test_a_pool_named_by_another_path_to_the_same_disk_matches(fake):
    d = fake.disks("sda", "sdb")
    _existing(fake, [("mirror", [os.path.realpath(d[0]), os.path.realpath(d[1])])])
    result = apply({"pools": {"scratch": {"type": "mirror", "disks": [d[1], d[0]]}}})["scratch"]
    assert (result["result"], result["changes"]) == (True, {})
    assert fake.changing_calls() == []


@pytest.mark.parametrize("argv", [["zpool", "destroy", "scratch"], ["zfs", "destroy", "-r", "scratch/hdd"],
                                  ["zpool", "labelclear", "-f", "/dev/sdb"], ["zpool", "create", "-f", "scratch", "/dev/sdb"],
                                  ["zpool", "create", "-fo", "ashift=12", "scratch", "/dev/sdb"],
                                  ["zfs", "rollback", "scratch/hdd@x"], ["wipefs", "-a", "/dev/sdb"]])
def test_the_change_command_refuses_what_the_role_never_runs(fake, argv):
    execution, _ = salt()
    with pytest.raises(CommandExecutionError, match="the zfs role only creates and sets properties"):
        execution.change(argv)
    assert fake.calls() == []


def test_without_the_tools_test_mode_says_what_waits_for_the_package(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no zpool, zfs or blkid: zfsutils-linux not installed yet
    _, states = salt(test=True)
    result = states.pool_present("scratch", [{"type": "mirror", "disks": ["/dev/sdb", "/dev/sdc"]}])
    assert (result["result"], result["changes"]) == (None, {})
    assert result["comment"].startswith("pool scratch would be created from mirror(/dev/sdb, /dev/sdc) if missing once zfsutils-linux is installed")
    _, states = salt(test=False)
    assert states.dataset_present("scratch/hdd", {})["result"] is False


def test_module_parameters_go_to_the_modprobe_file_and_the_loaded_module(tmp_path):
    conf, live = tmp_path / "modprobe.d" / "zfs.conf", tmp_path / "parameters"
    live.mkdir()
    (live / "zfs_arc_max").write_text("0\n")
    (live / "zfs_arc_min").write_text("0\n")
    _, states = salt()
    wanted = {"zfs_arc_max": 17179869184, "zfs_arc_min": 4294967296}
    result = states.module_parameters(str(conf), wanted, str(live))
    assert result["result"] is True
    assert result["changes"] == {"file": "written", "live": {"zfs_arc_max": {"old": "0", "new": "17179869184"},
                                                             "zfs_arc_min": {"old": "0", "new": "4294967296"}}}
    assert conf.read_text().splitlines()[1:] == ["options zfs zfs_arc_max=17179869184", "options zfs zfs_arc_min=4294967296"]
    assert oct(conf.stat().st_mode & 0o777) == "0o644" and (live / "zfs_arc_min").read_text() == "4294967296"
    assert states.module_parameters(str(conf), wanted, str(live))["changes"] == {}
    assert states.module_parameters(str(conf), {"zfs_arc_nope": 1}, str(live))["comment"] == (
        f"the loaded zfs module has no parameter zfs_arc_nope ({live}); nothing was changed")
    # without parameters the file of ours goes; a file someone else wrote stays
    assert states.module_parameters(str(conf), {}, str(live))["changes"] == {"file": "removed"} and not conf.exists()
    conf.write_text("options zfs zfs_arc_max=1\n")
    assert states.module_parameters(str(conf), {}, str(live))["changes"] == {}
    assert states.modprobe_absent(str(conf))["changes"] == {} and conf.exists()
