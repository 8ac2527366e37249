"""The zfs role through salt-call (masterless, ``test=True`` only: a real apply on this machine
would install packages), for sample node1: once before zfsutils-linux is there (no zpool on
PATH: the states say what waits for the package), once with the FAKE zpool/zfs/blkid of
``tests/support/fakes/zfs_tools.py`` on PATH holding node1's pool as it is (nothing to do) and
with another disk (reported, nothing run but reads and probes). No Docker engine is used."""

import os
import shutil

import pytest

from support import site
from support.zfs_fakes import FakeZfs, forbidden

ONLY_ZFS = {"only_roles": "zfs"}


@pytest.fixture(scope="module")
def node1(tmp_path_factory):
    root = tmp_path_factory.mktemp("zfs-render")
    return site.SaltNode(root / "work", "node1", "unix:///nonexistent/ccc-zfs-render.sock", root / "storage",
                         extra_ccc=ONLY_ZFS)


def _states(node, env):
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        output, _ = node.salt_call("state.apply", "cluster", "test=True", check=False)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert isinstance(output, dict), output
    return {state["__id__"]: state for state in output.values()}


def _path_without_zfs_tools():
    return ":".join(p for p in os.environ["PATH"].split(":") if not any(
        os.path.exists(os.path.join(p, tool)) for tool in ("zpool", "zfs")))


def test_node1_in_test_mode_before_the_zfs_tools_are_installed(node1):
    assert shutil.which("zpool", path=_path_without_zfs_tools()) is None
    states = _states(node1, dict(os.environ, PATH=_path_without_zfs_tools()))
    assert [s["comment"] for s in states.values() if s["result"] is False] == []
    assert set(states) >= {"ccc-cluster-zfs-packages", "ccc-cluster-zfs-module-parameters", "ccc-cluster-zfs-pool-scratch",
                           "ccc-cluster-zfs-dataset-scratch/hdd", "ccc-cluster-zfs-dataset-scratch/ssd",
                           "ccc-cluster-zfs-dataset-scratch/nfs-cache"}
    assert states["ccc-cluster-zfs-pool-scratch"]["comment"].startswith(
        "pool scratch would be created from mirror(/dev/disk/by-id/ata-SAMPLE_DISK_A, /dev/disk/by-id/ata-SAMPLE_DISK_B) "
        "if missing once zfsutils-linux is installed")


def test_node1_with_its_pool_in_place_and_with_a_pool_of_other_disks(node1, tmp_path):
    fake = FakeZfs(tmp_path)
    links = fake.disks("SAMPLE_DISK_A", "SAMPLE_DISK_B", "OTHER")
    # node1's pool as pillar describes it, made by the fake zpool, its datasets with pillar's values
    storage = site.storage_overrides(node1.storage_root)["mount_points"]["local"]
    state = fake.read()
    state["pools"]["scratch"] = {"health": "ONLINE", "props": {"ashift": "12", "autotrim": "on"},
                                 "vdevs": [{"section": "data", "type": "mirror", "devices": links[:2]}]}
    state["datasets"] = {
        "scratch": {"atime": "off", "compression": "lz4", "xattr": "sa", "mountpoint": "none"},
        "scratch/hdd": {"recordsize": "1048576", "logbias": "throughput", "mountpoint": storage["hdd_data"]},
        "scratch/ssd": {"recordsize": "131072", "quota": str(2 << 40), "mountpoint": storage["ssd_data"]},
        "scratch/nfs-cache": {"recordsize": "4096", "quota": str(500 << 30), "mountpoint": "/data/nfs-cache"}}
    fake.write(state)
    zfs = {"pools": {"scratch": {"disks": links[:2]}}}
    node1.write_pillar(dict(ONLY_ZFS, zfs=zfs))
    states = _states(node1, fake.env())
    zfs_states = {k: v for k, v in states.items() if k.startswith("ccc-cluster-zfs-") and k != "ccc-cluster-zfs-packages"}
    assert {k: (v["result"], v["changes"]) for k, v in zfs_states.items() if k != "ccc-cluster-zfs-module-parameters"} == {
        "ccc-cluster-zfs-pool-scratch": (True, {}), "ccc-cluster-zfs-dataset-scratch/hdd": (True, {}),
        "ccc-cluster-zfs-dataset-scratch/ssd": (True, {}), "ccc-cluster-zfs-dataset-scratch/nfs-cache": (True, {})}
    # the same pool, pillar naming another disk: reported, its datasets not touched, only reads ran
    node1.write_pillar(dict(ONLY_ZFS, zfs={"pools": {"scratch": {"disks": [links[0], links[2]]}}}))
    states = _states(node1, fake.env())
    assert states["ccc-cluster-zfs-pool-scratch"]["result"] is False
    assert "pool scratch does not match ccc:zfs:pools:scratch" in states["ccc-cluster-zfs-pool-scratch"]["comment"]
    assert states["ccc-cluster-zfs-dataset-scratch/hdd"]["result"] is False  # One or more requisite failed
    assert fake.changing_calls() == [] and [argv for argv in fake.calls() if forbidden(argv)] == []
    node1.write_pillar(ONLY_ZFS)
