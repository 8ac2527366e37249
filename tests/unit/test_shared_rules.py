"""The shared rules of ``_utils/`` on their own, with real values: name patterns, truthiness,
merges and defaults, container records and their problems, selection, grants and placement,
settings paths, the NFS owner and how a user's value is quoted. Each is the one definition the
resolver, the states, the runner and the beacons use."""

import copy

import pytest

from support.site import sample_ccc

import ccc_pillar  # noqa: E402
import ccc_quote  # noqa: E402
import ccc_rules  # noqa: E402

ANA, BOR, DARA = "ana.novak@example.org", "bor.kralj@example.org", "dara.kos@example.org"
ALL_STACKS = ["ana-main", "ana-jupyter", "bor-main", "cene-thesis", "dara-course", "dara-old"]


# ------------------------------------------------------------------------------------------------
# Patterns


@pytest.mark.parametrize("name", ["a", "0", "ana-main", "x.y_z-1", "a" * 63, "box1"])
def test_stack_names_accepted(name):
    assert ccc_rules.is_stack_name(name)


@pytest.mark.parametrize("name", ["", "A", "Ana", "-a", ".a", "_a", "a/b", "../etc", "a b", "a" * 64, "ana\n",
                                  "ana\x00", "é", 123, None, ["ana"]])
def test_stack_names_refused(name):
    assert not ccc_rules.is_stack_name(name)


def test_the_stack_name_pattern_alone_lets_a_final_newline_through_the_helper_does_not():
    assert ccc_rules.STACK_NAME_PATTERN.match("ana\n")  # "$" matches before a final newline
    assert not ccc_rules.is_stack_name("ana\n")


@pytest.mark.parametrize("email", [ANA, "a@b.org", "first.last+tag@sub.example.co.uk", "x_y%z@host-1.example"])
def test_emails_accepted(email):
    assert ccc_rules.is_email(email)


@pytest.mark.parametrize("email", ["", "ana", "@example.org", "ana@", "ana@example", ".ana@example.org",
                                   "ana@exa mple.org", "ana@example.org\n", "a/b@example.org", "../x@example.org",
                                   "a" * 65 + "@example.org", None, 7])
def test_emails_refused(email):
    assert not ccc_rules.is_email(email)


@pytest.mark.parametrize("name, ok", [
    ("WANDB_MODE", True), ("_X", True), ("A1", True), ("A" * 64, True),
    ("lower", False), ("1ABC", False), ("BAD NAME", False), ("A-B", False), ("A" * 65, False), ("PATH\n", False),
    ("", False), (5, False),
])
def test_env_names(name, ok):
    assert ccc_rules.is_env_name(name) is ok


# ------------------------------------------------------------------------------------------------
# Truthiness


@pytest.mark.parametrize("value, expected", [
    (True, True), ("true", True), ("True", True), ("TRUE", True), ("yes", True), ("Yes", True), (1, True), ("1", True),
    (False, False), ("false", False), ("no", False), (0, False), ("0", False), (None, False), ("", False),
    (2, False), ("on", False), ([], False), ({}, False), ([True], False), (1.0, False),
])
def test_truthy(value, expected):
    assert ccc_rules.truthy(value) is expected


# ------------------------------------------------------------------------------------------------
# Whole numbers and numbers (the one check every role's settings use: a YAML ``true`` is no 1)


@pytest.mark.parametrize("value, low, high, expected", [
    (1, None, None, True), (0, 1, None, False), (65535, 1, 65535, True), (65536, 1, 65535, False),
    (-1, -1, None, True), (True, None, None, False), (False, 0, None, False), (1.0, None, None, False),
    ("8080", None, None, False), (None, None, None, False), (2 ** 70, 0, None, True)])
def test_whole_numbers(value, low, high, expected):
    assert ccc_rules.is_whole(value, low, high) is expected


@pytest.mark.parametrize("value, expected", [(1, True), (0.5, True), (float("nan"), True), (True, False),
                                             ("1", False), (None, False)])
def test_numbers(value, expected):
    assert ccc_rules.is_number(value) is expected


# ------------------------------------------------------------------------------------------------
# Merges and defaults


def test_deep_merge_merges_mappings_and_replaces_everything_else():
    base = {"a": {"b": 1, "c": [1, 2]}, "d": "x", "e": {"f": 1}}
    override = {"a": {"c": [3], "g": 2}, "d": None, "e": "scalar", "h": {"i": 1}}
    merged = ccc_pillar.deep_merge(base, override)
    assert merged == {"a": {"b": 1, "c": [3], "g": 2}, "d": None, "e": "scalar", "h": {"i": 1}}
    assert base == {"a": {"b": 1, "c": [1, 2]}, "d": "x", "e": {"f": 1}}  # never mutated
    merged["h"]["i"] = 2
    assert override["h"] == {"i": 1}  # copies, not references
    assert ccc_pillar.deep_merge(base, None) == base


def test_cluster_defaults_fill_what_pillar_leaves_out():
    cluster = ccc_pillar.cluster_settings({"cluster": {"mount_points": {"nfs": {"user_data": "/nfs/users"}},
                                                       "hardening": {"pids_limit": 10}}})
    assert cluster["mount_points"]["nfs"]["user_data"] == "/nfs/users"
    assert cluster["mount_points"]["nfs"]["apps_data"] == "/data/shared/apps"
    assert cluster["state_dir"] == "/nfs/users/.ccc-salt"  # follows user_data unless set
    assert cluster["hardening"] == {"no_new_privileges": True, "cap_drop": ["MKNOD", "NET_RAW", "SETFCAP"],
                                    "pids_limit": 10}
    assert cluster["shm_size_default"] == "2g" and cluster["orphans"] == {"max_share": 0.5}
    assert ccc_pillar.cluster_settings(None)["state_dir"] == "/data/shared/user_data/.ccc-salt"
    assert ccc_pillar.cluster_settings({"cluster": {"state_dir": "/srv/state"}})["state_dir"] == "/srv/state"
    assert ccc_pillar.CLUSTER_DEFAULTS["state_dir"] is None  # the defaults themselves never change


def test_node_defaults_name_the_node_after_the_minion():
    node = ccc_pillar.node_settings({"node": {"compute_devices": None}}, "gpu7")
    assert node == {"name": "gpu7", "docker_url": "unix:///var/run/docker.sock", "compute_devices": {},
                    "binds_dir": "/run/ccc-salt/binds", "state_dir": "/var/lib/ccc-salt", "create_parallelism": 4}
    assert ccc_pillar.node_settings({"node": {"name": "node1"}}, "gpu7")["name"] == "node1"


@pytest.mark.parametrize("nfs_user, owner", [
    pytest.param(None, (1000, 1000), id="default"),
    pytest.param({"uid": 4242, "gid": 4243}, (4242, 4243), id="both"),
    pytest.param({"uid": 4242, "gid": None}, (4242, 4242), id="gid-null-is-uid"),
    pytest.param({"uid": "4242"}, (4242, 1000), id="string-uid-read-as-number"),
])
def test_file_owner(nfs_user, owner):
    cluster = ccc_pillar.cluster_settings({"cluster": {"nfs_user": nfs_user}} if nfs_user else {})
    if nfs_user and nfs_user.get("gid", 0) is None:
        cluster["nfs_user"].pop("gid")
    assert ccc_pillar.file_owner(cluster) == owner


def test_merged_record_overlays_the_entry_on_its_user():
    users = {ANA: {"USER_NAME": "ana", "SHM_SIZE": "3g", "USER_TYPE": "researcher"}}
    entry = {"STACK_NAME": "box", "USER_EMAIL": ANA, "SHM_SIZE": "8g"}
    assert ccc_pillar.merged_record(users, entry) == {"USER_NAME": "ana", "SHM_SIZE": "8g", "USER_TYPE": "researcher",
                                                      "STACK_NAME": "box", "USER_EMAIL": ANA}
    assert users[ANA]["SHM_SIZE"] == "3g"
    assert ccc_pillar.merged_record({}, {"STACK_NAME": "x"})["USER_EMAIL"] is None


# ------------------------------------------------------------------------------------------------
# Container records


def test_a_valid_record_has_no_problems():
    record, problems = ccc_pillar.container_record(sample_ccc(), "bor-main")
    assert problems == []
    assert record["USER_NAME"] == "bor" and record["USER_MENTOR"] == "Ana Novak"  # from the user record
    assert record["DEPLOYMENT_NODES"] == ["node1", "node2"]  # from the container entry


@pytest.mark.parametrize("changes, problem", [
    pytest.param({"USER_EMAIL": "eve@example.org"}, "ana-main: USER_EMAIL 'eve@example.org' has no entry in ccc:users",
                 id="unknown-user"),
    pytest.param({"USER_EMAIL": "not an email"}, "ana-main: USER_EMAIL 'not an email' is not a valid address",
                 id="bad-email"),
    pytest.param({"CONTAINER_IMAGE": ""}, "ana-main: CONTAINER_IMAGE is required (in the container or its user record)",
                 id="image-required"),
    pytest.param({"USER_TYPE": "wizard"}, "ana-main: USER_TYPE 'wizard' is not defined in ccc:user_types", id="type"),
    pytest.param({"USER_TYPE": ["researcher"]}, "ana-main: USER_TYPE ['researcher'] is not defined in ccc:user_types",
                 id="type-not-a-string"),
    pytest.param({"STORAGE_NAME": "../bor"}, "ana-main: STORAGE_NAME '../bor' must look like a STACK_NAME", id="storage"),
    pytest.param({"USER_MENTOR": "a\nb"}, "ana-main: USER_MENTOR must be a single line of text", id="mentor"),
    pytest.param({"ALLOWED_NODES": "node2"}, "ana-main: ALLOWED_NODES must be a list of names, not 'node2'",
                 id="allowed-nodes-string"),
    pytest.param({"ADDITIONAL_DEVICE_GROUPS": [["x"]]},
                 "ana-main: ADDITIONAL_DEVICE_GROUPS must be a list of names, not [['x']]", id="groups-nested"),
    pytest.param({"DEPLOYMENT_NODES": "node1"}, "ana-main: DEPLOYMENT_NODES must be a list of names, not 'node1'",
                 id="deployment-string"),
    pytest.param({"EXTRA_ENVS": {"OK\n": "x"}}, "ana-main: EXTRA_ENVS entry 'OK\\n' must be NAME: scalar",
                 id="env-newline"),
    pytest.param({"EXTRA_ENVS": ["A=1"]}, "ana-main: EXTRA_ENVS must be a mapping", id="env-list"),
    pytest.param({"USER_NAME": "Ana!"}, "ana-main: USER_NAME: the value 'Ana!' is not allowed here", id="user-key-schema"),
])
def test_record_problems(changes, problem):
    ccc = sample_ccc()
    ccc["containers"][0].update(changes)
    record, problems = ccc_pillar.container_record(ccc, "ana-main")
    assert problem in problems, problems
    assert record["STACK_NAME"] == "ana-main"


def test_record_problems_are_capped_and_quote_values():
    ccc = sample_ccc()
    ccc["containers"][0]["EXTRA_ENVS"] = {f"bad-{i}-" + "k" * 200: i for i in range(1000)}
    _, problems = ccc_pillar.container_record(ccc, "ana-main")
    assert len(problems) == ccc_quote.MAX_PROBLEMS + 1
    assert problems[-1] == "… and 995 more problems"
    assert problems[0] == f"ana-main: EXTRA_ENVS entry {ccc_quote.quote_value('bad-0-' + 'k' * 200)} must be NAME: scalar"
    assert "… (206 characters)" in problems[0] and max(map(len, problems)) < 200


@pytest.mark.parametrize("entries, stack, problem", [
    pytest.param([], "nope", "no container named 'nope' in pillar ccc:containers", id="missing"),
    pytest.param([{"STACK_NAME": "ana-main", "USER_EMAIL": BOR}], "ana-main", "STACK_NAME 'ana-main' is defined more than once",
                 id="duplicate"),
])
def test_records_that_cannot_be_found(entries, stack, problem):
    ccc = sample_ccc()
    ccc["containers"].extend(entries)
    assert ccc_pillar.container_record(ccc, stack) == (None, [problem])


def test_check_false_returns_the_record_without_checking_it():
    ccc = sample_ccc()
    ccc["containers"][0]["USER_TYPE"] = "wizard"
    record, problems = ccc_pillar.container_record(ccc, "ana-main", check=False)
    assert problems == [] and record["USER_TYPE"] == "wizard"


# ------------------------------------------------------------------------------------------------
# Selection


def test_stack_entries_skip_invalid_and_every_duplicate():
    ccc = sample_ccc()
    ccc["containers"] += [{"STACK_NAME": "bor-main", "USER_EMAIL": ANA}, {"STACK_NAME": "bor-main"},
                          {"STACK_NAME": "Bad Name"}, {"STACK_NAME": "x" * 300}, "not a mapping"]
    entries, errors = ccc_pillar.stack_entries(ccc)
    assert list(entries) == [s for s in ALL_STACKS if s != "bor-main"]
    assert errors == [
        "container entry with invalid STACK_NAME 'Bad Name' is skipped",
        f"container entry with invalid STACK_NAME {ccc_quote.quote_value('x' * 300)} is skipped",
        "STACK_NAME 'bor-main' is defined more than once; every definition is skipped",  # once, for 3 definitions
    ]
    assert "… (300 characters)" in errors[1]


@pytest.mark.parametrize("containers, users, selected", [
    pytest.param(None, None, ALL_STACKS, id="all"),
    pytest.param("dara-old", None, ["dara-old"], id="one"),
    pytest.param(None, DARA, ["dara-course", "dara-old"], id="user"),
    pytest.param("bor-main", ANA, ["ana-main", "ana-jupyter", "bor-main"], id="union-in-pillar-order"),
])
def test_select_filters(containers, users, selected):
    result = ccc_pillar.select(sample_ccc(), containers, users)
    assert result == {"selected": selected, "errors": [], "filtered": bool(containers or users)}


def test_select_quotes_unknown_filter_values():
    long_name = "n" * 500
    result = ccc_pillar.select(sample_ccc(), f"ana-main,{long_name}", "eve@example.org")
    assert result["selected"] == ["ana-main"]
    assert result["errors"] == [f"containers filter: no container named {ccc_quote.quote_value(long_name)}",
                                "users filter: no user 'eve@example.org'"]
    assert len(result["errors"][0]) < 150


# ------------------------------------------------------------------------------------------------
# Grants and placement


def test_granted_is_the_type_list_then_the_record_additions_once():
    user_type = {"allowed_nodes": ["node1", "node2"], "allowed_device_groups": ["device_lab"]}
    record = {"ALLOWED_NODES": ["node3", "node1"], "ADDITIONAL_DEVICE_GROUPS": "device_x"}
    assert ccc_pillar.granted(user_type, record, "nodes") == ["node1", "node2", "node3"]
    assert ccc_pillar.granted(user_type, record, "device_groups") == ["device_lab"]  # a string grants nothing
    assert ccc_pillar.granted({}, {"ADDITIONAL_PRIVATE_DATA_MOUNT_GROUPS": ["g"]}, "private_mount_groups") == ["g"]
    assert ccc_pillar.granted(None, None, "private_data_groups") == []


@pytest.mark.parametrize("stack, changes, allowed", [
    pytest.param("ana-main", {}, ["node1", "node2", "node3"], id="researcher"),
    pytest.param("cene-thesis", {}, ["node3"], id="student"),
    pytest.param("cene-thesis", {"ALLOWED_NODES": ["node1"]}, ["node3", "node1"], id="plus-allowed-nodes"),
    pytest.param("cene-thesis", {"USER_TYPE": "wizard"}, [], id="unknown-type"),
    pytest.param("nope", {}, [], id="unknown-stack"),
])
def test_allowed_nodes(stack, changes, allowed):
    ccc = sample_ccc()
    for entry in ccc["containers"]:
        if entry["STACK_NAME"] == stack:
            entry.update(changes)
    assert ccc_pillar.allowed_nodes(ccc, stack) == allowed


RESEARCHER = {"default_nodes": ["node1"], "allowed_nodes": ["node1", "node2"]}


@pytest.mark.parametrize("record, wanted, placement, refused, source", [
    pytest.param({}, None, ["node1"], [], "the user type's default_nodes", id="type-default"),
    pytest.param({"DEPLOYMENT_NODES": ["node2", "node9"]}, None, ["node2"], ["node9"], "DEPLOYMENT_NODES",
                 id="admin-list-kept-to-allowed"),
    pytest.param({"DEPLOYMENT_NODES": ["node2"]}, ["node1", "node2"], ["node1", "node2"], [], "the user's settings",
                 id="user-list-wins"),
    pytest.param({"ALLOWED_NODES": ["node9"]}, ["node9"], ["node9"], [], "the user's settings", id="record-grant"),
    pytest.param({"DEPLOYMENT_NODES": ["node3"]}, None, [], ["node3"], "DEPLOYMENT_NODES", id="nowhere-allowed"),
])
def test_placement(record, wanted, placement, refused, source):
    assert ccc_pillar.placement(RESEARCHER, record, wanted) == (placement, refused, source)


def test_placement_without_any_list():
    assert ccc_pillar.placement({}, {}) == ([], [], "nowhere: no DEPLOYMENT_NODES and no default_nodes")


def test_user_type_of():
    ccc = sample_ccc()
    assert ccc_pillar.user_type_of(ccc, {"USER_TYPE": "student"})["allowed_nodes"] == ["node3"]
    assert ccc_pillar.user_type_of(ccc, {"USER_TYPE": "wizard"}) == {}
    assert ccc_pillar.user_type_of(ccc, {"USER_TYPE": ["student"]}) == {}


def test_settings_paths():
    cluster = ccc_pillar.cluster_settings({"cluster": {"mount_points": {"nfs": {"user_data": "/nfs/u"}}}})
    paths = ccc_pillar.settings_paths(cluster, {"STACK_NAME": "box", "USER_EMAIL": ANA})
    assert paths == {
        "user_dir": f"/nfs/u/{ANA}",
        "settings_dir": f"/nfs/u/{ANA}/container-settings",
        "settings_file": f"/nfs/u/{ANA}/container-settings/box.yml",
        "feedback_file": f"/nfs/u/{ANA}/container-settings/box.deploy",
        "last_good_file": "/nfs/u/.ccc-salt/last-good/box.json",
        "settings_folder": {"root": "/nfs/u", "parts": [ANA, "container-settings"]},
    }


def test_pillar_ccc_unwraps_to_plain_data():
    class Masked(dict):  # Salt 3008 wraps pillar values in such containers
        pass

    class MaskedList(list):
        pass

    pillar = {"ccc": Masked(node=Masked(compute_devices=Masked(lab=MaskedList(["GPU-1"]))))}
    ccc = ccc_pillar.pillar_ccc(pillar)
    assert ccc == {"node": {"compute_devices": {"lab": ["GPU-1"]}}}
    assert type(ccc) is dict and type(ccc["node"]["compute_devices"]["lab"]) is list
    assert ccc_pillar.pillar_ccc({}) == {} and ccc_pillar.pillar_ccc(None) == {}


# ------------------------------------------------------------------------------------------------
# Quoting a user's value


@pytest.mark.parametrize("value, expected", [
    pytest.param("x" * 81, repr("x" * 80) + "… (81 characters)", id="string"),
    pytest.param("a\nb", "'a\\nb'", id="newline-escaped"),
    pytest.param(list(range(100)), repr(list(range(100)))[:80] + "… (100 items, 390 characters)", id="list"),
    pytest.param({"k": "v" * 100}, repr({"k": "v" * 100})[:80] + "… (1 item, 109 characters)", id="mapping"),
    pytest.param(None, "None", id="none"),
    pytest.param(10 ** 5000, "<int too large or too deeply nested to show>", id="huge-int"),
])
def test_quote_value_shows_the_start_and_the_length(value, expected):
    assert ccc_quote.quote_value(value) == expected


def test_quote_value_of_deep_nesting_never_raises():
    deep = []
    for _ in range(100_000):
        deep = [deep]
    assert ccc_quote.quote_value(deep) == "<list too large or too deeply nested to show>"


@pytest.mark.parametrize("text, expected", [
    pytest.param("short", "short", id="short"),
    pytest.param("a\nresult: ok\t\x1b[2J\u2028", "a\\nresult: ok\\t\\x1b[2J\\u2028", id="control-characters"),
    pytest.param("p" * 100, "p" * 80 + "… (100 characters)", id="long"),
    pytest.param("\x1b" * 30, "\\x1b" * 20 + "… (30 characters)", id="escapes-count-towards-the-limit"),
])
def test_clip_text(text, expected):
    assert ccc_quote.clip_text(text) == expected
    assert "\n" not in ccc_quote.clip_text(text)


def test_quote_some_counts_the_rest():
    assert ccc_quote.quote_some(["a", "b"]) == "'a', 'b'"
    assert ccc_quote.quote_some([f"k{i}" for i in range(8)]) == "'k0', 'k1', 'k2', 'k3', 'k4' and 3 more"


def test_cap_problems():
    assert ccc_quote.cap_problems(["a", "b"]) == ["a", "b"]
    assert ccc_quote.cap_problems(str(i) for i in range(7)) == ["0", "1", "2", "3", "4", "… and 2 more problems"]


def test_shared_data_is_not_changed_by_its_readers():
    ccc = sample_ccc()
    before = copy.deepcopy(ccc)
    ccc_pillar.select(ccc, "ana-main", ANA)
    ccc_pillar.container_record(ccc, "ana-main")
    ccc_pillar.allowed_nodes(ccc, "bor-main")
    ccc_pillar.cluster_nodes(ccc)
    assert ccc == before
