"""The beacon's pillar (pillar/ccc/beacons.sls) and its file list for each sample node, rendered
with masterless salt-call; the beacon loaded and run by Salt's own beacon machinery."""

import copy
import importlib.util
import logging
import pathlib
import sys
import time

import pytest

import ccc_rules  # noqa: E402
import ccc_pillar  # noqa: E402
import ccc_containers
from support.site import SaltNode, sample_ccc

REPO = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("ccc_settings_beacon", REPO / "_beacons" / "ccc_settings.py")
beacon_mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(beacon_mod)

PILLAR_BEACONS = {"ccc_settings": [{"from_pillar": "ccc"}, {"interval": 1}, {"disable_during_state_run": False}],
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
    files = beacon_mod.files_from_ccc(ccc, node)
    assert [item["stack"] for item in files] == EXPECTED[node]  # dara-old is DISABLED
    user_data = salt.storage_root / "shared" / "user_data"
    cluster = ccc_pillar.cluster_settings(ccc)
    for item in files:
        record, problems = ccc_pillar.container_record(ccc, item["stack"])
        assert not problems
        assert item["path"] == ccc_pillar.settings_paths(cluster, record)["settings_file"]
        assert item["path"] == str(user_data / record["USER_EMAIL"] / "container-settings" / f"{item['stack']}.yml")


def test_the_file_list_uses_the_same_rules_as_the_deployment():
    assert beacon_mod.STACK_NAME_PATTERN.pattern == ccc_rules.STACK_NAME_PATTERN.pattern
    assert beacon_mod.EMAIL_PATTERN.pattern == ccc_rules.EMAIL_PATTERN.pattern
    assert beacon_mod.DEFAULT_USER_DATA == ccc_pillar.CLUSTER_DEFAULTS["mount_points"]["nfs"]["user_data"]
    for value in (True, "True", "true", "yes", 1, "1", False, "no", 0, None, "", [], 2):
        assert beacon_mod._truthy(value) == ccc_containers.ccc_settings.truthy(value)
    # every sample container the resolver may place on a node is watched there
    for node in EXPECTED:
        ccc = sample_ccc(node)
        watched = {item["stack"] for item in beacon_mod.files_from_ccc(ccc, node)}
        for stack in ccc_pillar.select(ccc)["selected"]:
            record, _ = ccc_pillar.container_record(ccc, stack)
            may_run = (node in ccc_pillar.allowed_nodes(ccc, stack)
                       and not ccc_containers.ccc_settings.truthy(record.get("DISABLED")))
            assert (stack in watched) == may_run, (node, stack)


def test_the_file_list_skips_invalid_entries_and_honours_node_settings(monkeypatch):
    ccc = copy.deepcopy(sample_ccc("node1"))
    ccc["containers"] += [
        {"STACK_NAME": "Bad Name", "USER_EMAIL": "ana.novak@example.org"},
        {"STACK_NAME": "../escape", "USER_EMAIL": "ana.novak@example.org"},
        {"STACK_NAME": "bad-mail", "USER_EMAIL": "../../etc"},
        {"STACK_NAME": "twice", "USER_EMAIL": "ana.novak@example.org"},
        {"STACK_NAME": "twice", "USER_EMAIL": "bor.kralj@example.org"},
        {"STACK_NAME": "cene-extra", "USER_EMAIL": "cene.zupan@example.org", "ALLOWED_NODES": ["node1"]},
        {"STACK_NAME": "ana-off", "USER_EMAIL": "ana.novak@example.org", "DISABLED": "True"},
        "not a mapping",
    ]
    stacks = [item["stack"] for item in beacon_mod.files_from_ccc(ccc, "node1")]
    assert stacks == ["ana-jupyter", "ana-main", "bor-main", "cene-extra"]
    ccc["node"]["name"] = "node3"  # ccc:node:name wins over the minion id
    assert "cene-thesis" in [item["stack"] for item in beacon_mod.files_from_ccc(ccc, "node1")]
    ccc["users"]["ana.novak@example.org"]["DISABLED"] = True  # the user record's DISABLED counts too
    assert not [i for i in beacon_mod.files_from_ccc(ccc, "node3") if i["stack"].startswith("ana-")]
    minimal = {"user_types": {"t": {"allowed_nodes": ["n"]}},
               "containers": [{"STACK_NAME": "box", "USER_EMAIL": "a@b.org", "USER_TYPE": "t"}]}
    default = beacon_mod.files_from_ccc(minimal, "n")
    assert default == [{"stack": "box", "path": "/data/shared/user_data/a@b.org/container-settings/box.yml"}]
    logged = []
    logger = logging.getLogger("ccc-settings-beacon-test")
    logger.propagate = False  # keep it away from Salt's deferred log handlers
    logger.addHandler(type("Keep", (logging.Handler,), {"emit": lambda self, record: logged.append(record)})())
    monkeypatch.setattr(beacon_mod, "log", logger)
    assert beacon_mod.files_from_ccc({"cluster": {"mount_points": {"nfs": {"user_data": "relative"}}}}, "n") == []
    assert "not an absolute path" in logged[0].getMessage()
    assert beacon_mod.files_from_ccc(None, "n") == []


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
        events += beacons.process(copy.deepcopy(config), opts["grains"])
    finally:
        beacons.beacons["ccc_settings.close"](config["ccc_settings"])
    assert events == [{
        "tag": "salt/beacon/node3/ccc_settings/cene-thesis",
        "data": {"stack": "cene-thesis", "change": "modified", "id": "node3"},
        "beacon_name": "ccc_settings",
    }]


def test_a_beacon_refresh_closes_the_old_watcher_and_loses_no_edit(rendered):
    """Minion.beacons_refresh: close_beacons() on the old Beacon, then a new Beacon (new loader,
    empty __context__). Salt 3008.4 does not call close() for pillar-configured beacons."""
    import salt.beacons

    salt_node, _, _ = rendered["node1"]
    opts, functions, config = _salt_beacons(salt_node, "node1")
    settings = _settings(salt_node, "bor.kralj@example.org", "bor-main", "bor-main: {}\n")
    first = salt.beacons.Beacon(opts, functions)
    second = None
    try:
        for _ in range(2):
            assert first.process(copy.deepcopy(config), opts["grains"]) == []
        registry = sys.modules[beacon_mod.REGISTRY_MODULE].watchers
        old = registry["ccc_settings"]
        first.close_beacons()
        assert not old.closed  # Salt skipped close(): only the inheritance below releases it
        (settings / "bor-main.yml").write_text("bor-main: {SHM_SIZE: 4g}\n")
        second = salt.beacons.Beacon(opts, functions)
        events = []
        for _ in range(2):
            events += second.process(copy.deepcopy(config), opts["grains"])
        assert old.closed and registry["ccc_settings"] is not old
        assert [(e["tag"], e["data"]["change"]) for e in events] == [
            ("salt/beacon/node1/ccc_settings/bor-main", "modified")]
    finally:
        for beacons in (first, second):
            if beacons is not None:
                beacons.beacons["ccc_settings.close"](config["ccc_settings"])
