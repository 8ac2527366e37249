"""``~/.containers/<STACK>.deploy`` says what runs (``ccc_feedback.write_report``): a run that
changed nothing keeps the report of what last happened, but not when that report, written by
this node, describes other settings than the running ones (a recreate that a killed minion left
half done and the next run finished: that run changes nothing itself) or a failure that is over.
Another node's report is kept (a move, a stack placed on several nodes), so no two nodes flap."""

import ccc_feedback  # noqa: E402


def spec(shm_gib):
    return {"image": "img:1", "device_ids": [], "shm_size": shm_gib * 1024**3,
            "environment": {"INSTALL_PACKAGES": ""}, "exposed_ports": []}


def resolution(tmp_path, node="node1", shm_gib=1, messages=()):
    folder = tmp_path / "u@x.org" / "container-settings"
    folder.mkdir(parents=True, exist_ok=True)
    (tmp_path / "state").mkdir(exist_ok=True)
    return {
        "stack": "box", "node": node, "placement": ["node1", "node2"], "settings_status": "applied",
        "user_messages": list(messages), "spec": spec(shm_gib),
        "paths": {"settings_folder": {"root": str(tmp_path), "parts": ["u@x.org", "container-settings"]},
                  "feedback_file": str(folder / "box.deploy"),
                  "last_good_file": str(tmp_path / "state" / "last-good" / "box.json")},
    }


def report(tmp_path):
    return (tmp_path / "u@x.org" / "container-settings" / "box.deploy").read_text()


def test_a_no_op_run_keeps_what_last_happened_when_it_still_describes_what_runs(tmp_path):
    assert ccc_feedback.write_report(resolution(tmp_path), "recreated with the new settings", None)
    assert not ccc_feedback.write_report(resolution(tmp_path), "running, unchanged", None, changed=False)
    assert "result: recreated with the new settings" in report(tmp_path)


def test_a_no_op_run_rewrites_a_report_of_this_node_that_describes_the_previous_settings(tmp_path):
    """The killed minion's run started the 4g container and died before its report; the next
    run finishes the swap, changes nothing itself, and must not leave the 1g report."""
    assert ccc_feedback.write_report(resolution(tmp_path, shm_gib=1), "recreated with the new settings", None)
    assert ccc_feedback.write_report(resolution(tmp_path, shm_gib=4), "running, unchanged", None, changed=False)
    text = report(tmp_path)
    assert "shm_size: 4g" in text and "shm_size: 1g" not in text, text


def test_a_no_op_run_replaces_a_failure_this_node_reported(tmp_path):
    failed = "NOT deployed on node1: the Docker engine does not answer (the admins were told)"
    assert ccc_feedback.write_report(resolution(tmp_path), failed, None)
    assert ccc_feedback.write_report(resolution(tmp_path), "running, unchanged", None, changed=False)
    assert "result: running, unchanged" in report(tmp_path)


def test_another_nodes_report_is_kept_by_a_no_op_run(tmp_path):
    moved = "moved to node1 (running on node1); the copy on node2 was removed"
    assert ccc_feedback.write_report(resolution(tmp_path, node="node2", shm_gib=2), moved, None)
    assert not ccc_feedback.write_report(resolution(tmp_path, shm_gib=4), "running, unchanged", None, changed=False)
    assert f"result: {moved}" in report(tmp_path)


def test_new_messages_are_always_told(tmp_path):
    assert ccc_feedback.write_report(resolution(tmp_path), "running, unchanged", None)
    told = resolution(tmp_path, messages=["your settings file was rejected: SHM_SIZE"])
    assert ccc_feedback.write_report(told, "running, unchanged", None, changed=False)
    assert "SHM_SIZE" in report(tmp_path)
