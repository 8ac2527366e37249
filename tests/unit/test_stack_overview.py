"""The per-stack part of ``salt-run ccc.status`` (``ccc_stack_overview``): what an admin reads per
node and stack (state, uptime, image, GPUs, last deploy, the problem now or what the user was
last told) and the data ``--out=json`` gives, from the nodes' answers."""

import datetime

import ccc_stack_overview  # noqa: E402

NOW = datetime.datetime(2026, 12, 3, 12, 0, 0, tzinfo=datetime.timezone.utc)
GPU = "GPU-5f1c2a64-8a1e-4b7e-9d1e-0c0a11110001"


def inspect(running=True, restarting=False, code=0, started="2026-12-03T09:30:00.5Z"):
    return {
        "Id": "abc", "RestartCount": 2 if restarting else 0,
        "Config": {"Image": "vicoslab/ccc:base-latest", "Labels": {}, "Env": [], "ExposedPorts": {}},
        "State": {"Running": running or restarting, "Restarting": restarting, "ExitCode": code,
                  "Status": "running" if running else "exited", "StartedAt": started},
        "HostConfig": {"DeviceRequests": [{"DeviceIDs": [GPU]}], "Mounts": [], "ShmSize": 0,
                       "RestartPolicy": {"Name": "unless-stopped"}},
        "NetworkSettings": {"Networks": {}},
    }


def test_a_running_container_shows_where_what_and_since_when():
    record = {"when": "2026-12-03 09:29:58 UTC", "result": "created and started", "problem": None}
    item = ccc_stack_overview.entry(inspect(), None, record, NOW)
    assert item == {
        "state": "running", "image": "vicoslab/ccc:base-latest", "gpus": [GPU],
        "started": "2026-12-03 09:30:00 UTC", "uptime_s": 8999, "restarts": 0,
        "last_deploy": {"when": "2026-12-03 09:29:58 UTC", "result": "created and started"},
        "message": None, "problem": None,
    }
    assert ccc_stack_overview.line("node1", "ana-main", item) == (
        f"node1 ana-main: running 2h 29m; image vicoslab/ccc:base-latest; gpus {GPU}; "
        "last deploy 2026-12-03 09:29:58 UTC: created and started")


def test_a_crash_looping_container_is_a_problem_first_and_fails_the_status():
    broken = ccc_stack_overview.entry(inspect(restarting=True, code=1), {"summary": "it keeps crashing: code 1"},
                                      {"when": "w", "result": "left as it is", "problem": "it keeps crashing: code 1"},
                                      NOW)
    fine = ccc_stack_overview.entry(inspect(), None, None, NOW)
    assert broken["state"] == "restarting" and broken["uptime_s"] is None
    result = ccc_stack_overview.merge({"health": ["node1: ok (1 service)"], "retcode": 0},
                                      {"node1": {"ana-main": fine}, "node2": {"bor-main": broken}},
                                      {"node3": "'ccc_docker.overview' is not available."}, ["node4"])
    assert result["retcode"] == 1 and result["health"] == ["node1: ok (1 service)"]
    assert result["containers"][0].startswith("node2 bor-main: restarting; image vicoslab/ccc:base-latest")
    assert result["containers"][0].endswith("; PROBLEM: it keeps crashing: code 1")
    assert result["containers"][1:3] == ["node3: containers not told: 'ccc_docker.overview' is not available.",
                                         "node4: containers: did not answer"]
    assert result["containers"][3].startswith("node1 ana-main: running 2h 29m")
    assert result["stacks"] == {"ana-main": {"node1": fine}, "bor-main": {"node2": broken}}


def test_what_the_user_was_last_told_shows_when_there_is_no_problem_now():
    item = ccc_stack_overview.entry(inspect(), None, {"when": "w", "result": "started", "problem": "it stopped"}, NOW)
    assert ccc_stack_overview.line("n", "s", item).endswith("; last told: it stopped")
    result = ccc_stack_overview.merge({"retcode": 0}, {"n": {"s": item}}, {}, [])
    assert result["retcode"] == 0  # a past problem alone does not fail the status


def test_a_stopped_container_fails_the_status_and_no_answer_does_not():
    stopped = ccc_stack_overview.entry(inspect(running=False, code=143), None, None, NOW)
    assert stopped["state"] == "exited (code 143)"
    assert ccc_stack_overview.merge({"retcode": 0}, {"n": {"s": stopped}}, {}, [])["retcode"] == 1
    assert ccc_stack_overview.merge({"retcode": 0}, {}, {}, ["n"])["retcode"] == 0


def test_a_stack_placed_here_without_a_container_is_missing_and_fails_the_status(tmp_path, monkeypatch):
    """The node's last deploy placed ana-main here but refused it (no container was ever made):
    the overview lists it as missing with what the user was told. A stack moved away, and one
    taken out of pillar, are not listed."""
    import ccc_feedback
    import ccc_node_record

    state_dir = tmp_path / "state"
    ccc = {"cluster": {"state_dir": str(state_dir)},
           "users": {"ana@example.org": {"USER_TYPE": "student"}},
           "containers": [{"STACK_NAME": "ana-main", "USER_EMAIL": "ana@example.org"},
                          {"STACK_NAME": "ana-moved", "USER_EMAIL": "ana@example.org"}]}

    def deployed(stack, action, placement, outcome):
        ccc_feedback.record_deploy({"stack": stack, "node": "node1", "action": action, "placement": placement,
                                    "paths": {"last_good_file": str(state_dir / "last-good" / f"{stack}.json")}},
                                   outcome, "2026-12-03 11:00:00 UTC")

    state_dir.mkdir()
    deployed("ana-main", "hold", ["node1"], "NOT deployed: the image is not allowed")
    deployed("ana-moved", "remove", ["node2"], "removed: moved to node2")
    deployed("gone-stack", "run", ["node1"], "created and started")  # no longer in pillar
    monkeypatch.setattr(ccc_node_record, "managed_containers", lambda client: {})
    found = ccc_stack_overview.gather(None, ccc, "node1", now=NOW)
    assert found == {"ana-main": {
        "state": "missing", "image": None, "gpus": [], "started": None, "uptime_s": None, "restarts": 0,
        "last_deploy": {"when": "2026-12-03 11:00:00 UTC", "result": "NOT deployed: the image is not allowed"},
        "message": None, "problem": "placed on this node but no container is there"}}
    result = ccc_stack_overview.merge({"retcode": 0}, {"node1": found}, {}, [])
    assert result["retcode"] == 1
    assert result["containers"] == [
        "node1 ana-main: missing; image ?; gpus none; last deploy 2026-12-03 11:00:00 UTC: NOT deployed: the image "
        "is not allowed; PROBLEM: placed on this node but no container is there"]
