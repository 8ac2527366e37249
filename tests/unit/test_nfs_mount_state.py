"""``ccc_nfs.mounted`` (the nfs_storage role's one mount) as an admin reads it: mounted, already
there, remounted for a missing option, a server that does not answer (never mounted), a foreign
file system at the mount point (never unmounted), test mode. The node side is a fake
``__salt__`` holding a mount table; ``ccc_nfs.mount`` and ``fstab_set`` of the real execution
module run against a recording FAKE ``mount`` on PATH and a temporary fstab."""

import os
import pathlib
import stat

import pytest
from salt.exceptions import CommandExecutionError

from support.scripts import load_module

SOURCE = "nas.lab:/export/users"
PATH = "/data/shared/user_data"
NFS = {"mount_point": PATH, "fstype": "nfs4", "source": SOURCE, "options": ["rw", "vers=4.2", "fsc"]}


def state(table, probe=None, test=False, fail_mount=None):
    calls = []

    def mount(path, source, fstype, options, remount=False):
        calls.append(("mount", path, source, fstype, options, remount))
        if fail_mount:
            raise CommandExecutionError(fail_mount)
        table["now"] = dict(NFS, options=NFS["options"] + [o for o in options if o == "ro"]) if remount or fail_mount is None else None

    salt = {"ccc_nfs.fstab_set": lambda *a, **k: calls.append(("fstab", k["test"])) or {},
            "ccc_nfs.active": lambda path: table.get("now"),
            "ccc_nfs.probe": lambda server, timeout: calls.append(("probe", server, timeout)) or probe,
            "ccc_nfs.mount": mount}
    module = load_module("_states/ccc_nfs.py", "ccc_nfs_state", salt=salt, opts={"test": test})
    return module, calls


def test_mounts_after_the_server_answers():
    module, calls = state({})
    ret = module.mounted(PATH, SOURCE, "nfs", ["auto", "fsc"], timeout=5)
    assert (ret["result"], ret["comment"], ret["changes"]) == (True, f"{PATH}: mounted from {SOURCE}",
                                                                {"mount": f"mounted from {SOURCE}"})
    assert calls == [("fstab", False), ("probe", "nas.lab", 5), ("mount", PATH, SOURCE, "nfs", ["auto", "fsc"], False)]


def test_already_mounted_is_left_alone():
    module, calls = state({"now": NFS})
    ret = module.mounted(PATH, SOURCE, "nfs", ["auto", "async", "fsc"])
    assert (ret["result"], ret["changes"], ret["comment"]) == (True, {}, f"{PATH}: {SOURCE} is mounted")
    assert [c[0] for c in calls] == ["fstab"]


def test_changed_options_remount():
    module, calls = state({"now": NFS})
    ret = module.mounted(PATH, SOURCE, "nfs", ["auto", "ro", "fsc"])
    assert (ret["result"], ret["comment"]) == (True, f"{PATH}: remounted for ro")
    assert calls[-1] == ("mount", PATH, SOURCE, "nfs", ["auto", "ro", "fsc"], True)


def test_dead_server_is_a_failure_and_nothing_is_mounted():
    module, calls = state({}, probe="NFS server nas.lab does not answer on port 2049 within 10 s")
    ret = module.mounted(PATH, SOURCE)
    assert ret["result"] is False
    assert ret["comment"] == f"{PATH}: not mounted: NFS server nas.lab does not answer on port 2049 within 10 s"
    assert "mount" not in [c[0] for c in calls]


def test_the_mounts_own_error_is_reported():
    module, _ = state({}, fail_mount="mount -t nfs ... failed (exit 32): mount.nfs: access denied by server")
    ret = module.mounted(PATH, SOURCE)
    assert (ret["result"], ret["comment"]) == (False, f"{PATH}: not mounted: mount -t nfs ... failed (exit 32): "
                                                      "mount.nfs: access denied by server")


def test_a_foreign_filesystem_at_the_mount_point_is_never_unmounted():
    module, calls = state({"now": {"mount_point": PATH, "fstype": "ext4", "source": "/dev/sdb1", "options": ["rw"]}})
    ret = module.mounted(PATH, SOURCE)
    assert ret["result"] is False
    assert ret["comment"] == f"{PATH}: a ext4 file system (/dev/sdb1) is mounted there, not {SOURCE}; unmount it first"
    assert [c[0] for c in calls] == ["fstab"]


def test_test_mode_predicts_and_touches_nothing():
    module, calls = state({}, test=True)
    ret = module.mounted(PATH, SOURCE)
    assert (ret["result"], ret["changes"]) == (None, {"mount": f"would be mounted from {SOURCE}"})
    assert ret["comment"] == f"{PATH}: would be mounted from {SOURCE} (if the server answers)"
    assert [c[0] for c in calls] == ["fstab"] and calls[0] == ("fstab", True)


@pytest.fixture
def execution(tmp_path, monkeypatch):
    """The real execution module; FAKE ``mount``: records its arguments, fails for /fail."""
    fake = tmp_path / "bin" / "mount"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/mount.log\n'
                    'case "$*" in *fail*) echo "mount.nfs: Connection refused" >&2; exit 32;; esac\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    module = load_module("_modules/ccc_nfs.py", "ccc_nfs_module")
    monkeypatch.setattr(module, "FSTAB", str(tmp_path / "fstab"))
    return module, tmp_path


def test_execution_module_mount_fstab_and_errors(execution):
    module, tmp = execution
    point = tmp / "mnt" / "users"
    assert module.mount(str(point), SOURCE, "nfs", ["auto", "fsc"]) is True
    assert point.is_dir() and not any(point.iterdir())  # only the empty mount point
    module.mount(str(point), SOURCE, "nfs", ["ro"], remount=True)
    assert (tmp / "mount.log").read_text().splitlines() == [f"-t nfs -o auto,fsc {SOURCE} {point}", f"-o remount,ro {point}"]
    with pytest.raises(CommandExecutionError, match="failed \\(exit 32\\): mount.nfs: Connection refused"):
        module.mount(str(tmp / "fail"), SOURCE, "nfs", ["auto"])
    (tmp / "fstab").write_text("UUID=x / ext4 defaults 0 1\n")
    assert module.fstab_set(PATH, SOURCE, "nfs", ["auto"], test=True)["new"] == f"{SOURCE} {PATH} nfs auto 0 0"
    assert (tmp / "fstab").read_text() == "UUID=x / ext4 defaults 0 1\n"
    assert module.fstab_set(PATH, SOURCE, "nfs", ["auto"]) == {"old": [], "new": f"{SOURCE} {PATH} nfs auto 0 0"}
    assert module.fstab_set(PATH, SOURCE, "nfs", ["auto"]) == {}
    assert pathlib.Path(tmp / "fstab").read_text() == f"UUID=x / ext4 defaults 0 1\n{SOURCE} {PATH} nfs auto 0 0\n"


def test_probe_of_a_closed_port_says_why(execution):
    module, _ = execution
    assert module.probe("127.0.0.1", timeout=2).startswith("NFS server 127.0.0.1 cannot be reached on port 2049")
