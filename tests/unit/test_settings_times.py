"""The settings file's times the deployment reads: never the mtime, which the user sets
(``touch -d 2100-01-01``); the ctime, which the kernel (the NFS server) sets on every change."""

import os
import time

import ccc_apply
import ccc_problems
import ccc_userdirs

DATED = 4102444800  # 2100-01-01


def test_a_settings_file_dated_2100_is_read_as_changed_when_it_really_was(tmp_path):
    folder = tmp_path / "container-settings"
    folder.mkdir()
    path = folder / "box.yml"
    before = time.time()
    path.write_text("box: {}\n")
    os.utime(path, (DATED, DATED))
    entry = {"root": str(tmp_path), "parts": ["container-settings"]}
    changed = ccc_userdirs.changed_at(entry, "box.yml")
    assert before - 1 <= changed <= time.time() + 1
    resolution = {"settings_status": "applied", "paths": {"settings_folder": entry, "settings_file": str(path)}}
    assert ccc_apply._settings_since(resolution) == changed
    assert ccc_userdirs.changed_at(entry, "gone.yml") is None


def test_dating_the_file_does_not_restart_a_crashed_container_on_every_reconcile(tmp_path):
    folder = tmp_path / "container-settings"
    folder.mkdir()
    (folder / "box.yml").write_text("box: {}\n")
    os.utime(folder / "box.yml", (DATED, DATED))
    finished = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 5))  # crashed after the save
    crashed = {"State": {"Status": "exited", "Running": False, "ExitCode": 1, "FinishedAt": finished,
                         "StartedAt": "2026-12-03T11:00:00Z"}, "RestartCount": 0}
    resolution = {"settings_status": "applied",
                  "paths": {"settings_folder": {"root": str(tmp_path), "parts": ["container-settings"]},
                            "settings_file": str(folder / "box.yml")}}
    assert ccc_problems.leave_stopped(crashed, ccc_apply._settings_since(resolution))
