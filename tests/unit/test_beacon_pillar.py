"""The beacon's pillar (pillar/ccc/beacons.sls) and its file list for each sample node, rendered
with masterless salt-call; the shared rule behind the list (ccc_pillar.watched_files, served to
the beacon by ccc_containers.watched_files); the beacon loaded and run by Salt's own beacon
machinery from the modules saltutil.sync_all copied."""

import copy
import json
import pathlib
import subprocess
import sys
import textwrap
import time

import pytest
from support.beacons import load_beacon
from salt.exceptions import CommandExecutionError

import ccc_containers
import ccc_pillar
import ccc_rules
from support.site import SaltNode, sample_ccc

REPO = pathlib.Path(__file__).resolve().parents[2]
beacon_mod = load_beacon("ccc_settings.py", "ccc_settings_beacon")

PILLAR_BEACONS = {"ccc_settings": [{"from_pillar": "ccc"}, {"immediate": True}, {"interval": 1},
                                   {"disable_during_state_run": False}],
                  "ccc_docker": [{"from_pillar": "ccc"}, {"interval": 1}, {"disable_during_state_run": False}]}
RESEARCHER_STACKS = ["ana-jupyter", "ana-main", "bor-main"]
EXPECTED = {"node1": RESEARCHER_STACKS, "node2": RESEARCHER_STACKS,
            "node3": RESEARCHER_STACKS + ["cene-thesis", "dara-course"]}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """{node: (SaltNode, beacons pillar, ccc pillar)} for the three sample nodes."""
    root = tmp_path_factory.mktemp("beacon-pillar")
    nodes = {}
    for node in EXPECTED:
        salt = SaltNode(root / node, node, "unix:///nonexistent.sock", root / "storage")
        beacons, _ = salt.salt_call("pillar.get", "beacons", "unmask=True")
        ccc, _ = salt.salt_call("pillar.get", "ccc", "unmask=True")
        nodes[node] = (salt, beacons, ccc)
    return nodes


@pytest.mark.parametrize("node", sorted(EXPECTED))
def test_every_node_gets_the_beacon_and_watches_exactly_its_stacks(rendered, node):
    salt, beacons, ccc = rendered[node]
    assert beacons == PILLAR_BEACONS
    assert beacon_mod.validate(beacons["ccc_settings"]) == (True, "valid beacon configuration")
    files = ccc_pillar.watched_files(ccc, node)
    assert [item["stack"] for item in files] == EXPECTED[node]  # dara-old is DISABLED
    served, _ = salt.salt_call("ccc_containers.watched_files")  # what the beacon asks for, synced
    assert served == {"files": files, "beacon": {}, "pillar_errors": [], "problems": []}
    user_data = salt.storage_root / "shared" / "user_data"
    cluster = ccc_pillar.cluster_settings(ccc)
    for item in files:
        record, problems = ccc_pillar.container_record(ccc, item["stack"])
        assert not problems
        assert item["path"] == ccc_pillar.settings_paths(cluster, record)["settings_file"]
        assert item["path"] == str(user_data / record["USER_EMAIL"] / "container-settings" / f"{item['stack']}.yml")


def test_every_container_the_deployment_may_place_on_a_node_is_watched_there():
    for node in EXPECTED:
        ccc = sample_ccc(node)
        watched = {item["stack"] for item in ccc_pillar.watched_files(ccc, node)}
        for stack in ccc_pillar.select(ccc)["selected"]:
            record, _ = ccc_pillar.container_record(ccc, stack)
            may_run = node in ccc_pillar.allowed_nodes(ccc, stack) and not ccc_rules.truthy(record.get("DISABLED"))
            assert (stack in watched) == may_run, (node, stack)


@pytest.mark.parametrize("value, watched", [
    (True, False), ("True", False), ("true", False), ("yes", False), (1, False), ("1", False),
    (False, True), ("no", True), (0, True), (None, True), ("", True), ([], True), (2, True),
])
def test_disabled_reads_like_every_other_ccc_boolean(value, watched):
    ccc = copy.deepcopy(sample_ccc("node1"))
    for entry in ccc["containers"]:
        if entry["STACK_NAME"] == "bor-main":
            entry["DISABLED"] = value
    stacks = [item["stack"] for item in ccc_pillar.watched_files(ccc, "node1")]
    assert ("bor-main" in stacks) == watched


def test_the_file_list_skips_invalid_entries_and_honours_node_settings():
    ccc = copy.deepcopy(sample_ccc("node1"))
    ccc["containers"] += [
        {"STACK_NAME": "Bad Name", "USER_EMAIL": "ana.novak@example.org"},
        {"STACK_NAME": "../escape", "USER_EMAIL": "ana.novak@example.org"},
        {"STACK_NAME": "newline\n", "USER_EMAIL": "ana.novak@example.org"},
        {"STACK_NAME": "bad-mail", "USER_EMAIL": "../../etc"},
        {"STACK_NAME": "bad-mail2", "USER_EMAIL": "ana.novak@example.org\n"},
        {"STACK_NAME": "twice", "USER_EMAIL": "ana.novak@example.org"},
        {"STACK_NAME": "twice", "USER_EMAIL": "bor.kralj@example.org"},
        {"STACK_NAME": "cene-extra", "USER_EMAIL": "cene.zupan@example.org", "ALLOWED_NODES": ["node1"]},
        {"STACK_NAME": "ana-off", "USER_EMAIL": "ana.novak@example.org", "DISABLED": "True"},
        "not a mapping",
    ]
    stacks = [item["stack"] for item in ccc_pillar.watched_files(ccc, "node1")]
    assert stacks == ["ana-jupyter", "ana-main", "bor-main", "cene-extra"]
    ccc["node"]["name"] = "node3"  # ccc:node:name wins over the minion id (the execution function's job)
    node = ccc_pillar.node_settings(ccc, "node1")["name"]
    assert "cene-thesis" in [item["stack"] for item in ccc_pillar.watched_files(ccc, node)]
    ccc["users"]["ana.novak@example.org"]["DISABLED"] = True  # the user record's DISABLED counts too
    assert not [i for i in ccc_pillar.watched_files(ccc, "node3") if i["stack"].startswith("ana-")]
    minimal = {"user_types": {"t": {"allowed_nodes": ["n"]}},
               "containers": [{"STACK_NAME": "box", "USER_EMAIL": "a@b.org", "USER_TYPE": "t"}]}
    default = ccc_pillar.watched_files(minimal, "n")  # the deployment's default user data root
    assert default == [{"stack": "box", "path": "/data/shared/user_data/a@b.org/container-settings/box.yml"}]
    with pytest.raises(ValueError, match="not an absolute path"):
        ccc_pillar.watched_files({"cluster": {"mount_points": {"nfs": {"user_data": "relative"}}}}, "n")
    assert ccc_pillar.watched_files(None, "n") == []


def test_the_execution_function_serves_this_nodes_list_tunables_and_pillar_errors(monkeypatch):
    ccc = copy.deepcopy(sample_ccc("node3"))
    ccc["cluster"]["beacon"] = {"quiet_period": 0.25}
    pillar = {"ccc": ccc, "_errors": ["Rendering SLS 'site.users' failed"]}
    monkeypatch.setattr(ccc_containers, "__pillar__", pillar, raising=False)
    monkeypatch.setattr(ccc_containers, "__grains__", {"id": "gpu-box-3"}, raising=False)
    ccc["node"]["name"] = "node3"
    served = ccc_containers.watched_files()
    assert served == {"files": ccc_pillar.watched_files(ccc, "node3"), "beacon": {"quiet_period": 0.25},
                      "pillar_errors": ["Rendering SLS 'site.users' failed"], "problems": []}
    assert [item["stack"] for item in served["files"]] == EXPECTED["node3"]
    pillar["ccc"] = {"cluster": {"mount_points": {"nfs": {"user_data": "relative"}}}}
    with pytest.raises(CommandExecutionError, match="not an absolute path"):
        ccc_containers.watched_files()
    checked = ccc_containers.watched_files(files=[{"stack": "ok-box", "path": "/x/ok-box.yml"},
                                                 {"stack": "Bad Box", "path": "/x/Bad Box.yml"}])
    assert checked["files"] == [{"stack": "ok-box", "path": "/x/ok-box.yml"}]
    assert checked["problems"] == ["files entry: invalid STACK_NAME 'Bad Box'"]


def test_a_later_pillar_sls_cannot_see_an_earlier_one(tmp_path):
    """Why pillar/ccc/beacons.sls is static: in Salt 3008.4 each pillar SLS renders on its own, and
    `pillar` in its Jinja context is the minion's previously compiled pillar (empty on a first
    compile, a stale copy on a later one), never the SLS files rendered before it."""
    pillar_root = tmp_path / "pillar"
    pillar_root.mkdir()
    (pillar_root / "top.sls").write_text("base:\n  '*':\n    - first\n    - second\n")
    (pillar_root / "first.sls").write_text("ccc:\n  token: {{ range(99999) | random }}\n")
    (pillar_root / "second.sls").write_text("seen: {{ pillar.get('ccc', {}).get('token', 'nothing') | json }}\n")
    var = tmp_path / "var"
    (tmp_path / "minion").write_text(
        f"id: probe\nfile_client: local\npillar_roots: {{base: [{pillar_root}]}}\ncachedir: {var}/cache\n"
        f"pki_dir: {var}/pki\nsock_dir: {var}/sock\nlog_file: {var}/log\n"
    )
    import salt.config
    import salt.loader
    import salt.pillar

    opts = salt.config.minion_config(str(tmp_path / "minion"))
    opts["pillar"] = {}
    compiled = salt.pillar.Pillar(opts, salt.loader.grains(opts), "probe", "base").compile_pillar()
    assert "token" in compiled["ccc"] and compiled["seen"] == "nothing"


def _salt_beacons(salt_node, node):
    """Salt's own beacon machinery as the minion's main loop drives it, with ``node``'s real
    pillar and the synced _beacons: ``(opts, functions, config)``."""
    import salt.config
    import salt.loader
    import salt.pillar

    opts = salt.config.minion_config(str(salt_node.config_dir / "minion"))
    opts["grains"] = salt.loader.grains(opts)
    opts["pillar"] = salt.pillar.get_pillar(opts, opts["grains"], node, "base").compile_pillar()
    opts["pillar"]["ccc"]["cluster"]["beacon"] = {"quiet_period": 0}
    functions = salt.loader.minion_mods(opts)
    config = functions["config.merge"]("beacons", opts["beacons"], omit_opts=True)  # Minion.process_beacons
    return opts, functions, config


def _settings(salt_node, email, stack, text):
    directory = salt_node.storage_root / "shared" / "user_data" / email / "container-settings"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{stack}.yml").write_text(text)
    return directory


def _process_until(beacons, config, grains, predicate, timeout=5.0):
    """Call the beacons as the minion's main loop does (here every 50 ms) until ``predicate``
    holds for what they returned; with ``immediate`` the dispatch thread may have taken a change
    first, and without a minion to fire it to, it comes back through the next call."""
    events, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        events += beacons.process(copy.deepcopy(config), grains)
        if predicate(events):
            break
        time.sleep(0.05)
    return events


def test_salt_loads_validates_and_runs_the_beacon_from_pillar(rendered):
    """The event tag and data the master will see, from salt.beacons.Beacon.process."""
    import salt.beacons

    salt_node, _, _ = rendered["node3"]
    opts, functions, config = _salt_beacons(salt_node, "node3")
    assert config == PILLAR_BEACONS
    beacons = salt.beacons.Beacon(opts, functions)
    assert "ccc_settings.beacon" in beacons.beacons and "ccc_settings.validate" in beacons.beacons

    settings = _settings(salt_node, "cene.zupan@example.org", "cene-thesis", "cene-thesis: {}\n")
    events = []
    try:
        for _ in range(3):  # the first call only starts the interval counter, the second baselines
            events += beacons.process(copy.deepcopy(config), opts["grains"])
            time.sleep(0.05)
        assert events == []
        (settings / "cene-thesis.yml").write_text("cene-thesis: {SHM_SIZE: 4g}\n")
        (settings / "cene-thesis.deploy").write_text("deployed\n")
        events += _process_until(beacons, config, opts["grains"], bool)
        events += _process_until(beacons, config, opts["grains"], lambda more: False, timeout=0.5)  # nothing more
    finally:
        beacons.beacons["ccc_settings.close"](config["ccc_settings"])
    st = (settings / "cene-thesis.yml").stat()
    assert events == [{
        "tag": "salt/beacon/node3/ccc_settings/cene-thesis",
        "data": {"stack": "cene-thesis", "change": "modified", "version": f"{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_size}:{st.st_ino}",
                 "id": "node3"},
        "beacon_name": "ccc_settings",
    }]


def test_a_beacon_refresh_closes_the_old_watcher_and_loses_no_edit(rendered):
    """Minion.beacons_refresh: close_beacons() on the old Beacon, then a new Beacon (new loader,
    empty __context__). Salt 3008.4 does not call close() for pillar-configured beacons."""
    import salt.beacons

    salt_node, _, _ = rendered["node1"]
    opts, functions, config = _salt_beacons(salt_node, "node1")
    config["ccc_settings"] = [item for item in config["ccc_settings"] if "immediate" not in item]  # calls only
    settings = _settings(salt_node, "bor.kralj@example.org", "bor-main", "bor-main: {}\n")
    first = salt.beacons.Beacon(opts, functions)
    second = None
    try:
        for _ in range(2):
            assert first.process(copy.deepcopy(config), opts["grains"]) == []
        registry = sys.modules[beacon_mod.REGISTRY_MODULE].watchers
        old = registry["ccc_settings"]["watcher"]
        first.close_beacons()
        assert not old.closed  # Salt skipped close(): only the inheritance below releases it
        (settings / "bor-main.yml").write_text("bor-main: {SHM_SIZE: 4g}\n")
        second = salt.beacons.Beacon(opts, functions)
        events = []
        for _ in range(2):
            events += second.process(copy.deepcopy(config), opts["grains"])
        assert old.closed and registry["ccc_settings"]["watcher"] is not old
        assert [(e["tag"], e["data"]["change"]) for e in events] == [
            ("salt/beacon/node1/ccc_settings/bor-main", "modified")]
    finally:
        for beacons in (first, second):
            if beacons is not None:
                beacons.beacons["ccc_settings.close"](config["ccc_settings"])


PROBE = textwrap.dedent("""
    import json, sys
    import salt.beacons, salt.config, salt.loader
    opts = salt.config.minion_config(sys.argv[1])
    opts["grains"] = salt.loader.grains(opts)
    opts["pillar"] = {}
    functions = salt.loader.minion_mods(opts)
    beacons = salt.beacons.Beacon(opts, functions)
    found = {name: "{}.beacon".format(name) in beacons.beacons for name in ("ccc_settings", "ccc_docker")}
    helpers = {name: sys.modules[name].__file__ for name in sys.modules if name.startswith("_ccc_")}
    print(json.dumps({"found": found, "helpers": helpers, "path": sys.path}))
""")


def test_the_synced_beacons_import_their_helpers_from_the_minions_own_copy(rendered):
    """saltutil.sync_all copies _beacons/ (the _-prefixed helpers too) into the minion's cache;
    Salt loads the beacons from there with that folder on sys.path only while it loads them.
    A fresh interpreter, as a minion is: nothing of the repository on sys.path."""
    salt_node, _, _ = rendered["node1"]
    proc = subprocess.run([sys.executable, "-c", PROBE, str(salt_node.config_dir / "minion")],
                          capture_output=True, text=True, timeout=120, cwd="/")
    assert proc.returncode == 0, proc.stderr[-3000:]
    probe = json.loads(proc.stdout.strip().splitlines()[-1])
    assert probe["found"] == {"ccc_settings": True, "ccc_docker": True}
    assert sorted(probe["helpers"]) == ["_ccc_beacon_config", "_ccc_docker_events", "_ccc_settings_dispatch",
                                        "_ccc_settings_watcher"]
    for path in probe["helpers"].values():
        assert str(REPO) not in path and pathlib.Path(path).parent.name == "beacons", path
    assert not any(entry.endswith("beacons") for entry in probe["path"])  # on sys.path only while loading
