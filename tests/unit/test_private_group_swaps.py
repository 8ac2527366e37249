"""Live private groups against a user who renames and swaps mount points in their own
``private`` folder, with real mounts in a private mount namespace (support.mountns) and the
user's move injected at the exact step between two of root's system calls: root never changes
the propagation of ``/``, never mounts on it, never unmounts a mount the user chose, and a
revoked group never stays mounted. Needs root (as CI runs it)."""

import ctypes
import errno
import os
import pathlib

import pytest

import ccc_mountfd
import ccc_mounts
import ccc_private_mounts
import ccc_pins
import ccc_private_groups
from support.mountns import as_user, in_private_namespace

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounts need root")
OWNER = (1000, 1000)


@pytest.fixture
def site(tmp_path):
    """A user's ``private`` folder pinned (shared, as a container's ``/storage/private``), two
    private data groups and a host folder outside everything."""
    private = tmp_path / "user_data" / "a@b.org" / "private"
    private.mkdir(parents=True)
    groups = tmp_path / "private_data"
    for name in ("lab", "other"):
        (groups / name).mkdir(parents=True)
        (groups / name / f"{name}.txt").write_text(f"{name} data\n")
    host = tmp_path / "host"
    (host / "decoy").mkdir(parents=True)
    return {"private": private, "groups": groups, "host": host, "binds": tmp_path / "binds", "tmp": tmp_path}


def pin_private(site):
    pins = [{"name": "private", "root": str(site["tmp"] / "user_data"), "parts": ["a@b.org", "private"],
             "shared": True}]
    set_id, identity = ccc_pins.identify(pins)
    ccc_pins.ensure(str(site["binds"]), "box", pins, set_id, identity)
    return pathlib.Path(ccc_pins.set_dir(str(site["binds"]), "box", set_id), "private")


def reconcile(site, pin, groups):
    return ccc_private_groups.reconcile_groups(str(pin), str(site["groups"]), groups, OWNER)


def root_mount():
    """``/`` as this namespace has it: (mount id, peer group, master); it must never change."""
    record = next(r for r in reversed(ccc_mountfd.mountinfo()) if r.point == "/")
    return record.id, record.shared, record.master


def group_mounts(pin):
    """What is mounted on the pin: {relative path: (mount id, group of its root inode)}."""
    fd = os.open(pin, os.O_RDONLY | os.O_DIRECTORY)
    try:
        pin_id = ccc_mountfd.mount_id(fd)
    finally:
        os.close(fd)
    found = {}
    for record in ccc_mountfd.mountinfo():
        if record.parent == pin_id:
            found[os.path.relpath(record.point, pin)] = (record.id, sorted(os.listdir(record.point)))
    return found


def exchange(private, first, second):
    """The user swaps two mount points' names (three renames in their own folder)."""
    os.rename(private / first, private / ".swap")
    os.rename(private / second, private / first)
    os.rename(private / ".swap", private / second)


def after_call(monkeypatch, name, user_move):
    """Play ``user_move`` once, right after root's ``name`` system call returned."""
    real = ccc_mountfd._syscall
    played = []

    def syscall(which, *args):
        result = real(which, *args)
        if which == name and not played:
            played.append(which)
            user_move()
        return result

    monkeypatch.setattr(ccc_mountfd, "_syscall", syscall)
    return played


def test_swap_right_after_the_bind_never_changes_propagation_of_root(site, monkeypatch):
    """The old code bound by descriptor, then made ``<pin>/private/lab`` private by name: a user
    who renamed the new mount point and left ``lab -> /`` made root turn ``/`` private. The
    swap is played right after the mount is attached, where that call came."""

    def body():
        pin = pin_private(site)
        before = root_mount()
        roots_before = [r.id for r in ccc_mountfd.mountinfo() if r.point == "/"]

        def user_move():
            os.rename(site["private"] / "lab", site["private"] / "lab.aside")
            os.symlink("/", site["private"] / "lab")

        played = after_call(monkeypatch, "move_mount", lambda: as_user(str(site["binds"]), user_move))
        result = reconcile(site, pin, ["lab"])
        assert played and result["mounted"] == [str(pin / "lab")]
        assert root_mount() == before
        assert [r.id for r in ccc_mountfd.mountinfo() if r.point == "/"] == roots_before
        # What got mounted is the group (now under the user's new name), with no peer or master.
        mounts = group_mounts(pin)
        assert list(mounts) == ["lab.aside"] and mounts["lab.aside"][1] == ["lab.txt"]
        made = next(r for r in ccc_mountfd.mountinfo() if r.id == mounts["lab.aside"][0])
        assert made.master is None and [r for r in ccc_mountfd.mountinfo() if made.shared and r.shared == made.shared
                                         and r.id != made.id] == []
        # The next apply takes the moved mount away and refuses the symlink; / is still untouched.
        monkeypatch.undo()
        again = reconcile(site, pin, ["lab"])
        assert again["unmounted"] == [str(pin / "lab.aside")]
        assert len(again["refused"]) == 1 and "symbolic link" in again["refused"][0]
        assert group_mounts(pin) == {} and root_mount() == before

    in_private_namespace(body)


def test_swap_before_the_bind_never_mounts_on_root(site, monkeypatch):
    """The mount point is swapped for ``lab -> /`` after root opened it: the mount lands on the
    folder root opened (moved aside by the user), never on ``/``."""

    def body():
        pin = pin_private(site)
        roots_before = [r.id for r in ccc_mountfd.mountinfo() if r.point == "/"]

        def user_move():
            os.rename(site["private"] / "lab", site["private"] / "lab.aside")
            os.symlink("/", site["private"] / "lab")

        # open_tree comes after the mount point was opened and before the mount is attached.
        after_call(monkeypatch, "open_tree", lambda: as_user(str(site["binds"]), user_move))
        before = root_mount()
        assert reconcile(site, pin, ["lab"])["mounted"] == [str(pin / "lab")]
        assert [r.id for r in ccc_mountfd.mountinfo() if r.point == "/"] == roots_before
        assert root_mount() == before
        assert {name: files for name, (_, files) in group_mounts(pin).items()} == {"lab.aside": ["lab.txt"]}

    in_private_namespace(body)


def test_exchanged_mount_points_never_keep_a_revoked_group(site):
    """The user exchanges the names of two group mounts, then ``lab`` is revoked: by name, root
    would keep lab's mount (now called ``other``) and unmount ``other``'s. By identity, lab's
    mount goes, and ``other`` is remounted at its own name."""

    def body():
        pin = pin_private(site)
        assert sorted(reconcile(site, pin, ["lab", "other"])["mounted"]) == [str(pin / "lab"), str(pin / "other")]
        as_user(str(site["binds"]), lambda: exchange(site["private"], "lab", "other"))
        result = reconcile(site, pin, ["other"])
        assert sorted(result["unmounted"]) == [str(pin / "lab"), str(pin / "other")]
        assert result["mounted"] == [str(pin / "other")] and result["refused"] == []
        assert {name: files for name, (_, files) in group_mounts(pin).items()} == {"other": ["other.txt"]}

    in_private_namespace(body)


def test_a_revoked_group_moved_deeper_is_still_unmounted(site):
    def body():
        pin = pin_private(site)
        reconcile(site, pin, ["lab"])

        def user_move():
            (site["private"] / "deep" / "er").mkdir(parents=True)
            os.rename(site["private"] / "lab", site["private"] / "deep" / "er" / "lab")

        as_user(str(site["binds"]), user_move)
        assert list(group_mounts(pin)) == ["deep/er/lab"]
        result = reconcile(site, pin, [])
        assert result["unmounted"] == [str(pin / "deep" / "er" / "lab")]
        assert group_mounts(pin) == {}

    in_private_namespace(body)


def test_swap_between_the_check_and_the_unmount_unmounts_what_was_checked(site, monkeypatch):
    """``lab`` is revoked; right after root opened and checked lab's mount, the user exchanges
    the names: root detaches lab's mount (by its descriptor), not ``other``'s, the mount the
    user put at the checked name."""

    def body():
        pin = pin_private(site)
        reconcile(site, pin, ["lab", "other"])
        other_id = group_mounts(pin)["other"][0]
        real = ccc_private_groups._open_mount

        def open_then_swap(private_fd, relative, expected_id):
            fd = real(private_fd, relative, expected_id)
            if relative == "lab":
                as_user(str(site["binds"]), lambda: exchange(site["private"], "lab", "other"))
            return fd

        monkeypatch.setattr(ccc_private_groups, "_open_mount", open_then_swap)
        result = reconcile(site, pin, ["other"])
        assert str(pin / "lab") in result["unmounted"]
        mounts = group_mounts(pin)
        assert all(files == ["other.txt"] for _, files in mounts.values())  # lab's data is gone
        assert other_id in [mount_id for mount_id, _ in mounts.values()]
        # The next apply finds other's mount under the wrong name and leaves one at its own.
        monkeypatch.undo()
        reconcile(site, pin, ["other"])
        assert {name: files for name, (_, files) in group_mounts(pin).items()} == {"other": ["other.txt"]}

    in_private_namespace(body)


def test_swap_between_reading_the_mounts_and_the_check_is_refused(site):
    """Names exchanged after root read the mount table: each name now holds another mount id,
    so both are refused this time, and so is mounting ``other`` on a folder that is now a mount
    point itself (nothing unmounted, nothing stacked); the next apply puts things right."""

    def body():
        pin = pin_private(site)
        reconcile(site, pin, ["lab", "other"])
        children = ccc_mountfd.children_of(ccc_mountfd.mountinfo())
        as_user(str(site["binds"]), lambda: exchange(site["private"], "lab", "other"))
        result = ccc_private_groups.reconcile_groups(str(pin), str(site["groups"]), ["other"], OWNER,
                                                     children=children)
        assert result["unmounted"] == [] and result["mounted"] == []
        assert sorted(line.split(": ")[1].split(" (")[0] for line in result["refused"]) == [
            "a different mount is there now", "a different mount is there now",
            "something else is mounted on the mount point"]
        assert sorted(group_mounts(pin)) == ["lab", "other"]
        assert len([r for r in ccc_mountfd.mountinfo() if r.point.startswith(str(pin) + "/")]) == 2
        reconcile(site, pin, ["other"])
        assert {name: files for name, (_, files) in group_mounts(pin).items()} == {"other": ["other.txt"]}

    in_private_namespace(body)


def test_release_never_unmounts_a_mount_the_user_points_at(site, monkeypatch):
    """The old release unmounted every mount point below a pin set by name, deepest first: a
    user who moved a group mount to ``private/x/decoy`` and then swapped ``x`` for a link to a
    host folder made root unmount the host's ``decoy``. Now only the pins are detached, by
    descriptor, and what is inside them goes with them."""

    def body():
        pin = pin_private(site)
        ccc_mountfd.mount("tmpfs", str(site["host"] / "decoy"), "tmpfs")
        decoy = [r.id for r in ccc_mountfd.mountinfo() if r.point == str(site["host"] / "decoy")]
        reconcile(site, pin, ["lab"])

        def user_move():
            (site["private"] / "x").mkdir()
            os.rename(site["private"] / "lab", site["private"] / "x" / "decoy")
            os.rename(site["private"] / "x", site["private"] / "x.aside")
            os.symlink(str(site["host"]), site["private"] / "x")

        real = ccc_mountfd.unmount_all_at

        def swap_then_unmount(dir_fd, name):
            as_user(str(site["binds"]), user_move)
            monkeypatch.setattr(ccc_mountfd, "unmount_all_at", real)
            return real(dir_fd, name)

        monkeypatch.setattr(ccc_mountfd, "unmount_all_at", swap_then_unmount)
        assert len(ccc_pins.release(str(site["binds"]), "box")) == 1
        assert [r.id for r in ccc_mountfd.mountinfo() if r.point == str(site["host"] / "decoy")] == decoy
        assert [p for p in ccc_mountfd.mount_points() if p.startswith(str(site["binds"]) + "/")] == []

    in_private_namespace(body)


def test_missing_mount_api_is_a_clear_error(site, monkeypatch):
    def body():
        monkeypatch.setattr(ccc_mountfd._libc, "syscall", _enosys)
        with pytest.raises(ccc_mountfd.MountApiMissing, match="needs Linux 5.12 or newer"):
            pin_private(site)

    in_private_namespace(body)


def _enosys(*args):
    """A kernel older than the mount API answers every one of its calls with ENOSYS."""
    ctypes.set_errno(errno.ENOSYS)
    return -1


def test_the_private_pin_is_read_from_inspect_data_and_from_a_list_summary():
    # The private-mount pass reads it from the list summary (no inspect per container); a
    # summary carries a HostConfig of its own (the network mode), without mounts.
    pin = "/run/ccc-salt/binds/ana-main/0123456789ab/private"
    inspect = {"HostConfig": {"Mounts": [{"Type": "bind", "Source": "/x/home", "Target": "/home/ana"},
                                         {"Type": "bind", "Source": pin, "Target": "/storage/private"}]}}
    summary = {"HostConfig": {"NetworkMode": "lab-unrestricted"},
               "Mounts": [{"Type": "bind", "Source": pin + "/../group-lab", "Destination": "/storage/private/lab"},
                          {"Type": "bind", "Source": pin, "Destination": "/storage/private"}]}
    assert ccc_private_groups.private_pin(inspect) == ccc_private_groups.private_pin(summary) == pin
    assert ccc_private_groups.private_pin({"HostConfig": {"NetworkMode": "x"}, "Mounts": []}) is None


def test_a_bind_is_judged_by_its_own_line_of_the_mount_table(site):
    """``bind`` checks the mount it made (its line of the table and its peers' lines, found
    without parsing the whole table): where it landed, what it shows, and that it shares
    propagation with nothing; a mount that joins its peer group afterwards is seen."""

    def body():
        source, target = site["groups"] / "lab", site["host"] / "decoy"
        source_fd = os.open(source, os.O_RDONLY | os.O_DIRECTORY)
        target_fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
        try:
            parent = ccc_mountfd.mount_id(target_fd)
            new = ccc_mountfd.bind(source_fd, target_fd, ccc_mountfd.MS_SHARED, parent=parent)
            checked, shown = os.fstat(source_fd), os.stat(target)
        finally:
            os.close(source_fd)
            os.close(target_fd)
        judge = ccc_mountfd._bind_problem
        assert judge(new, parent, checked, shown, ccc_mountfd.MS_SHARED) is None
        assert judge(new, parent + 1, checked, shown, ccc_mountfd.MS_SHARED) == \
            "the new mount is not where its mount point was opened"
        assert judge(new, parent, os.stat(site["host"]), shown, ccc_mountfd.MS_SHARED) == \
            "the new mount is not the folder that was checked"
        (site["host"] / "peer").mkdir()
        ccc_mountfd.mount(str(target), str(site["host"] / "peer"), flags=4096)  # MS_BIND: a peer of the shared mount
        peer = next(r.id for r in ccc_mountfd.mountinfo() if r.point == str(site["host"] / "peer"))
        assert judge(new, parent, checked, shown, ccc_mountfd.MS_SHARED) == \
            f"the new mount's propagation is not its own (peers [{peer}], master None)"

    in_private_namespace(body)


def test_binds_made_together_are_checked_against_one_table_and_a_bad_one_alone_goes(site, monkeypatch):
    """A container's pins are bound together (``bind_all``): one read of the mount table checks
    them all, a mount that fails its check is detached and its problem raised, and the ones
    that passed stay."""
    reads, real_table, real_problem = [], ccc_mountfd._table, ccc_mountfd._bind_problem
    monkeypatch.setattr(ccc_mountfd, "_table", lambda: reads.append(1) or real_table())
    made = []

    def judged(new, *args, **kwargs):
        made.append(new)
        return "the second one is judged wrong" if len(made) == 2 else real_problem(new, *args, **kwargs)

    monkeypatch.setattr(ccc_mountfd, "_bind_problem", judged)

    def body():
        targets = [site["host"] / "one", site["host"] / "two"]
        sources = (site["groups"] / "lab", site["groups"] / "other")
        fds = [os.open(path, os.O_RDONLY | os.O_DIRECTORY) for path in sources]
        for target in targets:
            target.mkdir()
        fds += [os.open(target, os.O_RDONLY | os.O_DIRECTORY) for target in targets]
        try:
            with pytest.raises(ccc_mountfd.ccc_safefs.UnsafePath, match="the second one is judged wrong"):
                ccc_mountfd.bind_all([(fds[0], fds[2], ccc_mountfd.MS_PRIVATE, None),
                                      (fds[1], fds[3], ccc_mountfd.MS_SHARED, None)])
        finally:
            for fd in fds:
                os.close(fd)
        assert len(reads) == 1 and len(made) == 2
        assert os.listdir(targets[0]) == ["lab.txt"] and os.listdir(targets[1]) == []
        assert [r.point for r in ccc_mountfd.mountinfo() if r.point.startswith(str(site["host"]))] == [str(targets[0])]

    in_private_namespace(body)


def _site_pillar(**record):
    """A one-container ``ccc`` pillar whose user may mount the ``lab`` group live."""
    entry = {"STACK_NAME": "box", "USER_EMAIL": "a@b.org", "CONTAINER_IMAGE": "vicoslab/ccc:base", **record}
    return {"users": {"a@b.org": {"USER_NAME": "ana", "USER_FULLNAME": "Ana", "USER_TYPE": "lab"}},
            "user_types": {"lab": {"allowed_private_data_mount_groups": ["lab"]}}, "containers": [entry]}


def test_a_container_held_for_an_admin_typo_keeps_its_live_groups(site):
    """A record with a problem holds the container as it was (the deploy refuses to change it);
    its live groups stay mounted too, and come back under the run's control once the record is
    fixed. A container pillar no longer lists has no grant: its groups go."""

    def body():
        pin = pin_private(site)
        cluster = {"mount_points": {"nfs": {"user_data": str(site["tmp"] / "user_data"),
                                            "private_data": str(site["groups"])}}}
        containers = {"box": {"Id": "0" * 64, "State": "running",
                              "Mounts": [{"Type": "bind", "Source": str(pin), "Destination": "/storage/private"}]}}

        def run(ccc):
            wanted = ccc_mounts.wanted_private_mounts(ccc, ["box"])
            return wanted, ccc_private_mounts.reconcile(None, cluster, str(site["binds"]), containers, wanted, OWNER)

        assert run(_site_pillar()) == ({"box": ["lab"]}, {"mounted": [str(pin / "lab")]})
        typo = _site_pillar(EXTRA_ENVS=["not", "a", "mapping"])
        assert run(typo) == ({"box": None}, {})
        assert list(group_mounts(pin)) == ["lab"]
        assert run(_site_pillar()) == ({"box": ["lab"]}, {})
        assert run(dict(_site_pillar(), containers=[])) == ({}, {"unmounted": [str(pin / "lab")]})
        assert group_mounts(pin) == {}

    in_private_namespace(body)
