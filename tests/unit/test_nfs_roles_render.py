"""The nfs_storage and cachefilesd roles rendered and run with ``test=True`` for every sample node,
masterless on this machine (nothing is applied, no server is contacted): what an admin sees from
``salt nodeN state.apply cluster test=True``, and the refusals of a broken pillar."""

import pytest

from support import site

ROLES = "cachefilesd,nfs_storage"
NODES = ("node1", "node2", "node3")


def _apply(root, node, extra=None):
    extra = site.deep_merge({"only_roles": ROLES}, extra or {})
    salt_node = site.SaltNode(root / "work", node, "unix:///nonexistent.sock", root / "storage", extra_ccc=extra)
    output, _ = salt_node.salt_call("state.apply", "cluster", "test=True", check=False)
    assert isinstance(output, dict), output
    return {key.split("_|-")[1]: value for key, value in output.items()}


@pytest.mark.parametrize("node", NODES)
def test_sample_nodes_render_both_roles_and_nothing_fails(tmp_path, node):
    states = _apply(tmp_path, node)
    assert {k: v["comment"] for k, v in states.items() if v["result"] is False} == {}
    assert states["ccc-cluster-roles-summary"]["name"].startswith("cluster roles applied: cachefilesd, nfs_storage;")
    mount = states["ccc-cluster-nfs_storage-mount-user_data"]
    assert mount["result"] is None
    users = tmp_path / "storage" / "shared" / "user_data"  # SaltNode's stand-in for the sample's mount point
    assert mount["changes"]["fstab"]["new"] == f"nas.example.org:/export/ccc/user_data {users} nfs auto,async,fsc 0 0"
    assert mount["comment"] == f"{users}: would be mounted from nas.example.org:/export/ccc/user_data (if the server answers)"
    apps = states["ccc-cluster-nfs_storage-mount-apps_data"]["changes"]["fstab"]["new"]
    assert apps.endswith(" nfs auto,ro,async,fsc 0 0")
    conf = states["ccc-cluster-cachefilesd-conf"]
    assert conf["result"] is None and conf["changes"], conf
    # this machine has no cachefiles module: test mode says so without failing the run (a real run fails)
    kernel = states["ccc-cluster-cachefilesd-kernel"]
    assert kernel["result"] is True and kernel["changes"] == {}
    assert "not started: this node's kernel has no cachefiles support" in kernel["comment"]


def test_broken_pillar_is_refused_before_anything_is_written(tmp_path):
    states = _apply(tmp_path, "node1", {"nfs_storage": {"mounts": {"user_data": "nas-without-export"}},
                                        "cachefilesd": {"bcull": 12}})
    assert states["ccc-cluster-nfs_storage-settings"]["result"] is False
    assert states["ccc-cluster-nfs_storage-settings"]["comment"] == (
        "ccc:nfs_storage is not valid, nothing changed: ccc:nfs_storage:mounts:user_data:source must be "
        "server:/export, got 'nas-without-export'")
    assert states["ccc-cluster-cachefilesd-settings"]["comment"] == (
        "ccc:cachefilesd is not valid, nothing changed: ccc:cachefilesd: brun > bcull > bstop is required, "
        "got 10% > 12% > 3%")
    assert not any(key.startswith(("ccc-cluster-nfs_storage-mount", "ccc-cluster-cachefilesd-conf")) for key in states)


def test_cachefilesd_kept_stopped_is_configured_stopped_and_disabled_without_failing(tmp_path):
    states = _apply(tmp_path, "node1", {"cachefilesd": {"state": "stopped"}})
    assert {k: v["comment"] for k, v in states.items() if v["result"] is False} == {}
    assert "ccc-cluster-cachefilesd-kernel" not in states  # a stopped daemon needs no kernel module
    service = states["ccc-cluster-cachefilesd-service"]
    assert service["name"] == "cachefilesd" and service["result"] in (None, True)
    assert states["ccc-cluster-cachefilesd-conf"]["changes"]


def test_a_cachefilesd_state_other_than_started_or_stopped_is_refused(tmp_path):
    states = _apply(tmp_path, "node1", {"cachefilesd": {"state": "off"}})
    assert states["ccc-cluster-cachefilesd-settings"]["comment"] == (
        "ccc:cachefilesd is not valid, nothing changed: ccc:cachefilesd:state must be started or stopped, got 'off'")
