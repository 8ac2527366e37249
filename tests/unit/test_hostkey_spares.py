"""Spare SSH host key sets (``ccc_hostkey_spares``): made ahead in the background after a deploy,
taken by a new stack's first deploy instead of generating, each one by one stack only, with the
stack's comment; and the shared sets of stacks in pillar made before their first deploy."""

import fcntl
import os
import stat
import threading
import time

from cryptography.hazmat.primitives import serialization

import ccc_hostkey_maker
import ccc_hostkey_spares
import ccc_hostkeys


def public_of(private):
    key = serialization.load_ssh_private_key(private, password=None)
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)


def test_spares_are_made_ahead_and_each_is_taken_by_one_stack_with_its_comment(tmp_path):
    root = str(tmp_path / "storage" / "state")
    os.makedirs(os.path.dirname(root))
    made = ccc_hostkey_spares.top_up(root, ["box"], 3, 1024)
    assert made == {"sets": 1, "spares": 3}
    assert ccc_hostkeys.shared_complete(root, "box")  # a stack in pillar has its keys before its first deploy
    assert ccc_hostkey_spares.top_up(root, ["box"], 3, 1024) == {"sets": 0, "spares": 0}
    spare_dir = os.path.join(root, "host-keys-spare")
    assert stat.S_IMODE(os.stat(spare_dir).st_mode) == 0o700
    taken = [ccc_hostkey_spares.take(root, f"new{index}", 1024) for index in range(3)]
    assert ccc_hostkey_spares.take(root, "new3", 1024) is None and ccc_hostkey_spares.count(root, 1024) == 0
    assert len({keys["ssh_host_rsa_key"] for keys in taken}) == 3  # never one set for two stacks
    for index, keys in enumerate(taken):
        assert sorted(keys) == sorted(ccc_hostkeys.key_files())
        for kind in ccc_hostkeys.KEY_TYPES:
            public = keys[f"ssh_host_{kind}_key.pub"]
            assert public.endswith(f" ccc-salt new{index}\n".encode())
            assert public.split()[:2] == public_of(keys[f"ssh_host_{kind}_key"]).split()[:2]
    assert [name for name in os.listdir(spare_dir) if not name.startswith(".top-up")] == []  # nothing left behind
    # a spare of another RSA size is never used
    ccc_hostkey_spares.top_up(root, [], 1, 1024)
    assert ccc_hostkey_spares.take(root, "big", 2048) is None and ccc_hostkey_spares.count(root, 1024) == 1


def test_a_first_deploy_takes_a_spare_and_the_node_copy_is_that_set(tmp_path):
    root, sshd = str(tmp_path / "storage" / "state"), tmp_path / "sshd"
    sshd.mkdir()
    os.makedirs(os.path.dirname(root))
    ccc_hostkey_spares.top_up(root, [], 1, 1024)
    [spare] = [name for name in os.listdir(os.path.join(root, "host-keys-spare")) if not name.startswith(".")]
    with open(os.path.join(root, "host-keys-spare", spare, "ssh_host_ed25519_key"), "rb") as handle:
        private = handle.read()
    with ccc_hostkey_maker.Maker(0, root) as maker:
        assert ccc_hostkeys.ensure(str(sshd), root, "box", 1024, make=maker) is True
    copy = sshd / "stacks" / "box" / "keys"
    assert (copy / "ssh_host_ed25519_key").read_bytes() == private
    assert (copy / "ssh_host_ed25519_key.pub").read_text().endswith(" ccc-salt box\n")
    assert stat.S_IMODE((copy / "ssh_host_rsa_key").stat().st_mode) == 0o600
    assert ccc_hostkey_spares.count(root, 1024) == 0


def test_the_top_up_runs_detached_after_a_deploy_and_never_beside_threads(tmp_path, monkeypatch):
    storage = tmp_path / "storage"
    storage.mkdir()
    cluster = {"state_dir": str(storage / "state"), "host_keys": {"rsa_bits": 1024, "spare_sets": 2},
               "mount_points": {"nfs": {}, "local": {}}}
    assert ccc_hostkey_spares.top_up_later(cluster, ["box"]) is False  # pytest's threads run: no fork
    monkeypatch.setattr(ccc_hostkey_spares.threading, "active_count", lambda: 1)
    started = time.monotonic()
    assert ccc_hostkey_spares.top_up_later(cluster, ["box"]) is True
    assert time.monotonic() - started < 1  # the caller does not wait for the keys
    root = cluster["state_dir"]
    with open(os.path.join(root, "host-keys-spare", ccc_hostkey_spares.LOCK_FILE)) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # held by the background process until it is done
    assert ccc_hostkey_spares.count(root, 1024) == 2 and ccc_hostkeys.shared_complete(root, "box")
    assert ccc_hostkey_spares.top_up_later(cluster, ["box"]) is False  # nothing left to make
    assert ccc_hostkey_spares.top_up_later(dict(cluster, host_keys={"rsa_bits": 1024, "spare_sets": 0}), []) is False
    assert threading.active_count() >= 1
