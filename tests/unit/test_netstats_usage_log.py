"""The usage log (ccc_usage_log): the original's line format, the folder and file it makes on
shared storage, what it refuses to write through (symlinks, FIFOs, hard links), the
``ccc:usage`` settings; and what ``salt-run ccc.active_users`` makes of the nodes' answers."""

import datetime
import errno
import os

import ccc_active_users
import ccc_safefs
import ccc_usage_log
import pytest

OWNER = (os.getuid(), os.getgid())


def test_line_is_the_originals_now_colon_tab_rx_tab_tx():
    now = datetime.datetime(2024, 5, 1, 12, 0, 3, 123456)
    assert ccc_usage_log.line(5265937, 10494262, now) == "2024-05-01 12:00:03.123456:\t5265937\t10494262\n"
    assert ccc_usage_log.log_name("ana-main", "node1") == "ana-main-node1.log"


def test_appends_lines_to_a_new_folder_and_file(tmp_path):
    fd = ccc_usage_log.open_folder(str(tmp_path), OWNER)
    try:
        ccc_usage_log.append(fd, "ana-main-node1.log", "a:\t1\t2\n", OWNER)
        ccc_usage_log.append(fd, "ana-main-node1.log", "b:\t3\t4\n", OWNER)
    finally:
        os.close(fd)
    folder = tmp_path / "container-net-statistics"
    assert oct(folder.stat().st_mode & 0o7777) == "0o755"
    log = folder / "ana-main-node1.log"
    assert log.read_text() == "a:\t1\t2\nb:\t3\t4\n"
    assert oct(log.stat().st_mode & 0o7777) == "0o644"
    assert (log.stat().st_uid, log.stat().st_gid) == OWNER


def test_a_missing_storage_root_is_never_created(tmp_path):
    with pytest.raises(FileNotFoundError):
        ccc_usage_log.open_folder(str(tmp_path / "not-mounted"), OWNER)
    assert not (tmp_path / "not-mounted").exists()


def test_a_symlinked_folder_is_refused(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "storage").mkdir()
    (tmp_path / "storage" / "container-net-statistics").symlink_to(target)
    with pytest.raises(ccc_safefs.UnsafePath, match="symbolic link"):
        ccc_usage_log.open_folder(str(tmp_path / "storage"), OWNER)
    assert list(target.iterdir()) == []


@pytest.mark.parametrize("plant", ["symlink", "dangling", "fifo", "hardlink", "folder"])
def test_a_planted_log_file_is_never_written_through(tmp_path, plant):
    victim = tmp_path / "victim"
    victim.write_text("root's file\n")
    fd = ccc_usage_log.open_folder(str(tmp_path), OWNER)
    log = tmp_path / "container-net-statistics" / "ana-main-node1.log"
    if plant == "symlink":
        log.symlink_to(victim)
    elif plant == "dangling":
        log.symlink_to(tmp_path / "would-be-created")
    elif plant == "fifo":
        os.mkfifo(log)
    elif plant == "hardlink":
        os.link(victim, log)
    else:
        log.mkdir()
    try:
        with pytest.raises(ccc_safefs.UnsafePath) as raised:
            ccc_usage_log.append(fd, "ana-main-node1.log", "x:\t1\t2\n", OWNER)
    finally:
        os.close(fd)
    assert raised.value.errno in (errno.ELOOP, errno.EINVAL)
    assert "nothing written" in str(raised.value)
    assert victim.read_text() == "root's file\n"
    assert not (tmp_path / "would-be-created").exists()


def test_settings_defaults_and_checks():
    assert ccc_usage_log.settings({}) == {"accounting": True, "interval_hours": 12}
    assert ccc_usage_log.settings({"usage": {"accounting": False, "interval_hours": 0.5}}) == {
        "accounting": False, "interval_hours": 0.5}
    for bad, message in (({"interval_hours": 0}, "interval_hours"), ({"interval_hours": "12h"}, "interval_hours"),
                         ({"accounting": "yes"}, "accounting"), ({"hours": 1}, "unknown keys")):
        with pytest.raises(ValueError, match=message):
            ccc_usage_log.settings({"usage": bad})


def test_active_users_report_lists_sessions_and_nodes_that_could_not_tell():
    returns = {
        "node1": {"ret": {"ana-main": {"user": "ana@example.org", "node": "node1", "sessions": 2, "peers": []},
                          "bor-main": {"user": "bor@example.org", "node": "node1", "sessions": 0, "peers": []}},
                  "retcode": 0},
        "node2": {"ret": {"ana-main": {"user": "ana@example.org", "node": "node2", "sessions": 1, "peers": []},
                          "cene-box": {"user": "cene@example.org", "node": "node2", "sessions": 0, "peers": [],
                                       "truncated": True}},
                  "retcode": 0},
        "node3": False,
        "node4": {"ret": "ERROR: the Docker engine of this node does not answer (unix:///x)", "retcode": 1},
    }
    result = ccc_active_users.report(returns)
    assert result["users"] == [
        {"user": "ana@example.org", "stack": "ana-main", "node": "node1", "sessions": 2},
        {"user": "ana@example.org", "stack": "ana-main", "node": "node2", "sessions": 1},
        {"user": "cene@example.org", "stack": "cene-box", "node": "node2", "sessions": 0,  # its table was cut
         "sessions_at_least": "its connection tables are longer than a node reads: it may have more sessions"},
    ]
    assert result["nodes"] == {"node1": "ok", "node2": "ok", "node3": "did not answer",
                               "node4": "ERROR: the Docker engine of this node does not answer (unix:///x)"}
    assert result["retcode"] == 1
    assert ccc_active_users.report({"node1": {"ret": {}, "retcode": 0}}) == {
        "users": [], "nodes": {"node1": "ok"}, "retcode": 0}


@pytest.mark.parametrize("override, expected", [
    (None, ("present", 12 * 3600)),
    ('pillar={"ccc": {"usage": {"interval_hours": 0.5}}}', ("present", 1800)),
    ('pillar={"ccc": {"usage": {"accounting": false}}}', ("absent", None)),
])
def test_the_containers_formula_keeps_the_accounting_schedule(tmp_path, override, expected):
    from support.site import SaltNode

    salt = SaltNode(tmp_path, "node1", "unix:///nonexistent.sock", tmp_path / "storage")
    rendered, code = salt.salt_call("state.show_sls", "containers", *([override] if override else []))
    assert code == 0, rendered
    state = rendered["ccc-containers-usage-accounting"]["schedule"]
    args = {k: v for item in state if isinstance(item, dict) for k, v in item.items()}
    assert expected[0] in state and args["name"] == "ccc-usage-accounting"
    assert args.get("seconds") == expected[1] and args["offline"] is True  # salt-call --local: no daemon
    if expected[0] == "present":
        assert args["function"] == "ccc_usage.collect" and args["maxrunning"] == 1
