"""Host key rotation, propagation and backups (``_utils/ccc_hostkeys.py``,
``_utils/ccc_hostkey_backup.py``): a rotated shared set reaches the node copy by content, file by
file; the old set is kept; a node copy survives an unreachable share; backups are written only
when the sets changed and pruned to ``keep``."""

import os
import stat
import subprocess
import tarfile
import time

import pytest

from support import site  # noqa: F401  (puts _utils on sys.path)
from support.mountns import in_private_namespace

import ccc_hostkey_backup
import ccc_hostkeys


@pytest.fixture
def roots(tmp_path):
    sshd, state = tmp_path / "sshd", tmp_path / "user_data" / ".ccc-salt"
    sshd.mkdir()
    (tmp_path / "user_data").mkdir()
    return sshd, state


def node_key(sshd, stack="box"):
    return (sshd / "stacks" / stack / "keys" / "ssh_host_ed25519_key").read_bytes()


def test_rotation_reaches_the_node_copy_and_keeps_the_old_set(roots):
    sshd, state = roots
    assert ccc_hostkeys.ensure(str(sshd), str(state), "box", rsa_bits=1024)
    before = node_key(sshd)
    shared = state / "host-keys" / "box"
    old_prints = ccc_hostkeys.fingerprints(str(shared))
    result = ccc_hostkeys.rotate(str(state), "box", rsa_bits=1024)
    assert result["current"] == str(shared)
    new_prints = ccc_hostkeys.fingerprints(str(shared))
    assert all(new_prints[kind] != old_prints[kind] for kind in ccc_hostkeys.KEY_TYPES)
    # The old set is kept whole, root-only, next to (not inside) the live sets.
    retired = result["retired"]
    assert os.path.dirname(retired) == str(state / "host-keys-retired")
    assert ccc_hostkeys.fingerprints(retired) == old_prints
    assert stat.S_IMODE(os.stat(state / "host-keys-retired").st_mode) == 0o700
    assert sorted(os.listdir(state / "host-keys")) == ["box"]  # no temporary folder left
    # The node still serves the old key until the next deploy copies the new one.
    assert node_key(sshd) == before
    assert ccc_hostkeys.outdated(str(sshd), str(state)) == ["box"]
    assert ccc_hostkeys.ensure(str(sshd), str(state), "box")
    assert node_key(sshd) == (shared / "ssh_host_ed25519_key").read_bytes() != before
    assert stat.S_IMODE(os.stat(sshd / "stacks" / "box" / "keys" / "ssh_host_ed25519_key").st_mode) == 0o600
    assert not ccc_hostkeys.ensure(str(sshd), str(state), "box")  # current: nothing copied
    assert ccc_hostkeys.outdated(str(sshd), str(state)) == []


def test_a_changed_file_is_replaced_alone(roots):
    sshd, state = roots
    ccc_hostkeys.ensure(str(sshd), str(state), "box", rsa_bits=1024)
    keys = sshd / "stacks" / "box" / "keys"
    inode_rsa = os.stat(keys / "ssh_host_rsa_key").st_ino
    (keys / "ssh_host_ed25519_key").write_bytes(b"tampered")
    assert ccc_hostkeys.ensure(str(sshd), str(state), "box")
    assert node_key(sshd) == (state / "host-keys" / "box" / "ssh_host_ed25519_key").read_bytes()
    assert os.stat(keys / "ssh_host_rsa_key").st_ino == inode_rsa


def test_node_copy_is_kept_while_the_share_is_away(roots, tmp_path):
    sshd, state = roots
    ccc_hostkeys.ensure(str(sshd), str(state), "box", rsa_bits=1024)
    before = node_key(sshd)
    gone = tmp_path / "gone" / ".ccc-salt"
    assert not ccc_hostkeys.ensure(str(sshd), str(gone), "box")
    # A share that lost its sets never makes the node swap in a fresh identity.
    os.rename(state / "host-keys", tmp_path / "moved")
    assert not ccc_hostkeys.ensure(str(sshd), str(state), "box")
    assert node_key(sshd) == before and not (state / "host-keys" / "box").exists()


def test_rotation_needs_the_storage(tmp_path):
    with pytest.raises(FileNotFoundError):
        ccc_hostkeys.rotate(str(tmp_path / "gone" / ".ccc-salt"), "box")


def test_fingerprints_match_ssh_keygen(roots):
    sshd, state = roots
    ccc_hostkeys.ensure(str(sshd), str(state), "box", rsa_bits=1024)
    pub = state / "host-keys" / "box" / "ssh_host_ed25519_key.pub"
    shown = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", str(pub)], capture_output=True, text=True, check=True)
    assert ccc_hostkeys.fingerprints(str(pub.parent))["ed25519"] == shown.stdout.split()[1]


def test_backups_only_when_the_sets_changed_and_pruned(roots, tmp_path, monkeypatch):
    sshd, state = roots
    source, backups = state / "host-keys", tmp_path / "backups"
    ccc_hostkeys.ensure(str(sshd), str(state), "box", rsa_bits=1024)
    (source / ".other.tmp-0000").mkdir()  # a set being generated is never backed up
    steps = ccc_hostkey_backup.plan(str(source), str(backups), keep=2)
    assert steps["sets"] == 1 and steps["write"] and steps["prune"] == []
    ccc_hostkey_backup.apply(steps, str(backups))
    first = backups / steps["write"]
    assert stat.S_IMODE(os.stat(backups).st_mode) == 0o700 and stat.S_IMODE(os.stat(first).st_mode) == 0o600
    with tarfile.open(first) as tar:
        assert sorted(tar.getnames()) == sorted(f"box/{name}" for name in ccc_hostkeys.key_files())
        assert tar.extractfile("box/ssh_host_ed25519_key").read() == (source / "box" / "ssh_host_ed25519_key").read_bytes()
    assert ccc_hostkey_backup.plan(str(source), str(backups), keep=2)["write"] is None  # unchanged: nothing
    names = [first.name]
    real_gmtime = time.gmtime
    for second in (0, 1):  # later, distinct times (a real run is at least seconds apart)
        monkeypatch.setattr(ccc_hostkey_backup.time, "gmtime", lambda *_, s=second: real_gmtime(4e9 + s))
        ccc_hostkeys.rotate(str(state), "box", rsa_bits=1024)
        steps = ccc_hostkey_backup.plan(str(source), str(backups), keep=2)
        ccc_hostkey_backup.apply(steps, str(backups))
        names.append(steps["write"])
    assert sorted(os.listdir(backups)) == sorted(names[1:])  # the oldest went
    with pytest.raises(ValueError):
        ccc_hostkey_backup.plan(str(source), str(backups), keep=0)


def _cluster(tmp_path, **host_keys):
    shared = tmp_path / "shared"
    return {"mount_points": {"nfs": {"user_data": str(shared / "user_data"), "group_data": str(shared / "group_data")},
                             "local": {"sshd_data": str(tmp_path / "sshd")}},
            "admin_log_dir": "/var/log/ccc-salt", "state_dir": str(shared / "user_data" / ".ccc-salt"),
            "host_keys": host_keys}


def test_the_store_is_the_state_dir_unless_the_admin_set_one_no_container_mounts(tmp_path):
    cluster = _cluster(tmp_path)
    state_dir = str(tmp_path / "shared" / "user_data" / ".ccc-salt")
    assert ccc_hostkeys.store(cluster) == {"root": state_dir, "legacy": state_dir}
    assert ccc_hostkeys.store(_cluster(tmp_path, store_dir="/srv/keys")) == {"root": "/srv/keys", "legacy": state_dir}
    for bad in (str(tmp_path / "shared" / "user_data" / "keys"), str(tmp_path / "sshd" / "keys"),
                "/var/log/ccc-salt/keys", str(tmp_path), "relative/keys"):
        with pytest.raises(ValueError):
            ccc_hostkeys.store(_cluster(tmp_path, store_dir=bad))


def test_sets_in_the_state_dir_move_into_a_store_the_admin_set_unchanged(tmp_path):
    """An admin who set ``host_keys:store_dir`` gets the sets and retired sets kept in the state
    dir moved there with the same keys; the node copy stays the same."""
    (tmp_path / "shared" / "user_data").mkdir(parents=True)
    sshd = tmp_path / "sshd"
    sshd.mkdir()
    store = tmp_path / "shared" / "keys"
    cluster = _cluster(tmp_path, store_dir=str(store))
    legacy = cluster["state_dir"]
    ccc_hostkeys.ensure(str(sshd), ccc_hostkeys.store(_cluster(tmp_path)), "box", rsa_bits=1024)  # the default store
    ccc_hostkeys.rotate(legacy, "box", rsa_bits=1024)
    old_prints = ccc_hostkeys.fingerprints(os.path.join(legacy, "host-keys", "box"))
    ccc_hostkeys.ensure(str(sshd), legacy, "box")
    before = node_key(sshd)
    where = ccc_hostkeys.store(cluster)
    assert not ccc_hostkeys.ensure(str(sshd), where, "box")  # moved, nothing to copy: same keys
    assert ccc_hostkeys.fingerprints(str(store / "host-keys" / "box")) == old_prints and node_key(sshd) == before
    assert len(os.listdir(store / "host-keys-retired")) == 1
    assert not os.path.exists(os.path.join(legacy, "host-keys")) and not os.path.exists(os.path.join(legacy, "host-keys-retired"))
    for folder in (store, store / "host-keys", store / "host-keys" / "box", store / "host-keys-retired"):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700 and os.stat(folder).st_uid == 0
    assert stat.S_IMODE(os.stat(store / "host-keys" / "box" / "ssh_host_rsa_key").st_mode) == 0o600
    assert ccc_hostkeys.migrate(where) == []  # once


def test_the_default_store_works_when_user_data_is_its_own_mount(tmp_path):
    """One NFS export per folder: the user-data root is a file system of its own (a tmpfs here,
    in a private mount namespace). The default store is on it, so a key set generated by one
    node is the one a second node copies: keys follow moves, with no setting."""
    user_data = tmp_path / "shared" / "user_data"
    user_data.mkdir(parents=True)
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs")

    def body():
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(user_data)], check=True)
        assert os.stat(user_data).st_dev != os.stat(user_data.parent).st_dev
        node1, node2 = tmp_path / "sshd-node1", tmp_path / "sshd-node2"
        node1.mkdir()
        node2.mkdir()
        where = ccc_hostkeys.store(_cluster(tmp_path))
        assert ccc_hostkeys.ensure(str(node1), where, "box", rsa_bits=1024)
        shared = user_data / ".ccc-salt" / "host-keys" / "box"
        assert os.stat(shared).st_dev == os.stat(user_data).st_dev  # on the share, not the node's disk
        assert stat.S_IMODE(os.stat(user_data / ".ccc-salt" / "host-keys").st_mode) == 0o700
        assert ccc_hostkeys.ensure(str(node2), where, "box")
        assert node_key(node2) == node_key(node1) == (shared / "ssh_host_ed25519_key").read_bytes()

    in_private_namespace(body)
