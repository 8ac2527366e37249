"""Root touching user paths (ccc_safefs, ccc_userdirs, ccc_pins, ccc_hostkeys) on a real file
system, with the user's swap injected at the exact step between two of root's system calls.
Mount tests need root (as CI runs them)."""

import os
import pathlib
import stat

import inotify_simple
import pytest

import ccc_hostkeys
import ccc_mountfd
import ccc_pins
import ccc_private_groups
import ccc_safefs
import ccc_userdirs
from support.mountns import umount

NEEDS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="mounts and chown need root")
OWNER = (1000, 1000)


@pytest.fixture
def roots(tmp_path):
    """A storage root with a user's folder, a host folder outside it, and a pin tree."""
    user_data = tmp_path / "user_data"
    (user_data / "a@b.org" / "home").mkdir(parents=True)
    (user_data / "a@b.org" / "home" / "mine.txt").write_text("user data\n")
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret").write_text("host only\n")
    yield {"user_data": user_data, "host": host, "binds": tmp_path / "binds", "tmp": tmp_path}
    points = [p for p in ccc_mountfd.mount_points() if p.startswith(str(tmp_path) + "/")]
    for point in sorted(points, key=len, reverse=True):
        umount(point)


def entry(roots, *parts, mode=0o755):
    return {"root": str(roots["user_data"]), "parts": list(parts), "owner": OWNER, "mode": mode}


@NEEDS_ROOT
def test_new_folder_gets_owner_and_mode_through_its_descriptor(roots):
    created = ccc_userdirs.ensure_directories([entry(roots, "a@b.org", "box", mode=0o750)])
    info = os.stat(roots["user_data"] / "a@b.org" / "box")
    assert created == [str(roots["user_data"] / "a@b.org" / "box")]
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (1000, 1000, 0o750)


@NEEDS_ROOT
def test_swap_between_mkdir_and_chown_never_chowns_a_host_file(roots, monkeypatch):
    """The user replaces the folder root just made by a symlink to a host file before root
    opens it: the old code chowned the host file to the user."""
    victim = roots["host"] / "secret"
    original = ccc_safefs.open_dir_at

    def swap_then_open(dir_fd, name, label=None):
        if name != "box":
            return original(dir_fd, name, label)
        os.rmdir(name, dir_fd=dir_fd)
        os.symlink(str(victim), name, dir_fd=dir_fd)
        return original(dir_fd, name, label)

    monkeypatch.setattr(ccc_safefs, "open_dir_at", swap_then_open)
    with pytest.raises(ccc_safefs.UnsafePath, match="symbolic link or not a folder"):
        ccc_userdirs.ensure_directories([entry(roots, "a@b.org", "box")])
    assert (os.stat(victim).st_uid, stat.S_IMODE(os.stat(victim).st_mode)) == (0, 0o644)


@NEEDS_ROOT
def test_symlinked_component_is_refused_and_nothing_created_behind_it(roots):
    os.symlink(str(roots["host"]), roots["user_data"] / "a@b.org" / "linked")
    with pytest.raises(ccc_safefs.UnsafePath):
        ccc_userdirs.ensure_directories([entry(roots, "a@b.org", "linked", "inner")])
    assert sorted(os.listdir(roots["host"])) == ["secret"]


def test_missing_storage_root_is_never_created(roots):
    missing = {"root": str(roots["tmp"] / "not-mounted"), "parts": ["a@b.org"], "owner": OWNER, "mode": 0o755}
    with pytest.raises(FileNotFoundError, match="storage not mounted"):
        ccc_userdirs.ensure_directories([missing])
    assert not (roots["tmp"] / "not-mounted").exists()


@pytest.mark.parametrize("plant", ["fifo", "chardev", "symlink", "directory"])
def test_reads_open_only_regular_files(roots, plant):
    """A device node is never opened (inotify sees no IN_OPEN: O_PATH does not open it), a FIFO
    never blocks, a symlink is never followed."""
    folder = roots["user_data"] / "a@b.org"
    target = folder / "box.deploy"
    if plant == "fifo":
        os.mkfifo(target)
    elif plant == "chardev":
        if os.geteuid() != 0:
            pytest.skip("mknod needs root")
        os.mknod(target, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    elif plant == "symlink":
        os.symlink(str(roots["host"] / "secret"), target)
    else:
        target.mkdir()
    watch = inotify_simple.INotify()
    watch.add_watch(str(folder), inotify_simple.flags.OPEN)
    fd = ccc_safefs.walk(str(roots["user_data"]), ["a@b.org"])
    try:
        with pytest.raises(ccc_safefs.UnsafePath):
            ccc_safefs.read_regular_at(fd, "box.deploy", 1024)
    finally:
        os.close(fd)
    assert [e.name for e in watch.read(timeout=50) if e.name == "box.deploy"] == []


@NEEDS_ROOT
def test_report_replaces_a_planted_device_without_opening_it(roots):
    folder = roots["user_data"] / "a@b.org"
    os.mknod(folder / "box.deploy", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    watch = inotify_simple.INotify()
    watch.add_watch(str(folder), inotify_simple.flags.OPEN)
    spot = {"root": str(roots["user_data"]), "parts": ["a@b.org"]}
    assert ccc_userdirs.write_report(spot, "box.deploy", "report\n", OWNER, unchanged=lambda old: False)
    assert [e.name for e in watch.read(timeout=50) if e.name == "box.deploy"] == []
    info = os.lstat(folder / "box.deploy")
    assert stat.S_ISREG(info.st_mode) and (info.st_uid, (folder / "box.deploy").read_text()) == (1000, "report\n")


def test_purge_removes_a_planted_symlink_not_its_target(roots):
    os.symlink(str(roots["host"]), roots["user_data"] / "a@b.org" / "box")
    removed = ccc_userdirs.remove(ccc_userdirs.existing([entry(roots, "a@b.org", "box")]))
    assert removed == [str(roots["user_data"] / "a@b.org" / "box")]
    assert (roots["host"] / "secret").exists()


def test_purge_of_a_similar_email_stays_in_its_own_folder(roots):
    """``a@b.org`` must never reach into ``a@b.org.uk`` (the old containment check had no
    separator): each entry is walked from the root, component by component."""
    other = roots["user_data"] / "a@b.org.uk" / "box"
    other.mkdir(parents=True)
    ccc_userdirs.remove(ccc_userdirs.existing([entry(roots, "a@b.org", "box")]))
    assert other.exists()


def pins_for(roots):
    return [{"name": "home", "root": str(roots["user_data"]), "parts": ["a@b.org", "home"]}]


@NEEDS_ROOT
def test_pin_holds_the_checked_folder_whatever_the_user_swaps_later(roots):
    pins = pins_for(roots)
    set_id, identity = ccc_pins.identify(pins)
    ccc_pins.ensure(str(roots["binds"]), "box", pins, set_id, identity)
    pin = pathlib.Path(ccc_pins.set_dir(str(roots["binds"]), "box", set_id)) / "home"
    home = roots["user_data"] / "a@b.org" / "home"
    home.rename(home.with_name("home.aside"))
    os.symlink("/", home)
    assert sorted(os.listdir(pin)) == ["mine.txt"]
    # The next check sees the symlink and refuses; the set id of a replaced folder differs.
    with pytest.raises(ccc_safefs.UnsafePath):
        ccc_pins.identify(pins)
    home.unlink()
    home.mkdir()
    assert ccc_pins.identify(pins)[0] != set_id


@NEEDS_ROOT
def test_a_containers_pins_are_checked_against_one_read_of_the_mount_table(roots, monkeypatch):
    """A node with 500 containers has thousands of mounts: a container's pin set reads the
    table once, not once per pin, and a set already in place not at all."""
    user = roots["user_data"] / "a@b.org"
    for name in ("settings", "private"):
        (user / name).mkdir()
        (user / name / f"{name}.txt").write_text(name)
    pins = pins_for(roots) + [{"name": name, "root": str(roots["user_data"]), "parts": ["a@b.org", name],
                               "shared": name == "private"} for name in ("settings", "private")]
    set_id, identity = ccc_pins.identify(pins)
    ccc_pins.ensure_tree(str(roots["binds"]))  # a node in service has its pin tmpfs
    reads, real = [], ccc_mountfd._table
    monkeypatch.setattr(ccc_mountfd, "_table", lambda: reads.append(1) or real())
    assert ccc_pins.ensure(str(roots["binds"]), "box", pins, set_id, identity) == ["home", "settings", "private"]
    assert len(reads) == 1
    base = pathlib.Path(ccc_pins.set_dir(str(roots["binds"]), "box", set_id))
    assert [sorted(os.listdir(base / name)) for name in ("home", "settings", "private")] == [
        ["mine.txt"], ["settings.txt"], ["private.txt"]]
    assert ccc_pins.ensure(str(roots["binds"]), "box", pins, set_id, identity) == [] and len(reads) == 1
    ccc_pins.release(str(roots["binds"]), "box")


@NEEDS_ROOT
def test_swap_between_check_and_mount_mounts_nothing(roots, monkeypatch):
    pins = pins_for(roots)
    set_id, identity = ccc_pins.identify(pins)
    home = roots["user_data"] / "a@b.org" / "home"
    home.rename(home.with_name("home.aside"))
    os.symlink(str(roots["host"]), home)
    with pytest.raises(ccc_safefs.UnsafePath):
        ccc_pins.ensure(str(roots["binds"]), "box", pins, set_id, identity)
    home.unlink()
    home.with_name("home.aside").rename(home)
    os.rename(home, home.with_name("moved"))
    home.mkdir()  # a different folder under the checked name: refused too
    with pytest.raises(ccc_safefs.UnsafePath, match="changed while it was being checked"):
        ccc_pins.ensure(str(roots["binds"]), "box", pins, set_id, identity)
    assert [p for p in ccc_mountfd.mount_points() if p.startswith(str(roots["binds"]) + "/")] == []


@NEEDS_ROOT
def test_pin_tree_is_a_tmpfs_and_release_unmounts_everything(roots):
    pins = pins_for(roots)
    set_id, identity = ccc_pins.identify(pins)
    ccc_pins.ensure(str(roots["binds"]), "box", pins, set_id, identity)
    assert str(roots["binds"]) in ccc_mountfd.mount_points()
    assert ccc_pins.release(str(roots["binds"]), "box") == [set_id]
    assert [p for p in ccc_mountfd.mount_points() if p.startswith(str(roots["binds"]) + "/")] == []
    assert ccc_pins.pinned_stacks(str(roots["binds"])) == []


@NEEDS_ROOT
def test_live_group_symlink_is_refused_and_the_host_folder_untouched(roots):
    private = roots["user_data"] / "a@b.org" / "private"
    private.mkdir()
    group = roots["tmp"] / "private_data" / "lab"
    group.mkdir(parents=True)
    (group / "data").write_text("lab\n")
    pins = [{"name": "private", "root": str(roots["user_data"]), "parts": ["a@b.org", "private"], "shared": True}]
    set_id, identity = ccc_pins.identify(pins)
    ccc_pins.ensure(str(roots["binds"]), "box", pins, set_id, identity)
    pin = os.path.join(ccc_pins.set_dir(str(roots["binds"]), "box", set_id), "private")
    os.symlink(str(roots["host"]), private / "lab")
    result = ccc_private_groups.reconcile_groups(pin, str(roots["tmp"] / "private_data"), ["lab"], OWNER)
    assert result["refused"] and "lab" in result["refused"][0]
    assert str(roots["host"]) not in ccc_mountfd.mount_points()
    assert sorted(os.listdir(roots["host"])) == ["secret"]
    (private / "lab").unlink()
    result = ccc_private_groups.reconcile_groups(pin, str(roots["tmp"] / "private_data"), ["lab"], OWNER)
    assert result["mounted"] == [os.path.join(pin, "lab")]
    # Seen through the pin (what the container's /storage/private is), not on the user's path.
    assert pathlib.Path(pin, "lab", "data").read_text() == "lab\n"
    assert not (private / "lab" / "data").exists()


@NEEDS_ROOT
def test_host_keys_are_per_stack_stable_and_root_only(roots, tmp_path):
    sshd, state = tmp_path / "sshd", tmp_path / "user_data" / ".ccc-salt"
    sshd.mkdir()
    assert ccc_hostkeys.ensure(str(sshd), str(state), "box", rsa_bits=1024)
    assert ccc_hostkeys.ensure(str(sshd), str(state), "other", rsa_bits=1024)
    keys = sshd / "stacks" / "box" / "keys"
    assert stat.S_IMODE(os.stat(keys).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(keys / "ssh_host_ed25519_key").st_mode) == 0o600
    box_key = (keys / "ssh_host_ed25519_key").read_bytes()
    assert box_key != (sshd / "stacks" / "other" / "keys" / "ssh_host_ed25519_key").read_bytes()
    # Another node (its own sshd folder) gets the same set from the shared state dir.
    node2 = tmp_path / "sshd2"
    node2.mkdir()
    assert ccc_hostkeys.ensure(str(node2), str(state), "box", rsa_bits=1024)
    assert (node2 / "stacks" / "box" / "keys" / "ssh_host_ed25519_key").read_bytes() == box_key
    assert not ccc_hostkeys.ensure(str(sshd), str(state), "box")


def test_host_keys_never_create_below_a_missing_root(tmp_path):
    with pytest.raises(FileNotFoundError):
        ccc_hostkeys.ensure(str(tmp_path / "sshd"), str(tmp_path / "gone" / ".ccc-salt"), "box")
    assert not (tmp_path / "gone").exists()
