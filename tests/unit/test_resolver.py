"""Table-driven tests of the pure resolver (``ccc_containers``): selection, merge, placement, GPUs,
mounts, environment, labels and images, on the sample site. No Salt, no Docker: node facts are
plain lambdas. Every test asserts what the user or admin would see (the spec Docker gets, the
labels FRP reads, the environment the image reads, the messages written to ``<STACK>.deploy``)."""

import copy

import pytest
import yaml

from support.site import deep_merge, sample_ccc

import ccc_pillar  # noqa: E402
import ccc_resolver  # noqa: E402
import ccc_subdomains  # noqa: E402

ANA, BOR = "ana.novak@example.org", "bor.kralj@example.org"
CENE, DARA = "cene.zupan@example.org", "dara.kos@example.org"
ANA_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeSampleKeyForAnaOnly0000000000000000000 ana@laptop"
GH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGitHubKeyOfAna000000000000000000000000000000 gh"
ADMIN_IMAGE = "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1"
LAB1, LAB2, STU1 = (f"GPU-5f1c2a64-8a1e-4b7e-9d1e-0c0a1111000{i}" for i in (1, 2, 3))
NODE2_LAB = [f"GPU-7a2b3c4d-0000-4000-8000-00000000020{i}" for i in (1, 2, 3, 4)]
NODE3_STU = [f"GPU-9e8d7c6b-0000-4000-8000-00000000030{i}" for i in (1, 2)]
ALL_STACKS = ["ana-main", "ana-jupyter", "bor-main", "cene-thesis", "dara-course", "dara-old"]
TZ_FILES = ["/etc/timezone", "/etc/localtime"]
SHARED, LOCAL = "/srv/ccc/shared", "/srv/ccc/local"
GiB = 1024 ** 3


def site(node="node1", **changes):
    """The sample pillar for ``node``; ``changes`` deep-merges into it (``containers`` replaces
    the matching entries by STACK_NAME instead, and ``add_containers`` appends)."""
    ccc = sample_ccc(node)
    entries = changes.pop("containers", {})
    extra = changes.pop("add_containers", [])
    for entry in ccc["containers"]:
        entry.update(copy.deepcopy(entries.get(entry["STACK_NAME"], {})))
    ccc["containers"].extend(copy.deepcopy(extra))
    return deep_merge(ccc, changes)


def facts_for(ccc, node="node1", images=None, github=None, docker_gid=998, tz=TZ_FILES, calls=None):
    """Node facts for ``node``; ``images`` maps ref -> labels (None = not available)."""
    images = {} if images is None else images

    def image_lookup(ref, credentials):
        if calls is not None:
            calls.append((ref, credentials))
        if ref in images and images[ref] is None:
            return None, "pull failed: manifest unknown"
        return {"id": f"sha256:{abs(hash(ref))}", "labels": images.get(ref, {})}, None

    def github_keys(login):
        return (github or {}).get(login, ([], f"no such GitHub user {login!r}"))

    return ccc_resolver.NodeFacts(
        node, compute_devices=ccc.get("node", {}).get("compute_devices"), docker_gid=docker_gid,
        host_timezone_files=tz, image_lookup=image_lookup, github_keys=github_keys,
    )


def settings_text(stack, section):
    return section if isinstance(section, str) else yaml.safe_dump({stack: section})


def resolve(stack="ana-main", ccc=None, node="node1", settings=None, last_good=None, taken=None, **facts):
    ccc = ccc or site(node)
    text = None if settings is None else settings_text(stack, settings)
    return ccc_resolver.resolve_container(
        ccc, stack, facts_for(ccc, node, **facts), settings_text=text, last_good=last_good, taken=taken,
    )


def run_spec(*args, **kwargs):
    result = resolve(*args, **kwargs)
    assert result["action"] == "run", (result["reason"], result["admin_errors"], result["user_messages"])
    return result["spec"], result


def mount_table(spec):
    return [(m["source"], m["target"], m["read_only"], m.get("propagation")) for m in spec["mounts"]]


# ------------------------------------------------------------------------------------------------
# Selection


@pytest.mark.parametrize("containers, users, selected, errors", [
    pytest.param(None, None, ALL_STACKS, [], id="no-filter-selects-all"),
    pytest.param("", [], ALL_STACKS, [], id="empty-filters-select-all"),
    pytest.param("bor-main", None, ["bor-main"], [], id="one-container"),
    pytest.param(" bor-main , ana-main,", None, ["ana-main", "bor-main"], [], id="comma-string-pillar-order"),
    pytest.param(["bor-main", "ana-jupyter"], None, ["ana-jupyter", "bor-main"], [], id="container-list"),
    pytest.param(None, DARA, ["dara-course", "dara-old"], [], id="one-user"),
    pytest.param(None, [ANA, CENE], ["ana-main", "ana-jupyter", "cene-thesis"], [], id="user-list"),
    pytest.param("cene-thesis", f"{BOR}", ["bor-main", "cene-thesis"], [], id="union-of-both"),
    pytest.param("ana-main", ANA, ["ana-main", "ana-jupyter"], [], id="overlapping-union-no-duplicates"),
    pytest.param("nope,bor-main", None, ["bor-main"], ["no container named 'nope'"], id="unknown-container"),
    pytest.param(None, "eve@example.org", [], ["no user 'eve@example.org'"], id="unknown-user"),
    pytest.param(None, "idle@example.org", [], [], id="user-without-containers-is-empty-not-error"),
])
def test_select(containers, users, selected, errors):
    ccc = site(users={"idle@example.org": {"USER_FULLNAME": "Idle", "USER_NAME": "idle", "USER_TYPE": "student"}})
    result = ccc_pillar.select(ccc, containers, users)
    assert result["selected"] == selected
    assert len(result["errors"]) == len(errors)
    for error, fragment in zip(result["errors"], errors):
        assert fragment in error
    assert result["filtered"] == bool(containers or users)


def test_select_no_containers_at_all_is_not_an_error():
    assert ccc_pillar.select({"containers": []}) == {"selected": [], "errors": [], "filtered": False}


@pytest.mark.parametrize("bad_entries, skipped, fragment", [
    pytest.param([{"STACK_NAME": "ana-main", "USER_EMAIL": BOR, "CONTAINER_IMAGE": ADMIN_IMAGE}],
                 "ana-main", "defined more than once", id="duplicate"),
    pytest.param([{"STACK_NAME": "Bad Name!", "USER_EMAIL": BOR}], "Bad Name!", "invalid STACK_NAME", id="invalid"),
    pytest.param([{"STACK_NAME": "../etc", "USER_EMAIL": BOR}], "../etc", "invalid STACK_NAME", id="path"),
    pytest.param([{"STACK_NAME": 123, "USER_EMAIL": BOR}], 123, "invalid STACK_NAME", id="not-a-string"),
    pytest.param([{"USER_EMAIL": BOR}], None, "invalid STACK_NAME", id="missing"),
])
def test_select_reports_and_skips_bad_stack_names(bad_entries, skipped, fragment):
    result = ccc_pillar.select(site(add_containers=bad_entries))
    assert skipped not in result["selected"]
    assert [name for name in ALL_STACKS if name != skipped] == result["selected"]
    assert any(fragment in error and repr(skipped) in error for error in result["errors"])


def test_duplicate_stack_is_held_not_deployed():
    ccc = site(add_containers=[{"STACK_NAME": "ana-main", "USER_EMAIL": BOR, "CONTAINER_IMAGE": ADMIN_IMAGE}])
    result = resolve("ana-main", ccc=ccc)
    assert result["action"] == "hold"
    assert any("more than once" in error for error in result["admin_errors"])


# ------------------------------------------------------------------------------------------------
# Merge: user record < container record < user settings file


@pytest.mark.parametrize("user_extra, container_extra, settings, expected", [
    pytest.param({}, {}, None, {"shm": 8 * GiB, "packages": "", "user": "ana"}, id="admin-container-values"),
    pytest.param({"SHM_SIZE": "3g", "INSTALL_PACKAGES": "vim"}, {}, None,
                 {"shm": 8 * GiB, "packages": "vim", "user": "ana"}, id="container-beats-user-record"),
    pytest.param({"INSTALL_PACKAGES": "vim"}, {"INSTALL_PACKAGES": "git"}, None,
                 {"shm": 8 * GiB, "packages": "git", "user": "ana"}, id="container-record-wins"),
    pytest.param({"INSTALL_PACKAGES": "vim"}, {"INSTALL_PACKAGES": "git"},
                 {"INSTALL_PACKAGES": "htop", "SHM_SIZE": "4g", "USER_NAME": "anna"},
                 {"shm": 4 * GiB, "packages": "htop", "user": "anna"}, id="settings-file-wins"),
    pytest.param({}, {"SHM_SIZE": None}, None, {"shm": 2 * GiB, "packages": "", "user": "ana"}, id="cluster-default-shm"),
    pytest.param({}, {}, {"SHM_SIZE": "4g", "RUN_PRIVILEGED": True},
                 {"shm": 8 * GiB, "packages": "", "user": "ana", "rejected": "RUN_PRIVILEGED can only be set"},
                 id="admin-only-key-rejects-whole-file"),
    pytest.param({}, {}, {"SHM_SIZE": "4g", "USER_EMAIL": "eve@example.org"},
                 {"shm": 8 * GiB, "packages": "", "user": "ana", "rejected": "USER_EMAIL can only be set"},
                 id="user-email-is-admin-only"),
    pytest.param({}, {}, "# everything commented\nana-main:\n#  SHM_SIZE: 4g\n",
                 {"shm": 8 * GiB, "packages": "", "user": "ana"}, id="null-section-means-defaults"),
])
def test_merge_precedence(user_extra, container_extra, settings, expected):
    ccc = site(users={ANA: user_extra}, containers={"ana-main": container_extra})
    ccc["containers"][0] = {k: v for k, v in ccc["containers"][0].items() if v is not None}
    spec, result = run_spec("ana-main", ccc=ccc, settings=settings)
    assert spec["shm_size"] == expected["shm"]
    assert spec["environment"]["INSTALL_PACKAGES"] == expected["packages"]
    assert spec["environment"]["USER_NAME"] == expected["user"]
    assert (f"/home/{expected['user']}" in [m["target"] for m in spec["mounts"]])
    assert spec["privileged"] is False
    if "rejected" in expected:
        assert result["settings_status"] == "rejected"
        assert "NOT applied" in result["user_messages"][0]
        assert any(expected["rejected"] in message for message in result["user_messages"])
    else:
        assert result["settings_status"] == ("missing" if settings is None else "applied")


@pytest.mark.parametrize("last_good, shm, kept_message", [
    pytest.param({"SHM_SIZE": "4g"}, 4 * GiB, "keeps your last accepted settings", id="last-good-kept"),
    pytest.param(None, 8 * GiB, "administrator's defaults are used", id="no-last-good-admin-defaults"),
])
def test_rejected_file_falls_back(last_good, shm, kept_message):
    spec, result = run_spec(settings={"SHM_SIZE": "10t"}, last_good=last_good)
    assert spec["shm_size"] == shm
    assert result["settings_status"] == "rejected" and result["settings_to_store"] is None
    assert kept_message in result["user_messages"][0]
    assert "more than the cluster maximum of 32g" in result["user_messages"][1]


def test_accepted_file_is_what_gets_stored():
    _, result = run_spec(settings={"SHM_SIZE": "4g"})
    assert result["settings_status"] == "applied"
    assert result["settings_to_store"] == {"SHM_SIZE": "4g"}
    assert result["user_messages"] == []


@pytest.mark.parametrize("user_frp, labels, absent, ports", [
    pytest.param(None, {"frp.22": "tcp", "frp.6006": "http", "frp.6006.http.subdomain": "node1-ana-tb"}, [],
                 [22, 6006], id="admin-frp"),
    pytest.param({"TCP": [2222]}, {"frp.2222": "tcp", "frp.6006": "http"}, ["frp.22"], [2222, 6006],
                 id="user-tcp-replaces-tcp-keeps-admin-http"),
    pytest.param({"HTTP": [{"port": 8888, "subdomain": "ana-nb"}]},
                 {"frp.22": "tcp", "frp.8888": "http", "frp.8888.http.subdomain": "node1-ana-nb"},
                 ["frp.6006", "frp.6006.http.subdomain", "frp.6006.http.password"], [22, 8888],
                 id="user-http-replaces-http-keeps-admin-tcp"),
    pytest.param({"TCP": [], "HTTP": []}, {"frp.enabled": "true"}, ["frp.22", "frp.6006"], [], id="user-empties-both"),
    pytest.param({"TCP": ["2022"], "HTTP": [{"port": "9000", "subdomain": "ana-x"}]},
                 {"frp.2022": "tcp", "frp.9000": "http"}, ["frp.22", "frp.6006"], [2022, 9000], id="string-ports"),
])
def test_frp_ports_merge(user_frp, labels, absent, ports):
    settings = None if user_frp is None else {"FRP_PORTS": user_frp}
    spec, result = run_spec(settings=settings)
    assert result["settings_status"] in ("applied", "missing")
    for key, value in labels.items():
        assert spec["labels"][key] == value
    for key in absent:
        assert key not in spec["labels"]
    assert spec["exposed_ports"] == ports


# ------------------------------------------------------------------------------------------------
# Placement


@pytest.mark.parametrize("stack, node, changes, settings, action, placement, note", [
    pytest.param("ana-main", "node1", {}, None, "run", ["node1"], None, id="type-default-nodes"),
    pytest.param("ana-main", "node2", {}, None, "remove", ["node1"], None, id="type-default-elsewhere"),
    pytest.param("bor-main", "node2", {}, None, "run", ["node1", "node2"], None, id="admin-deployment-nodes"),
    pytest.param("bor-main", "node3", {}, None, "remove", ["node1", "node2"], None, id="admin-nodes-not-here"),
    pytest.param("ana-main", "node1", {}, {"DEPLOYMENT_NODES": ["node2", "node3"]}, "remove", ["node2", "node3"],
                 None, id="user-file-moves-away"),
    pytest.param("ana-main", "node3", {}, {"DEPLOYMENT_NODES": ["node2", "node3"]}, "run", ["node2", "node3"],
                 None, id="user-file-moves-here"),
    pytest.param("cene-thesis", "node3", {"DEPLOYMENT_NODES": ["node1", "node3"]}, None, "run", ["node3"],
                 "nodes not allowed for this container are ignored: node1", id="intersect-with-allowed"),
    pytest.param("cene-thesis", "node1", {"DEPLOYMENT_NODES": ["node1", "node3"]}, None, "remove", ["node3"],
                 "ignored: node1", id="not-allowed-node-removes"),
    pytest.param("cene-thesis", "node1", {"DEPLOYMENT_NODES": ["node1", "node3"], "ALLOWED_NODES": ["node1"]}, None,
                 "run", ["node1", "node3"], None, id="allowed-nodes-extends-type"),
    pytest.param("cene-thesis", "node1", {"ALLOWED_NODES": ["node1"]}, {"DEPLOYMENT_NODES": ["node1"]},
                 "run", ["node1"], None, id="user-file-uses-allowed-nodes"),
])
def test_placement(stack, node, changes, settings, action, placement, note):
    ccc = site(node, containers={stack: changes})
    result = resolve(stack, ccc=ccc, node=node, settings=settings)
    assert result["action"] == action
    assert result["placement"] == placement
    assert result["admin_errors"] == []
    if note:
        assert any(note in n for n in result["notes"])
    if action == "remove":
        assert result["reason"] == f"placed on {', '.join(placement)}"
        assert result["spec"] is None


def test_user_cannot_place_outside_allowed_nodes():
    # cene is a student (node3 only): asking for node1 is refused and cene stays on node3.
    result = resolve("cene-thesis", ccc=site("node1"), node="node1", settings={"DEPLOYMENT_NODES": ["node1"]})
    assert result["action"] == "remove" and result["placement"] == ["node3"]
    assert result["settings_status"] == "rejected"
    assert any("you may not use node 'node1'; allowed: node3" in m for m in result["user_messages"])


@pytest.mark.parametrize("changes", [
    pytest.param({"DEPLOYMENT_NODES": ["node1"]}, id="admin-lists-only-disallowed"),
    pytest.param({"DEPLOYMENT_NODES": ["node9"]}, id="unknown-node"),
])
def test_empty_placement_holds_and_tells_everyone(changes):
    result = resolve("cene-thesis", ccc=site("node3", containers={"cene-thesis": changes}), node="node3")
    assert result["action"] == "hold"
    assert result["placement"] == []
    assert any("no allowed node in DEPLOYMENT_NODES" in e for e in result["admin_errors"])
    assert any("There is no node to run this container on" in m for m in result["user_messages"])


@pytest.mark.parametrize("changes, action, purge, note", [
    pytest.param({"DISABLED": True}, "remove", False, None, id="disabled"),
    pytest.param({"DISABLED": "True"}, "remove", False, None, id="disabled-string"),
    pytest.param({"DISABLED": True, "PURGE_USER_DATA": True}, "remove", True, None, id="disabled-and-purge"),
    pytest.param({"PURGE_USER_DATA": True}, "run", False, "PURGE_USER_DATA is ignored", id="purge-alone-ignored"),
    pytest.param({"DISABLED": False, "PURGE_USER_DATA": True}, "run", False, "ignored", id="purge-not-disabled"),
])
def test_disabled_and_purge(changes, action, purge, note):
    result = resolve("ana-main", ccc=site(containers={"ana-main": changes}))
    assert result["action"] == action
    assert result["purge"] is purge
    if action == "remove":
        assert result["reason"].startswith("DISABLED")
    if note:
        assert any(note in n for n in result["notes"])


def test_purge_keeps_a_home_shared_with_an_active_stack():
    ccc = site(containers={"ana-main": {"DISABLED": True, "PURGE_USER_DATA": True}})
    result = resolve("ana-main", ccc=ccc)
    assert result["purge"] is True
    assert "ana-main" in result["storage_in_use"]  # ana-jupyter (active) uses STORAGE_NAME ana-main


# ------------------------------------------------------------------------------------------------
# GPUs


KEEP = object()


@pytest.mark.parametrize("stack, node, devices_on_node, changes, expected, note", [
    pytest.param("ana-main", "node1", KEEP, {}, [LAB1, LAB2], None, id="type-group"),
    pytest.param("bor-main", "node1", KEEP, {}, [LAB1, LAB2, STU1], None, id="plus-additional-group"),
    pytest.param("bor-main", "node2", KEEP, {}, NODE2_LAB, "device group 'device_student' has no GPUs on node2",
                 id="group-missing-on-node"),
    pytest.param("cene-thesis", "node3", KEEP, {}, NODE3_STU, None, id="student-node3"),
    pytest.param("ana-main", "node1", {"device_lab": [LAB1, LAB2], "device_x": [LAB2, STU1]},
                 {"containers": {"ana-main": {"ADDITIONAL_DEVICE_GROUPS": ["device_x"]}}},
                 [LAB1, LAB2, STU1], None, id="overlapping-groups-no-duplicates"),
    pytest.param("bor-main", "node1", {"device_student": [STU1, LAB1], "device_lab": [LAB1]}, {},
                 [LAB1, STU1], None, id="order-follows-type-then-additional"),
    pytest.param("ana-main", "node1", KEEP, {"user_types": {"researcher": {"allowed_device_groups": []}}}, [], None,
                 id="no-groups-no-gpus"),
    pytest.param("ana-main", "node1", None, {}, [], "device group 'device_lab' has no GPUs on node1",
                 id="node-without-compute-devices"),
    pytest.param("ana-main", "node1", {}, {}, [], "device group 'device_lab' has no GPUs on node1",
                 id="node-with-empty-compute-devices"),
])
def test_gpus(stack, node, devices_on_node, changes, expected, note):
    ccc = site(node, **copy.deepcopy(changes))
    if devices_on_node is not KEEP:
        ccc["node"]["compute_devices"] = copy.deepcopy(devices_on_node)
    spec, result = run_spec(stack, ccc=ccc, node=node)
    assert spec["device_ids"] == expected
    assert spec["environment"]["NVIDIA_VISIBLE_DEVICES"] == (",".join(expected) if expected else "void")
    if note:
        assert note in result["notes"]


# ------------------------------------------------------------------------------------------------
# Mounts


def researcher_table(email="ana.novak@example.org", home="ana-main", user="ana", tz=False, stack="ana-main"):
    user_dir = f"{SHARED}/user_data/{email}"
    table = [
        (f"{user_dir}/{home}", f"/home/{user}", False, None),
        (f"{user_dir}/container-settings", f"/home/{user}/.containers", False, None),
        (f"{SHARED}/apps", "/opt/apps", True, None),
        (user_dir, "/storage/user", False, None),
        (f"{SHARED}/group_data", "/storage/group", False, None),
        (f"{SHARED}/datasets", "/storage/datasets", False, None),
        (f"{LOCAL}/hdd/{email}", "/storage/local/hdd", False, None),
        (f"{LOCAL}/ssd/{email}", "/storage/local/ssd", False, None),
        (f"{LOCAL}/sshd/stacks/{stack}", "/home/.sshd", True, None),
    ]
    if tz:
        table += [(path, path, True, None) for path in TZ_FILES]
    table += [
        (f"{user_dir}/private", "/storage/private", False, "rslave"),
        (f"{SHARED}/private_data/lab", "/storage/private/lab", False, None),
    ]
    return table


def test_mounts_researcher_full_table():
    spec, _ = run_spec("ana-main")
    assert mount_table(spec) == researcher_table()
    assert spec["networks"] == ["lab-unrestricted", "claims"]


def test_mounts_student_full_table_is_restricted():
    spec, _ = run_spec("cene-thesis", ccc=site("node3"), node="node3")
    user_dir = f"{SHARED}/user_data/{CENE}"
    assert mount_table(spec) == [
        (f"{user_dir}/cene-thesis", "/home/cene", False, None),
        (f"{user_dir}/container-settings", "/home/cene/.containers", False, None),
        (f"{SHARED}/apps", "/opt/apps", True, None),
        (user_dir, "/storage/user", False, None),
        (f"{SHARED}/group_data", "/storage/group", True, None),
        (f"{SHARED}/datasets", "/storage/datasets", True, None),
        (f"{LOCAL}/hdd/{CENE}", "/storage/local/hdd", False, None),
        (f"{LOCAL}/ssd/{CENE}", "/storage/local/ssd", False, None),
        (f"{LOCAL}/sshd/stacks/cene-thesis", "/home/.sshd", True, None),
        (f"{user_dir}/private", "/storage/private", False, "rslave"),
        (f"{SHARED}/private_data/student", "/storage/private/student", False, None),
    ]
    assert spec["networks"] == ["student-restricted", "claims"]


@pytest.mark.parametrize("stack, changes, settings, expected", [
    pytest.param("ana-jupyter", {}, None, researcher_table(home="ana-main", stack="ana-jupyter"),
                 id="storage-name-shares-home"),
    pytest.param("ana-main", {}, {"USE_HOST_TIMEDATE": True}, researcher_table(tz=True), id="user-timedate"),
    pytest.param("ana-main", {"USE_HOST_TIMEDATE": True}, None, researcher_table(tz=True), id="admin-timedate"),
    pytest.param("ana-main", {"USE_HOST_TIMEDATE": True}, {"USE_HOST_TIMEDATE": False}, researcher_table(),
                 id="user-turns-timedate-off"),
    pytest.param("ana-main", {}, {"USER_NAME": "anna"}, researcher_table(user="anna"), id="user-name-moves-home"),
    pytest.param("ana-main", {"ADDITIONAL_PRIVATE_DATA_GROUPS": ["proj-x", "lab"]}, None,
                 researcher_table() + [(f"{SHARED}/private_data/proj-x", "/storage/private/proj-x", False, None)],
                 id="private-groups-deduplicated"),
    pytest.param("ana-main", {"ADMIN_USER_ACCESS": True}, None, researcher_table() + [
        (f"{SHARED}/user_data", "/storage/admin/users", False, None),
        (f"{SHARED}/private_data", "/storage/admin/privates", False, None),
        ("/var/log/ccc-salt", "/storage/admin/logs-node1", False, None),
    ], id="admin-user-access"),
    pytest.param("ana-main", {"ENABLE_DOCKER_ACCESS": True}, None,
                 researcher_table() + [("/var/run/docker.sock", "/var/run/docker.sock", False, None)],
                 id="docker-access"),
])
def test_mount_variants(stack, changes, settings, expected):
    spec, _ = run_spec(stack, ccc=site(containers={stack: changes}), settings=settings)
    assert mount_table(spec) == expected


def test_timedate_mounts_only_files_the_node_has():
    spec, _ = run_spec(settings={"USE_HOST_TIMEDATE": True}, tz=["/etc/localtime"])
    assert [m for m in mount_table(spec) if m[0].startswith("/etc/")] == [("/etc/localtime", "/etc/localtime", True, None)]


def test_docker_access_adds_group_and_cli():
    spec, _ = run_spec(ccc=site(containers={"ana-main": {"ENABLE_DOCKER_ACCESS": True}}),
                       settings={"INSTALL_PACKAGES": "htop", "INSTALL_REPOSITORY_KEYS": "https://example.org/key.gpg"},
                       docker_gid=4321)
    env = spec["environment"]
    assert env["USER_GROUPS"] == "docker=4321"
    assert env["INSTALL_PACKAGES"] == "docker-ce-cli htop"
    assert env["INSTALL_REPOSITORY_KEYS"] == "https://download.docker.com/linux/ubuntu/gpg,https://example.org/key.gpg"
    assert env["INSTALL_REPOSITORY_SOURCES"] == "https://download.docker.com/linux/ubuntu stable"


def test_docker_access_without_docker_group_holds():
    result = resolve(ccc=site(containers={"ana-main": {"ENABLE_DOCKER_ACCESS": True}}), docker_gid=None)
    assert result["action"] == "hold"
    assert any("needs a 'docker' group on node1" in e for e in result["admin_errors"])


def test_no_docker_access_no_user_groups():
    spec, _ = run_spec()
    assert "USER_GROUPS" not in spec["environment"]
    assert "/var/run/docker.sock" not in [m["target"] for m in spec["mounts"]]


def test_directories_to_create():
    _, result = run_spec()
    wanted = {d["path"]: (d["owner"], d["mode"]) for d in result["directories"]}
    user_dir = f"{SHARED}/user_data/{ANA}"
    assert wanted[f"{user_dir}/ana-main"] == ((1000, 1000), 0o750)
    assert wanted[f"{user_dir}/container-settings"] == ((1000, 1000), 0o755)
    assert f"{LOCAL}/sshd/.sshd" not in wanted  # host keys are per stack (ccc_hostkeys), not a shared folder


def test_user_folder_mounts_are_pinned_and_admin_roots_are_not():
    """Every source below a storage root names its root and components: the node mounts it from
    a descriptor into a pin folder; admin roots (apps, group data, datasets) are used as they are."""
    spec, _ = run_spec()
    pins = {m["target"]: m["pin"] for m in spec["mounts"] if m.get("pin")}
    user_data = f"{SHARED}/user_data"
    assert pins["/home/ana"] == {"name": "home", "root": user_data, "parts": [ANA, "ana-main"]}
    assert pins["/home/ana/.containers"] == {"name": "settings", "root": user_data, "parts": [ANA, "container-settings"]}
    assert pins["/storage/user"] == {"name": "user", "root": user_data, "parts": [ANA]}
    assert pins["/storage/private"] == {"name": "private", "root": user_data, "parts": [ANA, "private"], "shared": True}
    assert pins["/storage/local/hdd"]["root"] == f"{LOCAL}/hdd"
    assert pins["/storage/private/lab"] == {"name": "group-lab", "root": f"{SHARED}/private_data", "parts": ["lab"]}
    assert not {"/opt/apps", "/storage/group", "/storage/datasets", "/home/.sshd"} & set(pins)


def test_hardening_defaults_and_overrides():
    spec, _ = run_spec()
    assert spec["security_opt"] == ["no-new-privileges"]
    assert spec["cap_drop"] == ["MKNOD", "NET_RAW", "SETFCAP"]
    assert spec["pids_limit"] == 16384
    ccc = site(cluster={"hardening": {"pids_limit": 500}},
               containers={"ana-main": {"HARDENING": {"no_new_privileges": False, "cap_drop": ["net_raw"]}}})
    spec, _ = run_spec(ccc=ccc)
    assert (spec["security_opt"], spec["cap_drop"], spec["pids_limit"]) == ([], ["NET_RAW"], 500)
    spec, _ = run_spec(ccc=site(containers={"ana-main": {"RUN_PRIVILEGED": True}}))
    assert (spec["privileged"], spec["security_opt"], spec["cap_drop"]) == (True, ["seccomp=unconfined"], [])


# ------------------------------------------------------------------------------------------------
# Environment


def test_environment_contract():
    ccc = site(cluster={"nfs_user": {"uid": 4242, "gid": 4243}})
    settings = {
        "INSTALL_PACKAGES": "htop nano",
        "INSTALL_REPOSITORY_KEYS": "https://example.org/key.gpg",
        "INSTALL_REPOSITORY_SOURCES": "ppa:deadsnakes/ppa",
        "USER_PUBKEY_FROM_GITHUB": "ana-gh",
    }
    spec, result = run_spec(ccc=ccc, settings=settings, github={"ana-gh": ([GH_KEY, ANA_KEY], None)})
    env = spec["environment"]
    assert env["USER_NAME"] == "ana"
    assert env["USER_ID"] == "4242"
    assert env["USER_PUBKEY"] == f"{ANA_KEY}\n{GH_KEY}"  # pillar key first, GitHub keys after, no duplicates
    assert env["INSTALL_PACKAGES"] == "htop nano"
    assert env["INSTALL_REPOSITORY_KEYS"] == "https://example.org/key.gpg"
    assert env["INSTALL_REPOSITORY_SOURCES"] == "ppa:deadsnakes/ppa"
    assert env["RUNIT_STATUS_FILE"] == "/home/ana/.containers/ana-main.status"
    assert env["RUNIT_WORKING_ENV_FILE"] == "/home/ana/.containers/ana-main.env-backup"
    assert env["APPS"] == "/opt/apps/matlab/bin/matlab:/opt/apps/pycharm/bin/pycharm.sh,pycharm"
    assert env["CONTAINER_NAME"] == "ana-main"
    assert env["CONTAINER_NODE"] == "node1"
    assert env["CONTAINER_IMAGE"] == ADMIN_IMAGE
    assert env["NVIDIA_VISIBLE_DEVICES"] == f"{LAB1},{LAB2}"
    welcome = env["CONTAINER_WELCOME_MSG"]
    assert "'/home/ana/.containers/ana-main.yml'" in welcome and "/.container/" not in welcome
    assert "ana-main.deploy" in welcome
    assert "Pre-installed APPS: 'matlab pycharm'" in welcome
    assert result["user_messages"] == []
    assert spec["hostname"] == "node1" and spec["name"] == "ana-main"
    assert spec["restart_policy"] == "unless-stopped"


@pytest.mark.parametrize("settings, github, pubkey, message", [
    pytest.param({"USER_PUBKEY": GH_KEY}, {}, GH_KEY, None, id="user-key-replaces-admin-key"),
    pytest.param({"USER_PUBKEY": f"{GH_KEY}\n\n{ANA_KEY}\n"}, {}, f"{GH_KEY}\n{ANA_KEY}", None, id="blank-lines-dropped"),
    pytest.param({"USER_PUBKEY_FROM_GITHUB": "ana-gh"}, {"ana-gh": ([GH_KEY], "GitHub unreachable; the keys fetched earlier are used")},
                 f"{ANA_KEY}\n{GH_KEY}", "USER_PUBKEY_FROM_GITHUB: GitHub unreachable", id="github-error-uses-cache"),
    pytest.param({"USER_PUBKEY_FROM_GITHUB": "nobody"}, {}, ANA_KEY, "no such GitHub user 'nobody'", id="github-unknown"),
])
def test_pubkeys(settings, github, pubkey, message):
    spec, result = run_spec(settings=settings, github=github)
    assert spec["environment"]["USER_PUBKEY"] == pubkey
    if message:
        assert any(message in m for m in result["user_messages"])
    else:
        assert result["user_messages"] == []


def test_extra_envs_added_but_never_override_the_contract():
    ccc = site(containers={"ana-main": {"EXTRA_ENVS": {"WANDB_MODE": "offline", "THREADS": 8, "USER_NAME": "root",
                                                       "NVIDIA_VISIBLE_DEVICES": "all"}}})
    spec, _ = run_spec(ccc=ccc)
    env = spec["environment"]
    assert env["WANDB_MODE"] == "offline" and env["THREADS"] == "8"
    assert env["USER_NAME"] == "ana"
    assert env["NVIDIA_VISIBLE_DEVICES"] == f"{LAB1},{LAB2}"


@pytest.mark.parametrize("extra", [{"lower-case": "x"}, {"OK": ["not", "scalar"]}, {"BAD NAME": "x"}])
def test_bad_extra_envs_hold(extra):
    result = resolve(ccc=site(containers={"ana-main": {"EXTRA_ENVS": extra}}))
    assert result["action"] == "hold"
    assert any("EXTRA_ENVS" in e for e in result["admin_errors"])


# ------------------------------------------------------------------------------------------------
# Labels


def http_entry(**fields):
    return {"FRP_PORTS": {"HTTP": [{"port": 6006, "subdomain": "ana-tb", **fields}]}}


@pytest.mark.parametrize("settings, present, absent", [
    pytest.param(None, {"frp.22": "tcp", "frp.22.health_check": "false", "frp.6006": "http",
                        "frp.6006.http.subdomain": "node1-ana-tb", "frp.6006.http.username": "ana",
                        "frp.6006.http.password": "change-me", "frp.6006.health_check": "false"}, [], id="sample"),
    pytest.param(http_entry(), {"frp.6006": "http", "frp.6006.health_check": "false"},
                 ["frp.6006.http.username", "frp.6006.http.password"], id="no-pass-no-auth"),
    pytest.param(http_entry(**{"pass": "s3cret"}), {"frp.6006.http.username": "ana", "frp.6006.http.password": "s3cret"},
                 [], id="username-defaults-to-user-name"),
    pytest.param({**http_entry(**{"pass": "s3cret"}), "USER_NAME": "anna"}, {"frp.6006.http.username": "anna"}, [],
                 id="username-follows-user-setting"),
    pytest.param(http_entry(**{"pass": "s3cret", "user": "viewer"}), {"frp.6006.http.username": "viewer"}, [],
                 id="explicit-user"),
    pytest.param(http_entry(https_without_pass=True), {"frp.6006": "https"},
                 ["frp.6006.http.username", "frp.6006.http.password"], id="https-without-pass"),
    pytest.param(http_entry(subdomain_hostname_prefix=False), {"frp.6006.http.subdomain": "ana-tb"}, [],
                 id="unprefixed"),
    pytest.param(http_entry(health_check=True), {"frp.6006.health_check": "true"}, [], id="health-check-bool"),
    pytest.param(http_entry(health_check="True"), {"frp.6006.health_check": "true"}, [], id="health-check-word"),
    pytest.param(http_entry(**{"pass": 'it\'s "quoted", {x}'}), {"frp.6006.http.password": 'it\'s "quoted", {x}'},
                 [], id="quotes-stay-inside-the-value"),
    pytest.param({"FRP_PORTS": {"TCP": [6006], "HTTP": [{"port": 6006, "subdomain": "ana-tb"}]}},
                 {"frp.6006": "http"}, [], id="http-wins-over-tcp"),
])
def test_frp_labels(settings, present, absent):
    spec, result = run_spec(settings=settings)
    assert result["settings_status"] in ("applied", "missing"), result["user_messages"]
    labels = spec["labels"]
    for key, value in present.items():
        assert labels[key] == value, key
    for key in absent:
        assert key not in labels
    assert labels["frp.enabled"] == "true"
    assert labels["frp.notify_email"] == ANA
    assert all(isinstance(v, str) for v in labels.values())


@pytest.mark.parametrize("stack, node, identity", [
    pytest.param("ana-main", "node1", {"ccc-user.name": "Ana Novak", "ccc-user.email": ANA}, id="no-mentor"),
    pytest.param("bor-main", "node1", {"ccc-user.name": "Bor Kralj", "ccc-user.email": BOR,
                                        "ccc-user.mentor": "Ana Novak"}, id="mentor"),
])
def test_identity_and_management_labels(stack, node, identity):
    spec, _ = run_spec(stack, node=node)
    labels = spec["labels"]
    assert {k: v for k, v in labels.items() if k.startswith("ccc-user.")} == identity
    assert labels["ccc.managed-by"] == "ccc-salt"
    assert labels["ccc.stack"] == stack
    assert len(labels["ccc.spec-hash"]) == 20 and int(labels["ccc.spec-hash"], 16) >= 0


def test_image_frp_labels_not_granted_are_voided():
    image_labels = {"frp.9999": "http", "frp.9999.http.subdomain": "evil", "frp.9999.http.domains": "bank.example",
                    "frp.22": "tcp", "frp.enabled": "true", "org.opencontainers.image.title": "base"}
    spec, _ = run_spec(images={ADMIN_IMAGE: image_labels})
    labels = spec["labels"]
    assert [labels[k] for k in ("frp.9999", "frp.9999.http.subdomain", "frp.9999.http.domains")] == ["", "", ""]
    assert labels["frp.22"] == "tcp" and labels["frp.enabled"] == "true"
    assert "org.opencontainers.image.title" not in labels  # not ours to set; harmless
    assert 9999 not in spec["exposed_ports"]


def test_spec_hash_changes_with_user_settings_only():
    def spec_hash(**kwargs):
        return run_spec(**kwargs)[0]["labels"]["ccc.spec-hash"]

    base = spec_hash()
    assert spec_hash() == base
    assert spec_hash(settings="ana-main:\n#  SHM_SIZE: 4g\n") == base  # commented file = no file
    assert spec_hash(settings={}) == base
    four = spec_hash(settings={"SHM_SIZE": "4g"})
    assert four != base
    assert spec_hash(settings={"SHM_SIZE": "4g"}) == four
    assert spec_hash(settings={"SHM_SIZE": "4096m"}) == four  # same size, same container
    assert spec_hash(settings={"SHM_SIZE": "10t"}, last_good={"SHM_SIZE": "4g"}) == four  # rejected: last good kept
    assert spec_hash(settings={"INSTALL_PACKAGES": "htop"}) != base
    assert spec_hash(settings={"FRP_PORTS": {"TCP": [22, 2222]}}) != base
    # messages never reach the spec: a GitHub outage does not recreate the container
    assert spec_hash(settings={"USER_PUBKEY_FROM_GITHUB": "ana-gh"}, github={"ana-gh": ([GH_KEY], "outage")}) == \
        spec_hash(settings={"USER_PUBKEY_FROM_GITHUB": "ana-gh"}, github={"ana-gh": ([GH_KEY], None)})


def test_spec_hash_independent_of_other_containers():
    alone = run_spec("ana-main")[0]["labels"]["ccc.spec-hash"]
    ccc = site(containers={"bor-main": {"SHM_SIZE": "16g", "INSTALL_PACKAGES": "vim"}})
    assert run_spec("ana-main", ccc=ccc)[0]["labels"]["ccc.spec-hash"] == alone


# ------------------------------------------------------------------------------------------------
# Subdomains (taken / reserved)


@pytest.mark.parametrize("stack, http, fragment", [
    pytest.param("ana-main", {"port": 80, "subdomain": "ana-jupyter"}, "'ana-jupyter' is already used", id="other-stack"),
    pytest.param("bor-main", {"port": 80, "subdomain": "ana-tb"}, "'ana-tb' is already used", id="other-user"),
    pytest.param("bor-main", {"port": 80, "subdomain": "node1-ana-tb", "subdomain_hostname_prefix": False},
                 "already used", id="unprefixed-collides-with-prefixed"),
    pytest.param("bor-main", {"port": 80, "subdomain": "node2-ana-jupyter", "subdomain_hostname_prefix": False},
                 "already used", id="collides-on-another-node"),
    pytest.param("bor-main", {"port": 80, "subdomain": "portainer", "subdomain_hostname_prefix": False},
                 "'portainer' is reserved", id="reserved"),
    pytest.param("bor-main", {"port": 80, "subdomain": "metrics"}, "-metrics' is reserved for cluster services", id="reserved-prefixed"),
    pytest.param("bor-main", {"port": 80, "subdomain": "node3-monitor", "subdomain_hostname_prefix": False},
                 "'node3-monitor' is reserved", id="reserved-other-node"),
])
def test_subdomain_claims_are_refused(stack, http, fragment):
    ccc = site()
    taken = ccc_subdomains.taken_subdomains(ccc, {}, except_stack=stack)
    result = resolve(stack, ccc=ccc, settings={"FRP_PORTS": {"HTTP": [http]}}, taken=taken)
    assert result["settings_status"] == "rejected"
    assert any(fragment in m for m in result["user_messages"]), result["user_messages"]
    assert f"frp.{http['port']}" not in result["spec"]["labels"]


def test_own_subdomain_may_be_kept_and_a_free_one_taken():
    ccc = site()
    taken = ccc_subdomains.taken_subdomains(ccc, {}, except_stack="ana-main")
    spec, result = run_spec(ccc=ccc, settings={"FRP_PORTS": {"HTTP": [{"port": 6006, "subdomain": "ana-tb"},
                                                                      {"port": 7007, "subdomain": "ana-free"}]}},
                            taken=taken)
    assert result["settings_status"] == "applied"
    assert spec["labels"]["frp.7007.http.subdomain"] == "node1-ana-free"


def test_accepted_user_subdomains_count_as_taken():
    ccc = site()
    taken = ccc_subdomains.taken_subdomains(ccc, {"bor-main": {"FRP_PORTS": {"HTTP": [{"port": 80, "subdomain": "bor-web"}]}}},
                                            except_stack="ana-main")
    result = resolve(ccc=ccc, settings={"FRP_PORTS": {"HTTP": [{"port": 80, "subdomain": "bor-web"}]}}, taken=taken)
    assert result["settings_status"] == "rejected"


# ------------------------------------------------------------------------------------------------
# Images


def test_user_image_outside_policy_is_rejected():
    calls = []
    spec, result = run_spec(settings={"CONTAINER_IMAGE": "evil.example.com/miner:latest", "SHM_SIZE": "4g"}, calls=calls)
    assert spec["image"] == ADMIN_IMAGE and spec["environment"]["CONTAINER_IMAGE"] == ADMIN_IMAGE
    assert spec["shm_size"] == 8 * GiB  # the whole file is refused
    assert any("'evil.example.com/miner:latest' is not allowed" in m for m in result["user_messages"])
    assert all(ref != "evil.example.com/miner:latest" for ref, _ in calls)  # never even looked up


@pytest.mark.parametrize("image, credentials", [
    pytest.param("vicoslab/ccc:other-latest", False, id="public-prefix-anonymous"),
    pytest.param("registry.example.org/ccc/private:1", True, id="credentialed-prefix"),
])
def test_user_image_in_policy_is_used(image, credentials):
    calls = []
    spec, result = run_spec(settings={"CONTAINER_IMAGE": image}, calls=calls)
    assert spec["image"] == image and spec["environment"]["CONTAINER_IMAGE"] == image
    assert (image, credentials) in calls
    assert result["user_messages"] == []


def test_missing_user_image_falls_back_with_image_error():
    wanted = "vicoslab/ccc:does-not-exist"
    spec, result = run_spec(settings={"CONTAINER_IMAGE": wanted, "SHM_SIZE": "4g"}, images={wanted: None})
    assert spec["image"] == ADMIN_IMAGE
    assert spec["shm_size"] == 4 * GiB  # the rest of the file still applies
    assert result["settings_status"] == "applied"
    image_errors = [m for m in result["user_messages"] if m.startswith("IMAGE ERROR")]
    assert len(image_errors) == 1 and wanted in image_errors[0] and ADMIN_IMAGE in image_errors[0]


def test_missing_admin_image_holds():
    result = resolve(images={ADMIN_IMAGE: None})
    assert result["action"] == "hold"
    assert any(f"the admin image {ADMIN_IMAGE!r} is not available" in e for e in result["admin_errors"])
    assert result["spec"] is None


def test_admin_image_failure_is_not_the_users_fault():
    wanted = "vicoslab/ccc:other-latest"
    result = resolve(settings={"CONTAINER_IMAGE": wanted}, images={ADMIN_IMAGE: None})
    assert result["action"] == "run" and result["spec"]["image"] == wanted


# ------------------------------------------------------------------------------------------------
# Admin records


@pytest.mark.parametrize("changes, fragment", [
    pytest.param({"USER_EMAIL": "not-an-email"}, "no entry in ccc:users", id="unknown-email"),
    pytest.param({"USER_TYPE": "wizard"}, "USER_TYPE 'wizard' is not defined", id="unknown-type"),
    pytest.param({"USER_NAME": "root"}, "reserved for the system", id="admin-user-name-root"),
    pytest.param({"USER_FULLNAME": "Ana\nNovak"}, "single line", id="multiline-fullname"),
    pytest.param({"STORAGE_NAME": "../bor"}, "STORAGE_NAME", id="storage-path"),
    pytest.param({"CONTAINER_IMAGE": "vicoslab/ccc:base; rm -rf /"}, "CONTAINER_IMAGE", id="admin-image-metachar"),
])
def test_invalid_admin_record_holds(changes, fragment):
    result = resolve(ccc=site(containers={"ana-main": changes}))
    assert result["action"] == "hold"
    assert any(fragment in e for e in result["admin_errors"]), result["admin_errors"]


def test_root_only_folders_inside_a_bind_are_covered_by_an_empty_tmpfs():
    """``ccc_covers``: the state dir (and the host keys in it) lies below the user-data root that
    ADMIN_USER_ACCESS containers mount; only those containers get a cover (and a new spec hash),
    the folder made root-only first so Docker never creates the mount point itself."""
    spec, result = run_spec("ana-main", ccc=site(containers={"ana-main": {"ADMIN_USER_ACCESS": True}}))
    assert spec["covers"] == ["/storage/admin/users/.ccc-salt"]
    assert {"root": f"{SHARED}/user_data", "parts": [".ccc-salt"], "owner": (0, 0), "mode": 0o700,
            "path": f"{SHARED}/user_data/.ccc-salt"} in result["directories"]
    plain, _ = run_spec("ana-main")
    assert "covers" not in plain
    # A state dir the admin put on the group share (every container mounts it) is covered everywhere;
    # a key store below it needs no cover of its own.
    moved = {"cluster": {"state_dir": f"{SHARED}/group_data/.ccc", "host_keys": {"store_dir": f"{SHARED}/group_data/.ccc/k"}}}
    spec, _ = run_spec("ana-main", ccc=site(containers={"ana-main": {"ADMIN_USER_ACCESS": True}}, **moved))
    assert spec["covers"] == ["/storage/group/.ccc"]
