"""The ccc_settings beacon (_beacons/ccc_settings.py): SettingsWatcher driven by a fake clock over
real files and real inotify in tmp_path, and the thin Salt wrapper (validate, beacon, close)."""

import builtins
import logging
import os
import sys
import threading
import time
import types

import pytest
from support.beacons import beacon_dunders, load_beacon

beacon_mod = load_beacon("ccc_settings.py", "ccc_settings_beacon")
watching = beacon_mod.watching
SettingsWatcher = watching.SettingsWatcher


def bare(events):
    """Events without the file version (``test_the_version_names_the_file_state`` checks it)."""
    return [{key: value for key, value in event.items() if key != "version"} for event in events]


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


class NullNotifier:
    """An inotify stand-in that never reports anything (an edit made on another NFS client)."""

    def __init__(self):
        self.next_wd = 0
        self.closed = False

    def add_watch(self, path, mask):
        if not os.path.isdir(path) or os.path.islink(path):
            raise FileNotFoundError(2, "No such file or directory", path)
        self.next_wd += 1
        return self.next_wd

    def rm_watch(self, wd):
        pass

    def read(self, timeout=None):
        assert timeout == 0
        return []

    def close(self):
        self.closed = True


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def settings_dir(tmp_path):
    path = tmp_path / "user_data" / "ana@example.org" / "container-settings"
    path.mkdir(parents=True)
    (path / "ana-main.yml").write_text("ana-main: {}\n")
    return path


@pytest.fixture
def make_watcher(clock):
    watchers = []

    def make(files, **kwargs):
        kwargs.setdefault("quiet_period", 2)
        kwargs.setdefault("poll_interval", 30)
        kwargs.setdefault("max_delay", 10)
        watcher = SettingsWatcher(files, clock=clock, **kwargs)
        watchers.append(watcher)
        return watcher

    yield make
    for watcher in watchers:
        watcher.close()


def files_of(*paths):
    return [{"stack": p.name[: -len(".yml")], "path": str(p)} for p in paths]


def settle(watcher, clock, seconds=3.0, step=0.5):
    """Advance the clock in steps, polling each time; return every event seen."""
    events = []
    for _ in range(int(seconds / step)):
        clock.advance(step)
        events.extend(watcher.poll())
    return bare(events)


def write(path, text):
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


# --------------------------------------------------------------------------------------------
# SettingsWatcher


def test_first_sight_does_not_emit(settings_dir, clock, make_watcher):
    watcher = make_watcher(files_of(settings_dir / "ana-main.yml", settings_dir / "ana-gpu.yml"))
    assert watcher.poll() == []
    assert settle(watcher, clock, seconds=65) == []  # two stat polls: nothing changed


def test_in_place_write_emits_once_after_the_quiet_period(settings_dir, clock, make_watcher):
    yml = settings_dir / "ana-main.yml"
    watcher = make_watcher(files_of(yml))
    write(yml, "ana-main: {SHM_SIZE: 4g}\n")
    assert watcher.poll() == []
    clock.advance(1.9)
    assert watcher.poll() == []
    clock.advance(0.2)
    assert bare(watcher.poll()) == [{"stack": "ana-main", "change": "modified"}]
    assert settle(watcher, clock, seconds=40) == []


def test_a_burst_of_fifty_writes_emits_once(settings_dir, clock, make_watcher):
    yml = settings_dir / "ana-main.yml"
    watcher = make_watcher(files_of(yml))
    events = []
    for i in range(50):
        write(yml, f"ana-main: {{SHM_SIZE: {i + 1}g}}\n")
        clock.advance(0.1)
        events.extend(watcher.poll())
    events = bare(events) + settle(watcher, clock)
    assert events == [{"stack": "ana-main", "change": "modified"}]


def test_a_file_that_keeps_changing_still_emits_every_max_delay(settings_dir, clock, make_watcher):
    yml = settings_dir / "ana-main.yml"
    watcher = make_watcher(files_of(yml))
    times = []
    for i in range(25):  # a write every second for 25 s: never quiet for 2 s
        write(yml, f"ana-main: {{SHM_SIZE: {i + 1}g}}\n")
        clock.advance(1)
        if watcher.poll():
            times.append(clock.now)
    assert len(times) == 2  # after 10 s and 20 s
    assert times[1] - times[0] == pytest.approx(10, abs=1.01)
    assert [e["change"] for e in settle(watcher, clock)] == ["modified"]  # the last burst


def test_editor_style_write_temp_then_rename_emits(settings_dir, clock, make_watcher):
    yml = settings_dir / "ana-main.yml"
    watcher = make_watcher(files_of(yml))
    temp = settings_dir / ".ana-main.yml.tmp-vscode"
    write(temp, "ana-main: {SHM_SIZE: 8g}\n")
    os.replace(temp, yml)
    assert settle(watcher, clock) == [{"stack": "ana-main", "change": "modified"}]
    # vim with backupcopy=no: the original is renamed away, a new file is written
    os.rename(yml, settings_dir / "ana-main.yml~")
    write(yml, "ana-main: {SHM_SIZE: 16g}\n")
    os.unlink(settings_dir / "ana-main.yml~")
    assert settle(watcher, clock) == [{"stack": "ana-main", "change": "modified"}]


def test_delete_then_create(settings_dir, clock, make_watcher):
    yml = settings_dir / "ana-main.yml"
    watcher = make_watcher(files_of(yml))
    yml.unlink()
    assert settle(watcher, clock) == [{"stack": "ana-main", "change": "deleted"}]
    write(yml, "ana-main: {}\n")
    assert settle(watcher, clock) == [{"stack": "ana-main", "change": "created"}]


def test_a_file_missing_at_start_emits_created(settings_dir, clock, make_watcher):
    yml = settings_dir / "ana-gpu.yml"
    watcher = make_watcher(files_of(yml))
    write(yml, "ana-gpu: {}\n")
    assert settle(watcher, clock) == [{"stack": "ana-gpu", "change": "created"}]


def test_a_settings_directory_created_later_is_picked_up(tmp_path, clock, make_watcher):
    directory = tmp_path / "user_data" / "new@example.org" / "container-settings"
    yml = directory / "new-box.yml"
    watcher = make_watcher(files_of(yml))
    assert watcher.missing_dirs == [str(directory)]
    directory.mkdir(parents=True)
    write(yml, "new-box: {}\n")
    assert settle(watcher, clock, seconds=10) == []  # not looked for before the poll interval
    clock.advance(20)
    assert watcher.poll() == []  # poll tick: directory watched now, its file pending
    assert watcher.watched_dirs == [str(directory)]
    assert settle(watcher, clock) == [{"stack": "new-box", "change": "created"}]
    write(yml, "new-box: {SHM_SIZE: 4g}\n")  # now seen by inotify, no need to wait for a poll
    assert settle(watcher, clock) == [{"stack": "new-box", "change": "modified"}]


def test_a_removed_and_recreated_directory_is_watched_again(settings_dir, clock, make_watcher):
    yml = settings_dir / "ana-main.yml"
    watcher = make_watcher(files_of(yml))
    yml.unlink()
    settings_dir.rmdir()
    assert settle(watcher, clock) == [{"stack": "ana-main", "change": "deleted"}]
    assert watcher.missing_dirs == [str(settings_dir)]
    settings_dir.mkdir()
    write(yml, "ana-main: {}\n")
    assert settle(watcher, clock, seconds=40) == [{"stack": "ana-main", "change": "created"}]
    assert watcher.watched_dirs == [str(settings_dir)]


def test_files_the_deployment_writes_and_other_names_never_emit(settings_dir, clock, make_watcher, monkeypatch):
    watcher = make_watcher(files_of(settings_dir / "ana-main.yml"))
    stats = []
    real_signature = watching.signature
    monkeypatch.setattr(watching, "signature", lambda path: stats.append(path) or real_signature(path))
    (settings_dir / "logs").mkdir()
    for name in ("ana-main.deploy", "ana-main.status", "ana-main.env-backup", "logs/x.log", "other.yml",
                 "ana-main.yml.tmp", "ANA-MAIN.yml", "ana-main.yml.bak"):
        write(settings_dir / name, "x\n")
    os.chmod(settings_dir / "ana-main.deploy", 0o600)
    os.rename(settings_dir / "other.yml", settings_dir / "other2.yml")
    assert watcher.poll() == []
    assert watcher.pending == {} and stats == []  # filtered by name: not even a stat
    assert settle(watcher, clock, seconds=35) == []  # the stat poll finds nothing either


def test_a_symlinked_settings_file_is_never_read(settings_dir, tmp_path, clock, make_watcher, monkeypatch):
    fifo, fifo2 = tmp_path / "fifo", tmp_path / "fifo2"
    os.mkfifo(fifo)
    os.mkfifo(fifo2)
    yml = settings_dir / "ana-main.yml"
    yml.unlink()
    yml.symlink_to(fifo)
    gpu = settings_dir / "ana-gpu.yml"
    watcher = make_watcher(files_of(yml, gpu))

    def refuse(*args, **kwargs):
        raise AssertionError(f"the beacon opened {args[0]!r}")

    monkeypatch.setattr(builtins, "open", refuse)
    monkeypatch.setattr(os, "open", refuse)
    link = settings_dir / ".tmp-link"
    link.symlink_to(fifo2)
    os.replace(link, yml)  # ln -sf: a new symlink renamed over the old one
    os.mkfifo(gpu)         # the settings file itself is a FIFO

    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("events", settle(watcher, clock, seconds=35)),
                              daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive(), "the beacon blocked on a FIFO"
    assert sorted(result["events"], key=lambda e: e["stack"]) == [
        {"stack": "ana-gpu", "change": "created"},
        {"stack": "ana-main", "change": "modified"},
    ]


def test_a_change_inotify_cannot_see_is_caught_at_the_poll_interval(settings_dir, clock, make_watcher):
    yml = settings_dir / "ana-main.yml"
    notifier = NullNotifier()
    watcher = make_watcher(files_of(yml), notifier_factory=lambda: notifier)
    assert watcher.watched_dirs == [str(settings_dir)]
    write(yml, "ana-main: {SHM_SIZE: 4g}\n")  # as if written by another NFS client
    assert settle(watcher, clock, seconds=29) == []
    clock.advance(1)
    assert watcher.poll() == []  # poll tick: the change is seen and must settle like any other
    assert settle(watcher, clock) == [{"stack": "ana-main", "change": "modified"}]
    os.utime(yml, ns=(1, 1))  # only the mtime changes
    assert [e["change"] for e in settle(watcher, clock, seconds=35)] == ["modified"]
    watcher.close()
    assert notifier.closed


def test_nothing_happening_costs_no_stat_between_polls(settings_dir, clock, make_watcher, monkeypatch):
    watcher = make_watcher(files_of(*(settings_dir / f"box-{i}.yml" for i in range(50))))
    stats = []
    real_signature = watching.signature
    monkeypatch.setattr(watching, "signature", lambda path: stats.append(path) or real_signature(path))
    for _ in range(290):
        clock.advance(0.1)
        assert watcher.poll() == []
    assert stats == []
    clock.advance(1.5)
    watcher.poll()
    assert len(stats) == 50  # one lstat per file at the poll interval


def test_the_stat_poll_never_follows_symlinks(settings_dir, clock, make_watcher, monkeypatch):
    watcher = make_watcher(files_of(settings_dir / "ana-main.yml"))
    calls = []
    real_stat = os.stat

    def spy(path, *args, **kwargs):
        if str(path).startswith(str(settings_dir)):
            calls.append(kwargs)
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", spy)
    clock.advance(31)
    watcher.poll()
    monkeypatch.undo()
    assert calls == [{"follow_symlinks": False}]


def test_a_new_file_list_rebuilds_the_watches(tmp_path, clock, make_watcher):
    dir1 = tmp_path / "a@example.org" / "container-settings"
    dir2 = tmp_path / "b@example.org" / "container-settings"
    for directory in (dir1, dir2):
        directory.mkdir(parents=True)
    one, two = dir1 / "box-one.yml", dir2 / "box-two.yml"
    write(one, "box-one: {}\n")
    write(two, "box-two: {}\n")
    watcher = make_watcher(files_of(one))
    assert watcher.set_files(files_of(one)) is False
    write(two, "box-two: {SHM_SIZE: 1g}\n")
    assert watcher.set_files(files_of(two)) is True  # first sight of box-two: no event
    assert watcher.watched_dirs == [str(dir2)]
    assert settle(watcher, clock) == []
    write(one, "box-one: {SHM_SIZE: 4g}\n")
    assert settle(watcher, clock, seconds=35) == []  # no longer watched
    write(two, "box-two: {SHM_SIZE: 2g}\n")
    assert settle(watcher, clock) == [{"stack": "box-two", "change": "modified"}]
    watcher.set_files({"box-two": str(two), "box-one": str(one)})  # a mapping works too
    assert watcher.watched_dirs == sorted([str(dir1), str(dir2)])
    write(one, "box-one: {SHM_SIZE: 8g}\n")
    assert settle(watcher, clock) == [{"stack": "box-one", "change": "modified"}]


def test_a_new_watcher_inherits_what_an_orphaned_one_knew(settings_dir, clock, make_watcher):
    yml, gpu = settings_dir / "ana-main.yml", settings_dir / "ana-gpu.yml"
    old = make_watcher(files_of(yml))
    write(yml, "ana-main: {SHM_SIZE: 4g}\n")
    assert old.poll() == []  # pending in the old watcher
    write(gpu, "ana-gpu: {}\n")
    new = make_watcher(files_of(yml, gpu))
    new.inherit(old)
    assert old.closed
    assert settle(new, clock) == [{"stack": "ana-main", "change": "modified"}]  # ana-gpu: first sight
    write(yml, "ana-main: {SHM_SIZE: 8g}\n")  # while no watcher is looking
    newer = make_watcher(files_of(yml, gpu))
    newer.inherit(new)
    assert settle(newer, clock) == [{"stack": "ana-main", "change": "modified"}]


def test_close_releases_the_inotify_descriptor(settings_dir, make_watcher):
    watcher = make_watcher(files_of(settings_dir / "ana-main.yml"))
    fd = watcher._notifier.fileno()
    watcher.close()
    assert watcher.closed
    with pytest.raises(OSError):
        os.fstat(fd)



def test_the_version_names_the_file_state_every_node_sees(settings_dir, clock, make_watcher):
    """The master applies an edit once however many nodes report it: the version is the shared
    file's own state, the same on every node that watches it."""
    yml = settings_dir / "ana-main.yml"
    watcher = make_watcher(files_of(yml))
    write(yml, "ana-main: {SHM_SIZE: 4g}\n")
    assert watcher.poll() == []
    clock.advance(2.1)
    st = os.stat(yml, follow_symlinks=False)
    assert watcher.poll() == [{"stack": "ana-main", "change": "modified",
                               "version": f"{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_size}:{st.st_ino}"}]
    other = make_watcher(files_of(yml))  # another node's watcher of the same file
    os.utime(yml, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert watcher.poll() == other.poll() == []
    clock.advance(2.1)
    touched = os.stat(yml, follow_symlinks=False)
    assert watcher.poll()[0]["version"] == other.poll()[0]["version"] == \
        f"{st.st_mtime_ns + 10**9}:{touched.st_ctime_ns}:{st.st_size}:{st.st_ino}"
    yml.unlink()
    assert watcher.poll() == []
    clock.advance(2.1)
    assert watcher.poll() == [{"stack": "ana-main", "change": "deleted", "version": "deleted"}]


def test_a_save_with_the_mtime_set_back_is_a_new_version(settings_dir, clock, make_watcher):
    """The user sets the mtime (``touch -d 2100-01-01`` after each save): a later save of the same
    size dated the same is still a change with a new version (the ctime moves), so the master
    neither misses it nor takes it for an edit it already applied."""
    yml = settings_dir / "ana-main.yml"
    watcher = make_watcher(files_of(yml))
    dated = 4102444800 * 10**9  # 2100-01-01
    versions = []
    for nodes in ("node2", "node1"):
        write(yml, f"ana-main: {{DEPLOYMENT_NODES: [{nodes}]}}\n")
        os.utime(yml, ns=(dated, dated))
        assert watcher.poll() == []
        clock.advance(2.1)
        events = watcher.poll()
        assert [event["change"] for event in events] == ["modified"]
        versions.append(events[0]["version"])
        time.sleep(0.01)  # a later ctime (ns clock granularity)
    assert versions[0] != versions[1]
    assert all(version.startswith(f"{dated}:") for version in versions)


# --------------------------------------------------------------------------------------------
# The Salt wrapper


PILLAR_CONFIG = [{"from_pillar": "ccc"}, {"interval": 1}, {"disable_during_state_run": False}]


@pytest.fixture
def salt_dunders(monkeypatch):
    """The beacon's loader dunders, with the real ``ccc_containers`` execution functions on the
    same pillar (the beacon gets its file list from them, as on a minion)."""
    beacon_dunders(monkeypatch, beacon_mod, "watched_files")
    monkeypatch.setattr(beacon_mod._holder(), "pillar_health", {})  # process-wide, like the watchers
    monkeypatch.setattr(beacon_mod, "_CHECKED", {})
    yield beacon_mod
    beacon_mod.close([])


def set_pillar(monkeypatch, pillar):
    """What Salt's pillar refresh does to the beacon: a new pillar, a new beacon loader."""
    import ccc_containers

    monkeypatch.setattr(beacon_mod, "__pillar__", pillar)
    monkeypatch.setattr(ccc_containers, "__pillar__", pillar)
    monkeypatch.setattr(beacon_mod, "__context__", {})


@pytest.mark.parametrize("config", [
    PILLAR_CONFIG,
    PILLAR_CONFIG + [{"immediate": True}],
    [{"files": [{"stack": "ana-main", "path": "/srv/u/ana@example.org/container-settings/ana-main.yml"}]},
     {"quiet_period": 0.5}, {"poll_interval": 60}, {"max_delay": 5}, {"interval": 1}],
    [{"files": []}],
])
def test_validate_accepts(config, salt_dunders):
    assert beacon_mod.validate(config) == (True, "valid beacon configuration")


@pytest.mark.parametrize("config, message", [
    ({"from_pillar": "ccc"}, "list of one-key dicts"),
    ([{"from_pillar": "ccc"}, {"disable_during_state_run": True}], "disable_during_state_run"),
    ([{"from_pillar": "ccc"}, {"files": []}], "exactly one of"),
    ([{"interval": 1}], "exactly one of"),
    ([{"from_pillar": "ccc"}, {"settle": 2}], "unknown keys"),
    ([{"from_pillar": "ccc"}, {"quiet_period": -1}], "quiet_period"),
    ([{"from_pillar": "ccc"}, {"poll_interval": 0}], "poll_interval"),
    ([{"from_pillar": "ccc"}, {"max_delay": "10"}], "max_delay"),
    ([{"from_pillar": "ccc"}, {"immediate": "yes"}], "immediate must be true or false"),
    ([{"from_pillar": "site"}], "from_pillar must name a pillar key (ccc)"),
    ([{"files": [{"stack": "Ana Main", "path": "/x/Ana Main.yml"}]}], "invalid STACK_NAME"),
    ([{"files": [{"stack": "ana-main\n", "path": "/x/ana-main\n.yml"}]}], "invalid STACK_NAME"),
    ([{"files": [{"stack": "ana-main", "path": "relative/ana-main.yml"}]}], "must be absolute"),
    ([{"files": [{"stack": "ana-main", "path": "/x/ana-main.deploy"}]}], "end in /ana-main.yml"),
    ([{"files": [{"stack": "ana-main", "path": "/x/ana-main.yml"}, {"stack": "ana-main", "path": "/y/ana-main.yml"}]}],
     "listed twice"),
    ([{"files": [{"stack": "ana-main"}]}], "must be {stack, path}"),
])
def test_validate_refuses(config, message, salt_dunders):
    valid, comment = beacon_mod.validate(config)
    assert not valid
    assert message in comment


def test_validate_asks_the_deployment_once_per_file_list(salt_dunders, monkeypatch):
    """Salt validates a beacon's configuration before every call: the STACK_NAME check of an
    explicit list (the deployment's rule, through ccc_containers.watched_files) runs once."""
    calls = []
    real = beacon_mod.__salt__["ccc_containers.watched_files"]
    beacon_mod.__salt__["ccc_containers.watched_files"] = lambda **kwargs: calls.append(kwargs) or real(**kwargs)
    config = [{"files": [{"stack": "ana-main", "path": "/x/ana-main.yml"}]}]
    for _ in range(5):
        assert beacon_mod.validate(config)[0]
    assert len(calls) == 1
    del beacon_mod.__salt__["ccc_containers.watched_files"]
    beacon_mod._CHECKED.clear()
    valid, comment = beacon_mod.validate(config)
    assert not valid and "cannot check the STACK_NAMEs" in comment


def test_beacon_returns_tagged_events_and_close_releases(settings_dir, salt_dunders):
    yml = settings_dir / "ana-main.yml"
    config = [{"files": files_of(yml)}, {"quiet_period": 0}, {"disable_during_state_run": False},
              {"_beacon_name": "ccc_settings"}]
    assert beacon_mod.validate(config)[0]
    assert beacon_mod.beacon(config) == []
    write(yml, "ana-main: {SHM_SIZE: 4g}\n")
    (settings_dir / "ana-main.deploy").write_text("deployed\n")
    assert bare(beacon_mod.beacon(config)) == [{"tag": "ana-main", "stack": "ana-main", "change": "modified"}]
    assert beacon_mod.beacon(config) == []
    watcher = beacon_mod.__context__[beacon_mod.CONTEXT_KEY]["watcher"]
    beacon_mod.close(config)
    assert watcher.closed and beacon_mod.CONTEXT_KEY not in beacon_mod.__context__


def test_beacon_follows_an_explicit_file_list_change(settings_dir, salt_dunders):
    yml, gpu = settings_dir / "ana-main.yml", settings_dir / "ana-gpu.yml"
    assert beacon_mod.beacon([{"files": files_of(yml)}, {"quiet_period": 0}]) == []
    write(gpu, "ana-gpu: {}\n")
    assert beacon_mod.beacon([{"files": files_of(yml, gpu)}, {"quiet_period": 0}]) == []  # first sight
    write(gpu, "ana-gpu: {SHM_SIZE: 1g}\n")
    assert bare(beacon_mod.beacon([{"files": files_of(yml, gpu)}, {"quiet_period": 0}])) == [
        {"tag": "ana-gpu", "stack": "ana-gpu", "change": "modified"}]


def test_beacon_from_pillar_watches_this_nodes_stacks_with_site_tunables(tmp_path, salt_dunders):
    user_data = tmp_path / "user_data"
    ccc = {
        "cluster": {"mount_points": {"nfs": {"user_data": str(user_data)}},
                    "beacon": {"quiet_period": 0, "poll_interval": 45}},
        "user_types": {"researcher": {"allowed_nodes": ["node1"]}, "student": {"allowed_nodes": ["node3"]}},
        "users": {"ana@example.org": {"USER_TYPE": "researcher"}, "cene@example.org": {"USER_TYPE": "student"}},
        "containers": [{"STACK_NAME": "ana-main", "USER_EMAIL": "ana@example.org"},
                       {"STACK_NAME": "cene-thesis", "USER_EMAIL": "cene@example.org"}],
    }
    beacon_mod.__pillar__["ccc"] = ccc
    directory = user_data / "ana@example.org" / "container-settings"
    directory.mkdir(parents=True)
    write(directory / "ana-main.yml", "ana-main: {}\n")
    assert beacon_mod.beacon(PILLAR_CONFIG[:2]) == []
    watcher = beacon_mod.__context__[beacon_mod.CONTEXT_KEY]["watcher"]
    assert watcher.files == {"ana-main": str(directory / "ana-main.yml")}
    assert (watcher.quiet_period, watcher.poll_interval, watcher.max_delay) == (0, 45, 10.0)
    write(directory / "ana-main.yml", "ana-main: {SHM_SIZE: 2g}\n")
    assert bare(beacon_mod.beacon(PILLAR_CONFIG[:2])) == [{"tag": "ana-main", "stack": "ana-main", "change": "modified"}]


def test_a_node_without_stacks_keeps_one_idle_watcher(salt_dunders):
    assert beacon_mod.beacon([{"from_pillar": "ccc"}]) == []
    watcher = beacon_mod.__context__[beacon_mod.CONTEXT_KEY]["watcher"]
    assert beacon_mod.beacon([{"from_pillar": "ccc"}]) == []
    assert beacon_mod.__context__[beacon_mod.CONTEXT_KEY]["watcher"] is watcher
    assert watcher.files == {} and watcher._notifier is None  # no inotify descriptor at all


def test_a_pillar_that_names_no_user_data_root_watches_nothing_and_says_why(salt_dunders, monkeypatch):
    errors = []
    monkeypatch.setattr(beacon_mod.log, "error", lambda msg, *args: errors.append(msg % args))
    beacon_mod.__pillar__["ccc"] = {"cluster": {"mount_points": {"nfs": {"user_data": "relative"}}}}
    assert beacon_mod.beacon(PILLAR_CONFIG) == []
    assert beacon_mod.__context__[beacon_mod.CONTEXT_KEY]["watcher"].files == {}
    assert len(errors) == 1 and "not an absolute path" in errors[0]


def test_a_beacon_loader_rebuilt_without_close_loses_nothing(settings_dir, salt_dunders, monkeypatch):
    """Salt 3008 rebuilds the beacon loader (fresh __context__) on a pillar refresh without
    calling close() for pillar-configured beacons: the new watcher takes over the old one."""
    yml = settings_dir / "ana-main.yml"
    config = [{"files": files_of(yml)}, {"quiet_period": 0}]
    assert beacon_mod.beacon(config) == []
    old = beacon_mod.__context__[beacon_mod.CONTEXT_KEY]["watcher"]
    fd = old._notifier.fileno()
    write(yml, "ana-main: {SHM_SIZE: 4g}\n")
    monkeypatch.setattr(beacon_mod, "__context__", {})
    assert bare(beacon_mod.beacon(config)) == [{"tag": "ana-main", "stack": "ana-main", "change": "modified"}]
    assert old.closed
    new = beacon_mod.__context__[beacon_mod.CONTEXT_KEY]["watcher"]
    assert new is not old and new._notifier.fileno() != fd  # opened before the old one closed
    with pytest.raises(OSError):
        os.fstat(fd)


# --------------------------------------------------------------------------------------------
# Immediate delivery (the dispatch thread)


class Fired:
    """``event.fire`` as the minion's loader gives it: records what the thread fires."""

    def __init__(self, answer=True):
        self.answer, self.calls, self.threads = answer, [], set()

    def __call__(self, data, tag):
        self.calls.append((tag, data))
        self.threads.add(threading.current_thread().name)
        return self.answer

    def events(self):
        return [event for tag, data in self.calls if tag == "__beacons_return" for event in data["beacons"]]


def wait_until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not predicate():
        time.sleep(0.01)
    return predicate()


@pytest.fixture
def immediate(settings_dir, salt_dunders):
    """A beacon with ``immediate: true`` on ana-main.yml, called once (Salt calls it every second)."""
    fired = Fired()
    beacon_mod.__salt__["event.fire"] = fired
    config = [{"files": files_of(settings_dir / "ana-main.yml")}, {"quiet_period": 0.2}, {"immediate": True},
              {"_beacon_name": "ccc_settings"}]
    assert beacon_mod.validate(config)[0]
    assert beacon_mod.beacon(config) == []
    state = beacon_mod.__context__[beacon_mod.CONTEXT_KEY]
    return types.SimpleNamespace(fired=fired, config=config, state=state, yml=settings_dir / "ana-main.yml")


def test_immediate_fires_when_the_quiet_period_ends_as_salt_fires_beacon_events(immediate):
    written = time.monotonic()
    write(immediate.yml, "ana-main: {SHM_SIZE: 4g}\n")
    assert wait_until(lambda: immediate.fired.calls, timeout=2)
    latency = time.monotonic() - written
    st = os.stat(immediate.yml)
    # exactly what salt.beacons.Beacon.process makes of the beacon's return, for the minion to forward
    assert immediate.fired.calls == [("__beacons_return", {"beacons": [{
        "tag": "salt/beacon/node1/ccc_settings/ana-main",
        "data": {"stack": "ana-main", "change": "modified", "version": f"{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_size}:{st.st_ino}",
                 "id": "node1"},
        "beacon_name": "ccc_settings"}]})]
    assert 0.2 <= latency < 1.0, latency  # the quiet period, not a later call of the beacon
    assert immediate.fired.threads == {"ccc_settings-dispatch"}
    assert beacon_mod.beacon(immediate.config) == []  # fired once, not again by the call


def test_immediate_what_cannot_be_fired_comes_with_the_next_call(immediate):
    immediate.fired.answer = False  # the minion's event bus is not there
    write(immediate.yml, "ana-main: {SHM_SIZE: 4g}\n")
    assert wait_until(lambda: immediate.fired.calls, timeout=2)
    assert bare(beacon_mod.beacon(immediate.config)) == [{"tag": "ana-main", "stack": "ana-main", "change": "modified"}]
    assert beacon_mod.beacon(immediate.config) == []


def test_immediate_fires_nothing_for_a_beacon_salt_no_longer_calls(immediate, monkeypatch):
    """A disabled or removed beacon is not called any more: the thread stops firing (the next
    call, if any, returns the change)."""
    monkeypatch.setattr(beacon_mod.dispatch, "STALE_MIN", 0.3)
    time.sleep(0.5)  # no call for longer than the beacon counts as alive
    write(immediate.yml, "ana-main: {SHM_SIZE: 4g}\n")
    time.sleep(1.0)
    assert immediate.fired.calls == []
    assert bare(beacon_mod.beacon(immediate.config)) == [{"tag": "ana-main", "stack": "ana-main", "change": "modified"}]


def test_immediate_a_user_writing_other_files_in_a_loop_wakes_the_thread_a_bounded_number_of_times(immediate):
    """Every write in the settings folder wakes the thread; it looks at most every REST s, so a
    hostile loop costs the minion about as much as the beacon's calls ever did."""
    watcher = immediate.state["watcher"]
    looks, real_poll = [], watcher.poll
    watcher.poll = lambda stat=True: looks.append(stat) or real_poll(stat)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        write(immediate.yml.parent / "noise.txt", "x\n")
        beacon_mod.beacon(immediate.config)  # Salt keeps calling it (here far more often)
    thread_looks = looks.count(False)
    assert 3 <= thread_looks <= 1.0 / beacon_mod.dispatch.REST + 3, thread_looks
    assert immediate.fired.calls == []


def test_immediate_close_stops_the_thread_and_releases_the_descriptor(immediate):
    dispatcher, watcher = immediate.state["dispatcher"], immediate.state["watcher"]
    fd = watcher.fileno()
    assert dispatcher.thread.is_alive()
    beacon_mod.close(immediate.config)
    assert not dispatcher.thread.is_alive() and watcher.closed
    with pytest.raises(OSError):
        os.fstat(fd)


def test_immediate_a_rebuilt_loader_stops_the_orphans_thread_and_keeps_what_it_could_not_fire(immediate, monkeypatch):
    old = immediate.state
    old["returned"].append({"stack": "ana-main", "change": "modified", "version": "1:2:3"})
    monkeypatch.setattr(beacon_mod, "__context__", {})
    assert beacon_mod.beacon(immediate.config) == [{"tag": "ana-main", "stack": "ana-main", "change": "modified",
                                                     "version": "1:2:3"}]
    new = beacon_mod.__context__[beacon_mod.CONTEXT_KEY]
    assert not old["dispatcher"].thread.is_alive() and old["watcher"].closed
    assert new["dispatcher"].thread.is_alive() and new["dispatcher"] is not old["dispatcher"]
    write(immediate.yml, "ana-main: {SHM_SIZE: 4g}\n")
    assert wait_until(lambda: immediate.fired.calls, timeout=2)
    assert [e["tag"] for e in immediate.fired.events()] == ["salt/beacon/node1/ccc_settings/ana-main"]


def test_immediate_off_by_default_and_when_switched_off(settings_dir, salt_dunders):
    config = [{"files": files_of(settings_dir / "ana-main.yml")}, {"quiet_period": 0}]
    beacon_mod.__salt__["event.fire"] = Fired()
    beacon_mod.beacon(config)
    assert beacon_mod.__context__[beacon_mod.CONTEXT_KEY]["dispatcher"] is None
    beacon_mod.beacon(config + [{"immediate": True}])
    dispatcher = beacon_mod.__context__[beacon_mod.CONTEXT_KEY]["dispatcher"]
    assert dispatcher.thread.is_alive()
    beacon_mod.beacon(config + [{"immediate": False}])
    assert beacon_mod.__context__[beacon_mod.CONTEXT_KEY]["dispatcher"] is None and not dispatcher.thread.is_alive()


# --------------------------------------------------------------------------------------------
# A pillar with render errors


def _site_pillar(user_data, **extra):
    return {"ccc": {
        "cluster": {"mount_points": {"nfs": {"user_data": str(user_data)}},
                    "beacon": {"quiet_period": 0, "poll_interval": 1}},
        "user_types": {"researcher": {"allowed_nodes": ["node1"]}},
        "users": {"ana@example.org": {"USER_TYPE": "researcher"}},
        "containers": [{"STACK_NAME": "ana-main", "USER_EMAIL": "ana@example.org"}],
    }, **extra}


BROKEN = {"ccc": {"cluster": {}}, "_errors": ["Rendering SLS 'site.containers' failed: mapping values are not allowed here"]}


@pytest.fixture
def pillar_minion(tmp_path, salt_dunders, monkeypatch):
    """The beacon as a minion runs it: a fake clock, refresh requests and warnings recorded, and
    ``refresh(pillar)`` doing what Salt's pillar refresh does to a beacon (new pillar, new loader)."""
    clock = FakeClock()
    monkeypatch.setattr(beacon_mod, "time", type("Time", (), {"monotonic": staticmethod(clock)}))
    refreshes, warnings = [], []
    beacon_mod.__salt__["saltutil.refresh_pillar"] = lambda: refreshes.append(clock.now) or True
    logger = logging.getLogger("ccc-settings-beacon-pillar-test")
    logger.propagate = False
    logger.addHandler(type("Keep", (logging.Handler,), {
        "emit": lambda self, record: warnings.append(record.getMessage()) if record.levelno >= logging.WARNING else None})())
    monkeypatch.setattr(beacon_mod, "log", logger)

    def refresh(pillar):
        set_pillar(monkeypatch, pillar)

    settings = tmp_path / "user_data" / "ana@example.org" / "container-settings"
    settings.mkdir(parents=True, exist_ok=True)
    write(settings / "ana-main.yml", "ana-main: {}\n")
    beacon_mod.__pillar__.update(_site_pillar(tmp_path / "user_data"))
    return types.SimpleNamespace(clock=clock, refreshes=refreshes, warnings=warnings, refresh=refresh,
                                 yml=settings / "ana-main.yml", good=_site_pillar(tmp_path / "user_data"))


def test_a_broken_pillar_keeps_the_last_good_list_and_asks_for_refreshes_at_a_bounded_rate(pillar_minion):
    m = pillar_minion
    assert beacon_mod.beacon(PILLAR_CONFIG) == []
    assert beacon_mod.__context__[beacon_mod.CONTEXT_KEY]["watcher"].files == {"ana-main": str(m.yml)}
    m.refresh(BROKEN)  # an admin refreshed pillar while a site SLS was broken
    assert beacon_mod.beacon(PILLAR_CONFIG) == []
    watcher = beacon_mod.__context__[beacon_mod.CONTEXT_KEY]["watcher"]
    assert watcher.files == {"ana-main": str(m.yml)} and watcher.quiet_period == 0
    write(m.yml, "ana-main: {SHM_SIZE: 4g}\n")
    events = []
    for _ in range(60):  # one minute of beacon calls, one a second
        m.clock.advance(1)
        events += beacon_mod.beacon(PILLAR_CONFIG)
    assert bare(events) == [{"tag": "ana-main", "stack": "ana-main", "change": "modified"}]  # still fires
    assert watcher is beacon_mod.__context__[beacon_mod.CONTEXT_KEY]["watcher"]
    assert watcher.files == {"ana-main": str(m.yml)}  # the reconfiguration kept it too
    assert len(m.refreshes) == 6  # every max(poll_interval, 10 s), never every call
    assert all(b - a >= beacon_mod.PILLAR_RETRY_MIN for a, b in zip(m.refreshes, m.refreshes[1:]))
    assert len(m.warnings) == 1 and "render error" in m.warnings[0] and "mapping values" in m.warnings[0]
    m.refresh(dict(BROKEN))  # each requested refresh rebuilds the beacon: still one warning
    m.clock.advance(1)
    assert beacon_mod.beacon(PILLAR_CONFIG) == [] and len(m.warnings) == 1


def test_a_fixed_pillar_rebuilds_the_list_and_replays_the_changes_made_meanwhile(pillar_minion, tmp_path):
    m = pillar_minion
    assert beacon_mod.beacon(PILLAR_CONFIG) == []
    m.refresh(BROKEN)
    assert beacon_mod.beacon(PILLAR_CONFIG) == []
    write(m.yml, "ana-main: {SHM_SIZE: 4g}\n")
    m.clock.advance(1)
    assert bare(beacon_mod.beacon(PILLAR_CONFIG)) == [{"tag": "ana-main", "stack": "ana-main", "change": "modified"}]
    other = tmp_path / "user_data" / "ana@example.org" / "container-settings" / "ana-gpu.yml"
    write(other, "ana-gpu: {}\n")
    fixed = m.good
    fixed["ccc"]["containers"].append({"STACK_NAME": "ana-gpu", "USER_EMAIL": "ana@example.org"})
    m.refresh(fixed)  # the refresh the beacon asked for, after the admin fixed the SLS
    m.clock.advance(1)
    # replayed without a version: the master applies it even though it saw this version before
    assert beacon_mod.beacon(PILLAR_CONFIG) == [
        {"tag": "ana-main", "stack": "ana-main", "change": "modified", "replay": True}]
    watcher = beacon_mod.__context__[beacon_mod.CONTEXT_KEY]["watcher"]
    assert watcher.files == {"ana-main": str(m.yml), "ana-gpu": str(other)}
    assert "renders again" in m.warnings[-1]
    asked = len(m.refreshes)
    for _ in range(30):
        m.clock.advance(1)
        assert beacon_mod.beacon(PILLAR_CONFIG) == []  # replayed once only
    assert len(m.refreshes) == asked  # no more refresh requests
    write(other, "ana-gpu: {SHM_SIZE: 1g}\n")
    m.clock.advance(1)
    assert bare(beacon_mod.beacon(PILLAR_CONFIG)) == [{"tag": "ana-gpu", "stack": "ana-gpu", "change": "modified"}]


def test_a_change_fired_at_once_while_the_pillar_is_broken_is_replayed_too(pillar_minion):
    m = pillar_minion
    fired = Fired()
    beacon_mod.__salt__["event.fire"] = fired
    config = PILLAR_CONFIG + [{"immediate": True}]
    assert beacon_mod.beacon(config) == []
    m.refresh(BROKEN)
    assert beacon_mod.beacon(config) == []
    write(m.yml, "ana-main: {SHM_SIZE: 4g}\n")
    assert wait_until(lambda: fired.calls, timeout=2)  # the thread fired it
    m.refresh(m.good)
    m.clock.advance(1)
    assert beacon_mod.beacon(config) == [{"tag": "ana-main", "stack": "ana-main", "change": "modified", "replay": True}]


def test_a_pillar_broken_from_the_start_watches_what_it_names_until_it_renders(pillar_minion):
    m = pillar_minion
    m.refresh(dict(_site_pillar(m.yml.parents[2]), _errors=["Rendering SLS 'site.nodes.node1' failed"]))
    assert beacon_mod.beacon(PILLAR_CONFIG) == []
    assert beacon_mod.__context__[beacon_mod.CONTEXT_KEY]["watcher"].files == {"ana-main": str(m.yml)}
    m.clock.advance(beacon_mod.PILLAR_RETRY_MIN)
    beacon_mod.beacon(PILLAR_CONFIG)
    assert len(m.refreshes) == 1 and len(m.warnings) == 1


def test_an_explicit_file_list_ignores_pillar_errors(settings_dir, pillar_minion):
    m = pillar_minion
    m.refresh(BROKEN)
    config = [{"files": files_of(settings_dir / "ana-main.yml")}, {"quiet_period": 0}]
    for _ in range(20):
        m.clock.advance(1)
        assert beacon_mod.beacon(config) == []
    assert m.refreshes == [] and m.warnings == []


@pytest.mark.parametrize("how", ["from_pillar", "explicit list"])
def test_the_beacon_keeps_no_shared_module_in_the_minions_main_process(salt_dunders, monkeypatch, tmp_path, how):
    """The minion forks its jobs from the process that runs beacons: a shared module the beacon's
    call imported and kept there would shadow the one a later saltutil.sync_all writes. Both
    ways the beacon asks ``ccc_containers.watched_files``: for this node's list (``from_pillar``),
    and to check the STACK_NAMEs of an explicit list (``validate``, which Salt calls before each
    run of the beacon)."""
    utils = tmp_path / "extmods" / "utils"
    utils.mkdir(parents=True)
    (utils / "ccc_probe_shared.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(utils))
    monkeypatch.setattr(beacon_mod, "__opts__", {"id": "node1", "extension_modules": str(tmp_path / "extmods")})
    asked = []

    def watched_files(files=None):
        import ccc_probe_shared  # noqa: F401 - what an execution module does at its first load
        import ccc_probe_sibling  # noqa: F401 - not in a utils dir: kept
        asked.append(files)
        return {"files": [], "beacon": {}, "pillar_errors": [], "problems": []}

    (tmp_path / "ccc_probe_sibling.py").write_text("VALUE = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    beacon_mod.__salt__["ccc_containers.watched_files"] = watched_files
    if how == "from_pillar":
        assert beacon_mod.beacon(PILLAR_CONFIG) == []
    else:
        config = [{"files": files_of(tmp_path / "ana-main.yml")}]
        assert beacon_mod.validate(config) == (True, "valid beacon configuration")
        assert asked == [files_of(tmp_path / "ana-main.yml")]  # the execution function checked the list
    assert asked
    assert "ccc_probe_shared" not in sys.modules and "ccc_probe_sibling" in sys.modules
    del sys.modules["ccc_probe_sibling"]
