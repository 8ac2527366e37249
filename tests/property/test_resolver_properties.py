"""Property tests of the resolver's boundary: for generated settings files (any YAML a user can
write, within and beyond the schema), generated last accepted settings, generated admin records
and node GPU maps, ``ccc_resolver.resolve_container`` either refuses with short messages or
builds a spec in which

* every bind source is a pinned folder of the container's own user (or of a data group it is
  granted) below a storage root, or one of the few admin-fixed paths, and the user's file changes
  no source (only ``USE_HOST_TIMEDATE`` adds the time zone files);
* every label is one the contract has (``frp.<port>`` for a real port, the identity and
  management labels), with no FRP template syntax in any ``frp.*`` value;
* the GPUs are exactly those of the container's device groups on this node (none means ``void``);
* the networks are the user type's access class plus the claims network;
* the ``.deploy`` report stays under its cap with one ``result:`` line.
"""

import copy
import json
import os
import re

import jsonschema
import pytest
import yaml
from hypothesis import event, given
from hypothesis import strategies as st

from support import strategies as gen
from support.hypothesis_profiles import examples
from support.site import REPO, sample_ccc

import ccc_pillar  # noqa: E402
import ccc_quote  # noqa: E402
import ccc_report  # noqa: E402
import ccc_resolver  # noqa: E402
import ccc_subdomains  # noqa: E402
import ccc_rules  # noqa: E402
import ccc_schema  # noqa: E402

SHIPPED_SCHEMA = json.loads((REPO / "schema" / "container-settings.schema.json").read_text())
SITES = {node: sample_ccc(node) for node in gen.NODES}
STACKS = [entry["STACK_NAME"] for entry in SITES["node1"]["containers"]]
TZ_FILES = ["/etc/timezone", "/etc/localtime"]
# A refusal's message: a sentence, a quoted value or two (``ccc_quote``) and the admin's lists.
LONGEST_MESSAGE = 2 * ccc_quote.QUOTE_CHARS + 300
MESSAGES_AT_MOST = ccc_quote.MAX_PROBLEMS + 1 + 4  # the problems, "and N more", and the notes around them
GPU_UUID = re.compile(r"(GPU|MIG)-[0-9A-Za-z-]{4,64}")
FRP_KEY = re.compile(r"^frp\.(?P<port>[0-9]+)(?P<rest>|\.health_check|\.http\.(subdomain|username|password))$")
CONTRACT_LABELS = {"frp.enabled", "frp.notify_email", "ccc-user.name", "ccc-user.email", "ccc-user.mentor",
                   ccc_rules.MANAGED_BY_LABEL, ccc_rules.STACK_LABEL, ccc_rules.SPEC_HASH_LABEL}
CONTRACT_ENV = {"USER_NAME", "USER_ID", "USER_PUBKEY", "RUNIT_STATUS_FILE", "RUNIT_WORKING_ENV_FILE", "APPS",
                "CONTAINER_NAME", "CONTAINER_NODE", "CONTAINER_IMAGE", "CONTAINER_WELCOME_MSG",
                "NVIDIA_VISIBLE_DEVICES", "INSTALL_REPOSITORY_KEYS", "INSTALL_REPOSITORY_SOURCES", "INSTALL_PACKAGES",
                "USER_GROUPS"}
GPU = st.sampled_from(["GPU-5f1c2a64-8a1e-4b7e-9d1e-0c0a11110001", "GPU-5f1c2a64-8a1e-4b7e-9d1e-0c0a11110002",
                       "MIG-7a2b3c4d-0000-4000-8000-000000000201", "GPU-aaaa", "all", "0", "none"]) | gen.texts
GROUPS = st.sampled_from(["device_lab", "device_student", "lab", "student", "lab-shared", "nope"]) | gen.texts
ADMIN_SHAPED = {
    "STORAGE_NAME": st.sampled_from(["ana-main", "..", "../../etc", "a/b", ".hidden", "x" * 70]) | gen.texts,
    "USER_NAME": gen.SHAPED["USER_NAME"],
    "USER_FULLNAME": gen.texts, "USER_MENTOR": gen.texts,
    "ALLOWED_NODES": st.lists(st.sampled_from(gen.NODES) | gen.texts, max_size=3),
    "ADDITIONAL_DEVICE_GROUPS": st.lists(GROUPS, max_size=3),
    "ADDITIONAL_PRIVATE_DATA_GROUPS": st.lists(GROUPS, max_size=3),
    "ADDITIONAL_PRIVATE_DATA_MOUNT_GROUPS": st.lists(GROUPS, max_size=3),
    "ADMIN_USER_ACCESS": st.booleans(), "ENABLE_DOCKER_ACCESS": st.booleans(), "RUN_PRIVILEGED": st.booleans(),
    "DISABLED": st.booleans() | gen.scalars, "PURGE_USER_DATA": st.booleans(),
    "EXTRA_ENVS": st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True) | gen.texts, gen.scalars,
                                  max_size=3),
    "HARDENING": gen.values,
    **{key: strategy for key, strategy in gen.SHAPED.items() if key != "USER_NAME"},
}


class Site(tuple):
    """``(ccc, stack, node)`` shown by what was changed in the sample site (a failing example
    prints that, not the whole pillar)."""

    def __new__(cls, ccc, stack, node, changes):
        site = super().__new__(cls, (ccc, stack, node))
        site.changes = changes
        return site

    def __repr__(self):
        return f"Site(stack={self[1]!r}, node={self[2]!r}, changes={self.changes!r})"


@st.composite
def sites(draw):
    """The sample site with one container's admin record, the node's GPU map and the user
    types' device grants changed by generated values."""
    node = draw(st.sampled_from(gen.NODES))
    ccc = copy.deepcopy(SITES[node])
    stack = draw(st.sampled_from(STACKS))
    entry = next(e for e in ccc["containers"] if e["STACK_NAME"] == stack)
    changes = {}
    for key in draw(st.lists(st.sampled_from(sorted(ADMIN_SHAPED)), max_size=3, unique=True)):
        entry[key] = changes[key] = draw(ADMIN_SHAPED[key] | gen.values) if draw(st.integers(0, 4)) else draw(gen.values)
    if draw(st.integers(0, 3)) == 0:
        ccc["node"]["compute_devices"] = changes["compute_devices"] = draw(
            st.dictionaries(GROUPS, st.lists(GPU, max_size=3) | GPU | gen.values, max_size=3) | gen.values)
    if draw(st.integers(0, 3)) == 0:
        kind = draw(st.sampled_from(sorted(ccc["user_types"])))
        ccc["user_types"][kind]["allowed_device_groups"] = changes[f"{kind}.allowed_device_groups"] = draw(
            st.lists(GROUPS, max_size=3) | gen.values)
    return Site(ccc, stack, node, changes)


def facts(ccc, node, image_labels):
    return ccc_resolver.NodeFacts(
        node, compute_devices=(ccc.get("node") or {}).get("compute_devices"), docker_gid=998,
        host_timezone_files=TZ_FILES, image_lookup=lambda ref, credentials: ({"labels": image_labels}, None))


def resolve(ccc, stack, node, text=None, last_good=None, image_labels=None):
    return ccc_resolver.resolve_container(ccc, stack, facts(ccc, node, image_labels or {}), settings_text=text,
                                          last_good=last_good, taken=ccc_subdomains.taken_subdomains(ccc, {}, stack))


def storage_roots(cluster):
    nfs, local = cluster["mount_points"]["nfs"], cluster["mount_points"]["local"]
    return nfs, local


def check_mounts(result, record, user_type, cluster, effective):
    nfs, local = storage_roots(cluster)
    email, stack = record["USER_EMAIL"], record["STACK_NAME"]
    data_groups = ccc_pillar.granted(user_type, record, "private_data_groups")
    fixed = {nfs["apps_data"], nfs["group_data"], nfs["dataset_data"], os.path.join(local["sshd_data"], "stacks", stack)}
    if ccc_rules.truthy(effective.get("USE_HOST_TIMEDATE")):
        fixed |= set(TZ_FILES)
    if ccc_rules.truthy(record.get("ADMIN_USER_ACCESS")):
        fixed |= {nfs["user_data"], nfs["private_data"], cluster["admin_log_dir"]}
    if ccc_rules.truthy(record.get("ENABLE_DOCKER_ACCESS")):
        fixed.add("/var/run/docker.sock")
    for mount in result["spec"]["mounts"]:
        pin = mount.get("pin")
        if pin is None:
            assert mount["source"] in fixed, mount
            continue
        parts = pin["parts"]
        assert all(isinstance(p, str) and p and "/" not in p and p not in (".", "..") for p in parts), pin
        assert mount["source"] == os.path.join(pin["root"], *parts)
        assert os.path.normpath(mount["source"]).startswith(pin["root"].rstrip("/") + "/"), pin
        if pin["root"] == nfs["private_data"]:
            assert parts in ([group] for group in data_groups) and ccc_rules.is_stack_name(parts[0]), pin
        else:
            assert pin["root"] in (nfs["user_data"], local["hdd_data"], local["ssd_data"]), pin
            assert parts[0] == email and all(ccc_rules.is_stack_name(p) or p == email for p in parts), pin


def check_labels(spec, record, effective, image_labels):
    ports = set()
    for key, value in spec["labels"].items():
        assert isinstance(key, str) and isinstance(value, str), (key, value)
        found = FRP_KEY.match(key)
        if key in CONTRACT_LABELS:
            pass
        elif found:
            port = int(found.group("port"))
            assert 1 <= port <= 65535 and found.group("port") == str(port), key
            if found.group("rest") == "":
                assert value in ("tcp", "http", "https") or (value == "" and key in image_labels), (key, value)
                if value:
                    ports.add(port)
            elif found.group("rest") == ".health_check":
                assert value in ("true", "false"), (key, value)
        else:
            assert key.startswith("frp.") and key in image_labels and value == "", (key, value)  # voided
        if key.startswith("frp."):
            assert "{{" not in value and "}}" not in value, (key, value)
            assert not re.search(r"[\x00-\x1f\x7f]", value), (key, value)
    assert spec["labels"]["frp.notify_email"] == record["USER_EMAIL"]
    assert spec["labels"][ccc_rules.STACK_LABEL] == record["STACK_NAME"]
    assert set(spec["exposed_ports"]) == ports and all(isinstance(p, int) for p in spec["exposed_ports"])


def check_spec(result, ccc, node, image_labels, effective):
    record = result["record"]
    cluster = ccc_pillar.cluster_settings(ccc)
    user_type = ccc_pillar.user_type_of(ccc, record)
    spec = result["spec"]
    assert node in result["placement"] and set(result["placement"]) <= set(result["allowed_nodes"])
    check_mounts(result, record, user_type, cluster, effective)
    check_labels(spec, record, effective, image_labels)
    # GPUs: exactly those of the granted groups on this node; none is "void", never "all".
    devices = (ccc.get("node") or {}).get("compute_devices") or {}
    expected = []
    for group in ccc_pillar.granted(user_type, record, "device_groups"):
        listed = devices.get(group) if isinstance(devices, dict) and isinstance(group, str) else None
        for uuid in listed if isinstance(listed, list) else []:
            if uuid not in expected and isinstance(uuid, str) and GPU_UUID.fullmatch(uuid):
                expected.append(uuid)
    assert spec["device_ids"] == expected
    assert spec["environment"]["NVIDIA_VISIBLE_DEVICES"] == (",".join(expected) or "void")
    # Networks: the access class's, plus claims.
    networks = list(cluster["access_networks"][user_type["access"]])
    networks += [cluster["claims_network"]] if cluster["claims_network"] not in networks else []
    assert spec["networks"] == networks
    extra = record.get("EXTRA_ENVS") if isinstance(record.get("EXTRA_ENVS"), dict) else {}
    assert set(spec["environment"]) <= CONTRACT_ENV | set(map(str, extra))
    assert spec["privileged"] is ccc_rules.truthy(record.get("RUN_PRIVILEGED"))


def check_report(result):
    text, _ = ccc_report.feedback_report(result, "the container was created", "2026-01-01 00:00:00 UTC")
    assert len(text.encode()) <= ccc_report.MAX_REPORT_BYTES
    assert sum(line.startswith("result: ") for line in text.split("\n")) == 1
    assert all(isinstance(m, str) for m in result["user_messages"])


def check(result, ccc, stack, node, image_labels=None, last_good=None):
    """The properties every resolution has; returns it. ``last_good``: the last accepted
    settings the resolver had (a rejected file falls back on what of them still passes)."""
    assert result["action"] in ("run", "remove", "hold") and result["stack"] == stack
    check_report(result)
    if result["settings_status"] == "rejected":
        assert result["settings_to_store"] is None
        assert 1 <= len(result["user_messages"]) <= MESSAGES_AT_MOST + len(result["notes"])
        assert all(len(m) <= LONGEST_MESSAGE for m in result["user_messages"]), result["user_messages"]
    if result["settings_status"] == "applied":
        stored = result["settings_to_store"]
        assert isinstance(stored, dict) and set(stored) <= set(ccc_schema.USER_SETTABLE_KEYS)
    if result["action"] == "run":
        overrides = result["settings_to_store"] or {}
        if result["settings_status"] == "rejected" and isinstance(last_good, dict):
            overrides = last_good  # at most these keys apply (each re-checked)
        effective = {**result["record"], **overrides}
        check_spec(result, ccc, node, image_labels or {}, effective)
    return result


@examples(5)
@given(site=sites(), data=st.data())
def test_any_settings_file_is_refused_briefly_or_gives_a_spec_within_the_contract(site, data):
    ccc, stack, node = site
    text = data.draw(gen.settings_texts(stack), label="settings file")
    image_labels = data.draw(st.dictionaries(st.sampled_from(["frp.22", "frp.80.http.password", "frp.enabled"])
                                             | gen.texts, gen.texts, max_size=2), label="image labels")
    result = check(resolve(ccc, stack, node, text, image_labels=image_labels), ccc, stack, node, image_labels)
    event(f"{result['action']}, settings {result['settings_status']}")
    if result["action"] != "run":
        return
    # The user's file changes no bind source (the time zone files aside).
    admin = resolve(ccc, stack, node, image_labels=image_labels)
    if admin["action"] == "run":
        sources = {m["source"] for m in result["spec"]["mounts"]} - set(TZ_FILES)
        assert sources == {m["source"] for m in admin["spec"]["mounts"]} - set(TZ_FILES)


@examples(2)
@given(node=st.sampled_from(gen.NODES), frp=gen.VALID["FRP_PORTS"] | gen.SHAPED["FRP_PORTS"],
       image_labels=st.dictionaries(st.sampled_from(["frp.22", "frp.8080", "frp.80.http.password"]), gen.texts))
def test_any_frp_ports_give_only_the_contracts_labels(node, frp, image_labels):
    """The FRP part of the first property, where it is most often reached: a container that runs
    everywhere (``bor-main``), any ``FRP_PORTS`` a user writes (close to the rules and not)."""
    ccc = SITES[node]
    result = check(resolve(ccc, "bor-main", node, yaml.safe_dump({"bor-main": {"FRP_PORTS": frp}}),
                           image_labels=image_labels), ccc, "bor-main", node, image_labels)
    event(f"{result['action']}, settings {result['settings_status']}")


@examples(2)
@given(site=sites(), last_good=gen.values | gen.sections(), text=st.sampled_from(["{x: 1}", "[", None]))
def test_any_last_accepted_settings_are_rechecked_key_by_key(site, last_good, text):
    """A rejected (or unreadable) file falls back on the last accepted settings, whatever they
    hold now: each key is re-checked and kept only if today's rules allow it."""
    ccc, stack, node = site
    result = check(resolve(ccc, stack, node, text, last_good=last_good), ccc, stack, node, last_good=last_good)
    if text is None:
        assert result["settings_status"] in ("missing", None)  # None: held or disabled before reading it


@examples(2)
@given(section=gen.sections(max_keys=8))
def test_a_section_the_validator_accepts_is_one_the_shipped_schema_accepts(section):
    """What passes the cheap checks and the cluster rules also passes the schema users' editors
    check against, and a section is never accepted with a key a user may not set."""
    if ccc_schema.validate_user_settings(section, "ana-main", {}):
        return
    jsonschema.validate({"ana-main": section}, SHIPPED_SCHEMA)
    assert set(section) <= set(ccc_schema.USER_SETTABLE_KEYS)


@pytest.mark.parametrize("port", ["99999", "65536", "70000"])
def test_a_port_above_65535_written_as_text_is_refused(port):
    """Found by the properties above: the schema took any 1-5 digit text as a port, so
    ``TCP: ["99999"]`` became the label ``frp.99999`` and Docker's exposed port 99999."""
    ccc = SITES["node1"]
    for section in ({"FRP_PORTS": {"TCP": [port]}}, {"FRP_PORTS": {"HTTP": [{"port": port, "subdomain": "x"}]}}):
        result = resolve(ccc, "ana-main", "node1", yaml.safe_dump({"ana-main": section}))
        assert result["settings_status"] == "rejected"
        assert any("FRP_PORTS" in m and port in m for m in result["user_messages"]), result["user_messages"]
    accepted = resolve(ccc, "ana-main", "node1", yaml.safe_dump({"ana-main": {"FRP_PORTS": {"TCP": ["65535"]}}}))
    assert accepted["settings_status"] == "applied" and 65535 in accepted["spec"]["exposed_ports"]


@pytest.mark.parametrize("compute_devices, visible", [
    pytest.param({"device_lab": ["all"]}, "void", id="all-in-the-list"),
    pytest.param({"device_lab": "GPU-5f1c2a64-8a1e-4b7e-9d1e-0c0a11110001"}, "void", id="a-string-not-a-list"),
    pytest.param({"device_lab": ["GPU-5f1c2a64-8a1e-4b7e-9d1e-0c0a11110001", "0"]},
                 "GPU-5f1c2a64-8a1e-4b7e-9d1e-0c0a11110001", id="an-index-next-to-a-uuid"),
    pytest.param(["device_lab"], "void", id="not-a-mapping"),
])
def test_a_malformed_gpu_map_never_widens_the_gpus(compute_devices, visible):
    """Found by the properties above: a node's ``compute_devices`` entry was used as it stood, so
    ``device_lab: [all]`` gave the container ``NVIDIA_VISIBLE_DEVICES=all`` (every GPU of the
    node), a bare string gave its characters, and a list instead of a mapping crashed the run."""
    ccc = copy.deepcopy(SITES["node1"])
    ccc["node"]["compute_devices"] = compute_devices
    result = resolve(ccc, "ana-main", "node1")
    assert result["action"] == "run"
    assert result["spec"]["environment"]["NVIDIA_VISIBLE_DEVICES"] == visible
    assert result["spec"]["device_ids"] == ([] if visible == "void" else [visible])


def test_a_device_grant_that_is_not_a_name_does_not_crash_the_run():
    """Found by the properties above: a user type's ``allowed_device_groups: [[a, b]]`` (a nested
    list) raised TypeError in the resolver, failing every container of the run."""
    ccc = copy.deepcopy(SITES["node1"])
    ccc["user_types"]["researcher"]["allowed_device_groups"] = [["device_lab"], "device_lab"]
    result = resolve(ccc, "ana-main", "node1")
    assert result["action"] == "run"
    assert result["device_groups"] == {"device_lab": ["GPU-5f1c2a64-8a1e-4b7e-9d1e-0c0a11110001",
                                                      "GPU-5f1c2a64-8a1e-4b7e-9d1e-0c0a11110002"]}
    assert any("[\'device_lab\']" in note or "['device_lab']" in note for note in result["notes"]), result["notes"]
