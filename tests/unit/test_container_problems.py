"""A compute container's problems as its user reads them in ``~/.containers/<STACK>.deploy``
(``ccc_problems``, ``ccc_report``, ``ccc_feedback``) and what a reconcile does with a crashed
container whose spec did not change (``ccc_swap``): the user-facing lines, bounded and masked,
the boot status file read without following anything, and no start loop."""

import datetime
import os
import threading

import ccc_feedback  # noqa: E402
import ccc_problems  # noqa: E402
import ccc_redact  # noqa: E402
import ccc_report  # noqa: E402
import ccc_swap  # noqa: E402

NOW = datetime.datetime(2026, 12, 3, 12, 0, 0, tzinfo=datetime.timezone.utc)
SECRET = "s3cr3t-frp-token-42"


def attrs(running=False, restarting=False, code=1, restarts=0, oom=False, status=None,
          started="2026-12-03T11:59:00.123456789Z", finished="2026-12-03T11:59:30.5Z", spec_hash="h1"):
    return {
        "Id": "c0ffee", "RestartCount": restarts,
        "Config": {"Labels": {"ccc.spec-hash": spec_hash}, "Image": "vicoslab/ccc:base"},
        "State": {"Running": running or restarting, "Restarting": restarting, "ExitCode": code, "OOMKilled": oom,
                  "Status": status or ("restarting" if restarting else "running" if running else "exited"),
                  "StartedAt": started, "FinishedAt": finished},
        "NetworkSettings": {"Networks": {"lab": {}}},
    }


# --------------------------------------------------------------------------------------------
# what is a problem


def test_boot_status_lines_of_ccc_images():
    parse = ccc_problems.parse_boot_status
    assert parse(None) is None
    assert parse(b"booting 3\n") == ("booting", 3)
    assert parse(b"running\n") == ("running", None)
    assert parse(b"failed boot - running with last known working ENVs\n") == ("failed", None)
    assert parse(b"\xff garbage") == ("other", None)
    assert ccc_problems.boot_problem(("booting", 2)) is None  # the image may still be trying
    assert "boot attempt 3" in ccc_problems.boot_problem(("booting", 3))
    assert "last settings that worked" in ccc_problems.boot_problem(("failed", None))
    assert ccc_problems.boot_problem(("running", None)) is None


def test_docker_states_that_are_problems():
    problem = ccc_problems.container_problem
    assert "keeps crashing: it exited with code 1 and Docker restarted it 4 time(s)" in problem(
        attrs(restarting=True, restarts=4), NOW)
    assert "exited with code 1" in problem(attrs(code=1), NOW)
    assert "too much memory" in problem(attrs(code=137, oom=True), NOW)
    assert problem(attrs(code=143), NOW) is None  # stopped from outside (docker stop, dockerd stopping)
    assert problem(attrs(running=True), NOW) is None
    assert "restarted by Docker 5 times" in problem(attrs(running=True, restarts=5), NOW)
    long_ago = attrs(running=True, restarts=5, started="2026-12-01T00:00:00Z")
    assert problem(long_ago, NOW) is None  # running fine for days: old restarts are no news


def test_a_crashed_container_stays_stopped_until_the_user_saves_the_settings():
    crashed = attrs(code=1, finished="2026-12-03T11:59:30Z")
    finished = datetime.datetime(2026, 12, 3, 11, 59, 30, tzinfo=datetime.timezone.utc).timestamp()
    assert ccc_problems.leave_stopped(crashed)
    assert ccc_problems.leave_stopped(crashed, retry_since=finished - 60)  # saved before the crash
    assert not ccc_problems.leave_stopped(crashed, retry_since=finished + 5)  # saved after: one more try
    assert not ccc_problems.leave_stopped(attrs(code=143))  # dockerd stopped it: start it again
    assert not ccc_problems.leave_stopped(attrs(code=0, status="created"))
    # after a reboot Docker could not start it (its pinned bind sources are gone): never ran, start it
    unstartable = attrs(code=128)
    unstartable["State"]["Error"] = "error while creating mount source path '/run/ccc-salt/binds/x': no such file"
    assert not ccc_problems.leave_stopped(unstartable)


# --------------------------------------------------------------------------------------------
# log lines


def test_log_lines_are_masked_one_line_each_and_bounded():
    raw = ("\n".join(f"line {n}" for n in range(100)) + "\n"
           f"token={SECRET} \x1b[31mred\x1b[0m bell\x07 tab\there\r\n" + "x" * 1000 + "\n").encode()
    lines = ccc_problems.log_lines(raw, [SECRET])
    assert len(lines) == ccc_problems.LOG_LINES
    assert lines[-2] == "token=*** red bell tab    here"
    assert lines[-1].endswith("…") and len(lines[-1]) == ccc_problems.LINE_CHARS
    assert lines[0] == "line 72"  # the newest 30 lines
    assert all(SECRET not in line for line in lines)


def test_log_lines_stay_within_the_byte_budget():
    raw = b"".join(b"%03d " % n + b"y" * 300 + b"\n" for n in range(30))
    lines = ccc_problems.log_lines(raw, [])
    assert sum(len(line.encode()) + 1 for line in lines) <= ccc_problems.LOG_BYTES
    assert lines[-1].startswith("029 ")


def test_a_secret_split_across_no_line_is_masked_before_clipping():
    raw = (b"a" * 230 + SECRET.encode() + b"\n")
    (line,) = ccc_problems.log_lines(raw, [SECRET])
    assert "s3cr3t" not in line and line.startswith("a" * 230 + "***")


# --------------------------------------------------------------------------------------------
# masked: only what the container was given, in the text's normal form


GIVEN = "hf_given_token_5e2a"


def test_a_container_is_masked_with_the_values_it_was_given_and_nothing_else():
    spec = {"environment": {"USER_NAME": "ana", "CONTAINER_NAME": "ana-main", "HF_TOKEN": GIVEN, "DEBUG": "1",
                            "INSTALL_PACKAGES": "htop vim"},
            "labels": {"frp.6006.http.password": "change-me", "frp.6006.http.username": "ana", "ccc.stack": "ana-main"}}
    assert ccc_redact.given_secrets(spec) == [GIVEN, "change-me"]  # a flag like "1" would blank every digit
    assert ccc_redact.given_secrets({}) == []


def test_values_split_by_escapes_and_controls_are_masked_after_normalising():
    given = GIVEN[:5], GIVEN[5:]
    raw = "\n".join([
        f"plain {GIVEN}",
        f"ansi {given[0]}\x1b[1;31m{given[1]}\x1b[0m",
        f"osc \x1b]0;window title\x07{given[0]}\x1b]8;;http://x\x1b\\{given[1]}",
        f"nul {given[0]}\x00{given[1]}\x07",
        f"zero-width {given[0]}\u200b\u202e{given[1]}",
        f"backspace {given[0]}X\b{given[1]}",
        f"return ----------------------------------\rreturn {GIVEN}",
        f"overwritten {GIVEN}\r{'#' * 40}",  # a terminal shows only the hashes: so does the report
        "guess: admin monitor demo-monitor-password",
    ]).encode()
    lines = ccc_problems.log_lines(raw, [GIVEN])
    assert lines == ["plain ***", "ansi ***", "osc ***", "nul ***", "zero-width ***", "backspace ***",
                     "return ***" + "-" * 15, "#" * 40,
                     "guess: admin monitor demo-monitor-password"]  # not given: shown as it is, no oracle


def test_the_normal_form_is_what_a_terminal_shows():
    screen = ccc_problems.screen_line
    assert screen("10%\r20%\r100%") == "100%"  # a progress bar is its last state, not three lines
    assert screen("spin |\b/\b-\bdone") == "spin done"
    assert screen("a\tb\x1b[2K\x1b(B\x7f\x9b31mc\u2028") == "a    bc"
    assert screen("\x1b]0;unterminated title") == ""


# --------------------------------------------------------------------------------------------
# the log is read for a new problem only; a boot status the user writes cannot force reads


def test_a_known_problem_keeps_its_lines_and_only_a_new_one_reads_the_log(tmp_path):
    folder, path = folder_of(tmp_path)
    client = Logs(f"first crash {GIVEN}\n")
    crash = attrs(restarting=True, restarts=3)
    first = ccc_problems.observe(client, crash, folder, "box", [GIVEN], NOW)
    assert first["log"] == ["first crash ***"] and len(client.calls) == 1 and "log_as_of" not in first
    client.text = "later lines\n"
    again = ccc_problems.observe(client, crash, folder, "box", [GIVEN], NOW, last_log=first["log_record"])
    assert again["log"] == ["first crash ***"] and len(client.calls) == 1  # the same problem: not read
    worse = ccc_problems.observe(client, attrs(restarting=True, restarts=4), folder, "box", [GIVEN], NOW,
                                 last_log=first["log_record"])
    assert worse["log"] == ["later lines"] and len(client.calls) == 2  # Docker restarted it again: read


def test_a_changing_status_file_reads_the_log_at_most_every_interval(tmp_path):
    folder, path = folder_of(tmp_path)
    client = Logs("boot output 1\n")
    running = attrs(running=True)
    (path / "box.status").write_text("booting 3\n")
    first = ccc_problems.observe(client, running, folder, "box", [], NOW)
    assert first["log"] == ["boot output 1"] and len(client.calls) == 1
    client.text = "guess 2\n"
    soon = NOW + datetime.timedelta(seconds=ccc_problems.BOOT_LOG_INTERVAL_S - 1)
    for line in ("booting 4\n", "failed boot - running with last known working ENVs\n"):
        (path / "box.status").write_text(line)
        shown = ccc_problems.observe(client, running, folder, "box", [], soon, last_log=first["log_record"])
        assert shown["log"] == ["boot output 1"] and shown["log_as_of"] == "2026-12-03 12:00:00 UTC"
        assert shown["log_record"] == first["log_record"]
        assert "last log lines (as read at 2026-12-03 12:00:00 UTC; " in "\n".join(ccc_report.problem_lines(shown))
    assert len(client.calls) == 1
    later = ccc_problems.observe(client, running, folder, "box", [], soon + datetime.timedelta(seconds=1),
                                 last_log=first["log_record"])
    assert later["log"] == ["guess 2"] and "log_as_of" not in later and len(client.calls) == 2
    assert ccc_problems.stored_log({"summary": "x", "read": True, "lines": []}) is None  # a record is checked
    assert ccc_problems.stored_log({"summary": "x", "read": 1, "lines": ["a", 2]}) is None


def test_the_lines_read_are_kept_in_roots_record_across_reports_without_a_problem(tmp_path):
    (tmp_path / "state").mkdir()
    folder, _ = folder_of(tmp_path / "f")
    told, path = resolution(tmp_path)
    problem = ccc_problems.observe(Logs("boom\n"), attrs(code=1), folder, "box", [], NOW)
    assert ccc_feedback.write_report(dict(told, problem=problem), "left stopped", None)
    assert ccc_feedback.last_log(told) == problem["log_record"]
    assert ccc_feedback.write_report(told, "started", None)  # no problem now: the last read is still known
    assert ccc_feedback.last_log(told) == problem["log_record"]
    assert "problem:" not in (path / "box.deploy").read_text()


# --------------------------------------------------------------------------------------------
# the status file is the user's: read by descriptor, never followed, never blocking


def folder_of(tmp_path):
    (tmp_path / "u@x.org" / "container-settings").mkdir(parents=True)
    return {"root": str(tmp_path), "parts": ["u@x.org", "container-settings"]}, tmp_path / "u@x.org" / "container-settings"


def test_the_status_file_is_read_when_it_is_a_small_regular_file(tmp_path):
    folder, path = folder_of(tmp_path)
    assert ccc_problems.read_boot_status(folder, "box") == (None, None)
    (path / "box.status").write_text("booting 4\n")
    assert ccc_problems.read_boot_status(folder, "box") == (("booting", 4), None)
    (path / "box.status").write_text("booting 4\n" * 100)
    status, note = ccc_problems.read_boot_status(folder, "box")
    assert status is None and "limit is 256 bytes" in note


def test_a_fifo_or_a_symlink_as_status_file_is_ignored_without_blocking(tmp_path):
    folder, path = folder_of(tmp_path)
    os.mkfifo(path / "box.status")
    done = []
    reader = threading.Thread(target=lambda: done.append(ccc_problems.read_boot_status(folder, "box")), daemon=True)
    reader.start()
    reader.join(5)
    assert done and done[0][0] is None and "not a regular file" in done[0][1]
    os.unlink(path / "box.status")
    outside = tmp_path / "root-only"
    outside.write_text("failed boot - running with last known working ENVs\n")
    os.symlink(outside, path / "box.status")
    status, note = ccc_problems.read_boot_status(folder, "box")
    assert status is None and "symbolic link" in note


def test_a_symlinked_settings_folder_is_not_followed(tmp_path):
    folder, path = folder_of(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "box.status").write_text("booting 9\n")
    path.rmdir()
    os.symlink(tmp_path / "elsewhere", path)
    status, note = ccc_problems.read_boot_status(folder, "box")
    assert status is None and note and "not read" in note


# --------------------------------------------------------------------------------------------
# the report


class Logs:
    """Docker's log endpoint, faked at the SDK call (no engine here): the last lines asked for."""

    def __init__(self, text):
        self.text, self.calls = text, []

        class Api:
            def logs(api, container, **kwargs):  # noqa: N805 - a stand-in for the SDK's APIClient
                self.calls.append((container, kwargs))
                return iter([self.text.encode()])
        self.api = Api()


def resolution(tmp_path, problem=None):
    folder, path = folder_of(tmp_path)
    return {
        "stack": "box", "node": "node1", "placement": ["node1"], "settings_status": "applied", "user_messages": [],
        "paths": {"settings_folder": folder, "feedback_file": str(path / "box.deploy"),
                  "last_good_file": str(tmp_path / "state" / "last-good" / "box.json")},
        "problem": problem,
    }, path


def test_the_report_says_what_is_wrong_what_to_do_and_shows_the_masked_log(tmp_path):
    (tmp_path / "state").mkdir()
    client = Logs(f"installing packages\nE: Unable to locate package nosuchpkg\nkey={SECRET}\n")
    folder, _ = folder_of(tmp_path / "f")
    problem = ccc_problems.observe(client, attrs(restarting=True, restarts=3), folder, "box", [SECRET], NOW)
    assert client.calls == [("c0ffee", {"stdout": True, "stderr": True, "tail": 30, "stream": True, "follow": False})]
    told, path = resolution(tmp_path, problem)
    assert ccc_feedback.write_report(told, "left as it is: it crashed", None, changed=False)
    text = (path / "box.deploy").read_text()
    assert "problem: it keeps crashing: it exited with code 1 and Docker restarted it 3 time(s)" in text
    assert "what you can do: read the log lines below; fix or undo your last change in ~/.containers/box.yml" in text
    assert "  | E: Unable to locate package nosuchpkg\n  | key=***\n" in text
    assert SECRET not in text
    record = ccc_feedback.read_deploy_record(str(tmp_path / "state"), "box", "node1")
    assert record["result"] == "left as it is: it crashed" and record["problem"].startswith("it keeps crashing")


def test_a_no_op_run_rewrites_the_report_when_the_problem_changed_and_only_then(tmp_path):
    (tmp_path / "state").mkdir()
    told, path = resolution(tmp_path)
    assert ccc_feedback.write_report(told, "running, unchanged", None)
    assert not ccc_feedback.write_report(told, "running, unchanged", None, changed=False)
    problem = {"summary": "it stopped: it exited with code 1", "advice": "fix it", "log": ["boom"]}
    assert ccc_feedback.write_report(dict(told, problem=problem), "left stopped", None, changed=False)
    assert "  | boom" in (path / "box.deploy").read_text()
    assert not ccc_feedback.write_report(dict(told, problem=problem), "left stopped", None, changed=False)
    assert ccc_feedback.write_report(told, "started", None, changed=False)  # the problem is gone: told too
    assert "problem:" not in (path / "box.deploy").read_text()


def test_a_status_file_swapped_for_a_link_is_noted_in_the_report(tmp_path):
    folder, path = folder_of(tmp_path)
    os.symlink("/etc/shadow", path / "box.status")
    problem = ccc_problems.observe(Logs(""), attrs(running=True), folder, "box", [], NOW)
    assert problem == {"summary": None, "note": "status file ignored: box.status is a symbolic link; it must be a regular file"}
    assert ccc_report.problem_lines(problem) == [f"boot status: {problem['note']}"]


# --------------------------------------------------------------------------------------------
# no start loop for a crashed container with an unchanged spec


class Engine:
    """Docker's API at the calls ``ccc_swap`` makes for an unchanged spec (faked: no engine)."""

    def __init__(self):
        self.calls = []
        engine = self

        class Api:
            def start(api, container_id):  # noqa: N805
                engine.calls.append(("start", container_id))

            def connect_container_to_network(api, container_id, network):  # noqa: N805
                engine.calls.append(("connect", container_id, network))
        self.api = Api()


SPEC = {"name": "box", "networks": ["lab"], "labels": {"ccc.spec-hash": "h1"}}


def test_an_unchanged_crash_looping_container_is_left_to_docker():
    engine = Engine()
    changes = {}
    outcome = ccc_swap.run(engine, SPEC, attrs(restarting=True, restarts=7), changes)
    assert engine.calls == [] and changes == {} and outcome.startswith("left as it is: it crashed")


def test_an_unchanged_crashed_container_is_not_started_again_until_the_user_saves():
    engine, changes = Engine(), {}
    crashed = attrs(code=1, finished="2026-12-03T11:59:30Z")
    assert ccc_swap.run(engine, SPEC, crashed, changes).startswith("left stopped: it crashed")
    assert engine.calls == [] and changes == {}
    saved = datetime.datetime(2026, 12, 3, 12, 0, tzinfo=datetime.timezone.utc).timestamp()
    assert ccc_swap.run(engine, SPEC, crashed, changes, retry_since=saved) == "started (it was stopped)"
    assert engine.calls == [("start", "c0ffee")]


def test_a_container_dockerd_stopped_is_started_again():
    engine, changes = Engine(), {}
    assert ccc_swap.run(engine, SPEC, attrs(code=143), changes) == "started (it was stopped)"
    assert engine.calls == [("start", "c0ffee")] and changes == {"started": True}
