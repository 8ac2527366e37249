"""Property tests of the migration tool's boundary: an imported inventory is input, not code.
For generated inventories (the committed test inventory with generated variables, host
variables, hosts, users and containers added or changed: any YAML, template syntax included,
and files that are not YAML), ``ccc_migrate.migration.migrate`` either refuses the inventory with a short
message (``MigrationError``) or gives a tree whose every variable is accounted for in the report,
and the pillar files written from it (``ccc_migrate.write``) are YAML-only, carry no template
syntax, and render through Salt's own renderers (as the master's pillar does) to the same values
while the Jinja in the inventory (``salt["cmd.run"]("touch ...")``) runs nothing.
"""

import atexit
import copy
import json
import pathlib
import shutil
import string
import tempfile

import salt.config
import salt.loader
import salt.template
import yaml
from hypothesis import event, given
from hypothesis import strategies as st

from support import strategies as gen
from support.hypothesis_profiles import examples
from support.site import REPO

from ccc_migrate import cluster as migrate_cluster  # noqa: E402  (support.site puts the checkout on the path)
from ccc_migrate import hosts as migrate_hosts  # noqa: E402
from ccc_migrate import migration  # noqa: E402
from ccc_migrate import write as migrate_write  # noqa: E402
import ccc_migrate_markers  # noqa: E402

INVENTORY = REPO / "tests" / "data" / "ansible-inventory"
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
CLUSTER_DIR = "group_vars/ccc-cluster"
ORIGINAL = {relative: yaml.safe_load((INVENTORY / relative).read_text()) for relative in (
    "ccc-cluster.yml", f"{CLUSTER_DIR}/user-containers.yml", f"{CLUSTER_DIR}/user-list.yml", "host_vars/gpu1.yml")}
MESSAGE_AT_MOST = 600  # a refusal names the file and the YAML problem, clipped
WORK = pathlib.Path(tempfile.mkdtemp(prefix="ccc-migrate-properties-"))
atexit.register(shutil.rmtree, WORK, True)  # the examples' inventories and Salt's cache
RAN = WORK / "ran"  # Jinja in an inventory creates files here if it ever runs
RAN.mkdir()
PAYLOADS = [f'{{{{ salt["cmd.run"]("touch {RAN}/value") }}}}', f'{{% set x = salt["cmd.run"]("touch {RAN}/s") %}}',
            "{# comment #}", "{{ nvidia_driver_version }}", "{{ undefined_var }}", "{{ frpc_port | int }}"]
payload_texts = st.sampled_from(PAYLOADS) | gen.texts
payload_values = st.recursive(gen.scalars | payload_texts, lambda inner: st.lists(inner, max_size=3)
                              | st.dictionaries(payload_texts, inner, max_size=3), max_leaves=8)
KNOWN = sorted(set(migrate_cluster.SIMPLE) | set(migrate_cluster.SWITCHES) | set(migrate_cluster.HANDLERS)
               | set(migrate_cluster.NOT_MAPPED) | {"deployment_types", "deployment_users", "deployment_containers",
                                                        "ansible_user", "mount_points"})
HOST_KNOWN = sorted(set(migrate_hosts.HANDLERS) | {"zfs_volumes", "netplan_name", "ansible_host"})
var_keys = st.sampled_from(KNOWN) | payload_texts | st.integers(0, 3) | st.booleans()
host_names = st.sampled_from(["gpu4", "gpu1.lab", "GPU5", "gpu/6", "gpu 7", "", "-x"]) | payload_texts
EMAILS = ["ana.novak@lab.example.org", "bor.kralj@lab.example.org", "eve@lab.example.org"]
containers = st.fixed_dictionaries(
    {"STACK_NAME": st.from_regex(r"[a-z0-9][a-z0-9_.-]{0,10}", fullmatch=True) | payload_texts,
     "USER_EMAIL": st.sampled_from(EMAILS) | payload_texts,
     "CONTAINER_IMAGE": st.sampled_from(["vicoslab/ccc:base-v3", "evil/x:1"]) | payload_texts},
    optional={key: strategy | payload_values for key, strategy in gen.SHAPED.items() if key != "CONTAINER_IMAGE"},
)
users = st.fixed_dictionaries({"USER_NAME": gen.SHAPED["USER_NAME"] | payload_texts,
                               "USER_TYPE": st.sampled_from(["student", "researcher", "nope"]) | payload_texts},
                              optional={"USER_FULLNAME": payload_texts, "ADDITIONAL_DEVICE_GROUPS": payload_values})


class Inventory:
    """Changes to the test inventory, shown by what changed (a failing example prints that)."""

    def __init__(self, group_vars, host_vars, hosts, new_containers, new_users, raw):
        self.group_vars, self.host_vars, self.hosts = group_vars, host_vars, hosts
        self.new_containers, self.new_users, self.raw = new_containers, new_users, raw

    def __repr__(self):
        return f"Inventory({self.__dict__!r})"

    def write(self, root):
        shutil.copytree(INVENTORY, root)
        (root / ".vault-password").unlink()
        changed = copy.deepcopy(ORIGINAL)
        changed["ccc-cluster.yml"]["all"]["children"]["ccc-cluster"]["hosts"].update({name: None for name in self.hosts})
        changed[f"{CLUSTER_DIR}/user-containers.yml"]["deployment_containers"] += self.new_containers
        changed[f"{CLUSTER_DIR}/user-list.yml"]["deployment_users"].update(self.new_users)
        changed["host_vars/gpu1.yml"].update(self.host_vars)
        if self.group_vars:
            changed[f"{CLUSTER_DIR}/zz-generated.yml"] = self.group_vars
        for relative, data in changed.items():
            (root / relative).write_text(yaml.dump(data, Dumper=DUMPER, sort_keys=False, allow_unicode=True))
        if self.raw is not None:
            (root / CLUSTER_DIR / "zz-raw.yml").write_text(self.raw)


inventories = st.builds(
    Inventory,
    group_vars=st.dictionaries(var_keys, payload_values, max_size=4),
    host_vars=st.dictionaries(st.sampled_from(HOST_KNOWN) | var_keys, payload_values, max_size=3),
    hosts=st.lists(host_names, max_size=2, unique=True),
    new_containers=st.lists(containers, max_size=2),
    new_users=st.dictionaries(st.sampled_from(EMAILS[2:]) | payload_texts, users, max_size=1),
    raw=st.none() | st.none() | st.text(string.printable, max_size=60) | st.sampled_from(["a: [", "- 1\n", "x: *y\n"]),
)


def _renderers():
    """Salt's renderers with the execution modules (``salt["cmd.run"]`` works, so Jinja that got
    through would really run), as the master renders pillar files."""
    var = WORK / "salt"
    opts = salt.config.master_config(None)
    opts.update(root_dir=str(var), cachedir=str(var / "cache"), pki_dir=str(var / "pki"), sock_dir=str(var / "sock"),
                extension_modules=str(var / "extmods"), file_client="local")
    return opts, salt.loader.render(opts, salt.loader.minion_mods(opts))


OPTS, RENDERERS = _renderers()


def render(path):
    """One pillar file as the master renders it (its default ``jinja|yaml``, unless the file's
    first line names other renderers)."""
    return salt.template.compile_template(str(path), RENDERERS, OPTS["renderer"], OPTS["renderer_blacklist"],
                                          OPTS["renderer_whitelist"])


def plain(value):
    """Values as pillar consumers see them (JSON: a date read from YAML is its text)."""
    return json.loads(json.dumps(value, default=str))


def accounted(report, source, key):
    """Whether the report has an entry for variable ``key`` of ``source`` (any status)."""
    names = {str(key), ccc_migrate_markers.name(key)}
    return any(entry["source"] == source and any(str(entry["key"]).startswith(name) for name in names)
               for entry in report.entries)


@examples(1)
@given(inventory=inventories)
def test_any_inventory_is_refused_briefly_or_migrated_to_yaml_that_renders_to_the_same_values(inventory):
    work = pathlib.Path(tempfile.mkdtemp(dir=WORK))
    try:
        inventory.write(work / "inventory")
        try:
            site, nodes, secrets, report = migration.migrate(work / "inventory")
        except migration.MigrationError as exc:
            event("refused")
            assert 0 < len(str(exc).replace(str(work), "")) <= MESSAGE_AT_MOST, str(exc)
            return
        assert secrets == {}  # no vault password given
        for key in inventory.group_vars:
            assert accounted(report, f"{CLUSTER_DIR}/zz-generated.yml", key), key
        try:
            files = migrate_write.plain_files(site, nodes)
        except migrate_write.WriteError as exc:
            event("not written")
            assert "template syntax" in str(exc)
            return
        event(f"written, {report.count('refused')} refused")
        for entry in report.entries:
            if entry["status"] == "refused" and entry["key"] in KNOWN + HOST_KNOWN:
                event(f"refused variable {entry['key']}")  # a whole variable: its shape, or template syntax
        migrate_write.write(work / "pillar", files)
        expected = {"site/cluster.sls": {k: v for k, v in site.items() if k not in ("user_types", "users", "containers")},
                    **{f"site/{name}.sls": {name: site.get(name) or ({} if name != "containers" else [])}
                       for name in ("user_types", "users", "containers")},
                    **{migrate_write.node_file(node): tree for node, tree in nodes.items()}}
        for relative, text in files.items():
            assert text.startswith(migrate_write.PLAIN) and not ccc_migrate_markers.has_marker(text), relative
            rendered = render(work / "pillar" / relative)
            if relative == "site/init.sls":
                assert rendered == {"include": ["site.cluster", "site.user_types", "site.users", "site.containers"]}
            else:
                assert plain(rendered) == plain({"ccc": expected[relative]}), relative
        assert list(RAN.iterdir()) == []
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_the_renderers_do_run_jinja_in_a_file_without_the_yaml_line(tmp_path):
    """The control: the same renderers run Jinja of a file that lacks ``#!yaml``, so the property
    above would see a template that got through."""
    ran = tmp_path / "ran"
    ran.mkdir()
    path = tmp_path / "attack.sls"
    path.write_text(f"note: '{{{{ salt[\"cmd.run\"](\"touch {ran}/x\") }}}}'\n")
    render(path)
    assert (ran / "x").exists()
    path.write_text(migrate_write.PLAIN + f"note: '{{{{ salt[\"cmd.run\"](\"touch {ran}/y\") }}}}'\n")
    assert not (ran / "y").exists() and render(path)["note"].startswith("{{")


def _migrated(tmp_path, inventory):
    inventory.write(tmp_path / "inventory")
    return migration.migrate(tmp_path / "inventory")


NOTHING = {"group_vars": {}, "host_vars": {}, "hosts": [], "new_containers": [], "new_users": {}, "raw": None}


def test_a_variable_named_by_a_number_is_refused_by_name(tmp_path):
    """Found by the property above: ``0: x`` in a vars file stopped the migration with
    AttributeError ('int' object has no attribute 'startswith')."""
    site, _, _, report = _migrated(tmp_path, Inventory(**{**NOTHING, "group_vars": {0: "x", "zfs_enabled": True},
                                                          "host_vars": {7: [1]}}))
    refused = {(e["source"], e["key"]): e["reason"] for e in report.entries if e["status"] == "refused"}
    assert refused[(f"{CLUSTER_DIR}/zz-generated.yml", "0")] == ccc_migrate_markers.NAME_REASON
    assert refused[("host_vars/gpu1.yml", "7")] == ccc_migrate_markers.NAME_REASON
    assert site["roles"]["zfs"] is True  # the file's other variables are mapped


def test_a_value_of_the_wrong_shape_is_refused_alone(tmp_path):
    """Found by the property above: a value shaped otherwise than the original's roles read it
    (``zfs_volumes`` entries that are lists, ``compute_devices`` a list, ``docker_networks`` a
    mapping of numbers) stopped the migration with AttributeError/TypeError; now that variable
    is refused by name, and everything else migrates as it would without it."""
    clean_site, clean_nodes, _, _ = _migrated(tmp_path / "clean", Inventory(**NOTHING))
    bad = Inventory(**{**NOTHING, "host_vars": {"zfs_volumes": [["a", "b"]], "compute_devices": ["GPU-x"]},
                       "group_vars": {"docker_networks": {"a": 1}}})
    site, nodes, _, report = _migrated(tmp_path / "bad", bad)
    refused = {(e["source"], e["key"]): e["reason"] for e in report.entries if e["status"] == "refused"}
    for key in ("host_vars/gpu1.yml", "zfs_volumes"), ("host_vars/gpu1.yml", "compute_devices"), \
               (f"{CLUSTER_DIR}/zz-generated.yml", "docker_networks"):
        assert "does not have the shape" in refused[key], key
    assert "GPU-x" not in json.dumps(report.as_dict())  # named, never shown
    expected_gpu1 = {k: v for k, v in clean_nodes["gpu1"].items() if k not in ("node",)}
    expected_gpu1["zfs"] = {k: v for k, v in clean_nodes["gpu1"]["zfs"].items() if k != "datasets"}
    assert nodes["gpu1"] == expected_gpu1 and nodes["gpu2"] == clean_nodes["gpu2"]
    assert {k: v for k, v in site["cluster"].items() if k != "networks"} == \
        {k: v for k, v in clean_site["cluster"].items() if k != "networks"}


def test_text_with_a_next_line_character_is_written_so_it_reads_back_the_same(tmp_path):
    """Found by the property above: U+0085 (NEL) in a migrated value was written raw inside a
    quoted scalar, and Salt's YAML reads it as a space, so the pillar held another value than
    the migration decided (``SHM_SIZE: "0\\x85"`` became ``"0 "``)."""
    tree = {"cluster": {"note": "a\x85b", "name": "\u017diga"}}
    path = tmp_path / "cluster.sls"
    path.write_text(migrate_write._sls(tree, "test"), encoding="utf-8")
    assert render(path) == {"ccc": tree}
    plain_text = {"cluster": {"name": "\u017diga"}}
    assert "\u017diga" in migrate_write._sls(plain_text, "test")  # readable where it reads back


def test_an_entry_of_the_data_model_that_is_not_a_mapping_is_refused_alone(tmp_path):
    """Found by the property above: one container (or user, or user type) written as a list or a
    text stopped the mapping of the whole variable (every container refused with it), and
    ``deployment_containers: null`` dropped every container without a word in the report."""
    clean_site, _, _, _ = _migrated(tmp_path / "clean", Inventory(**NOTHING))
    site, _, _, report = _migrated(tmp_path / "bad", Inventory(**{**NOTHING, "new_containers": [["a"], "b"],
                                                                  "new_users": {"eve@lab.example.org": "text"}}))
    refused = {(e["source"], e["key"]): e["reason"] for e in report.entries if e["status"] == "refused"}
    count = len(ORIGINAL[f"{CLUSTER_DIR}/user-containers.yml"]["deployment_containers"])
    for key in (f"deployment_containers[#{count}]", f"deployment_containers[#{count + 1}]"):
        assert "not a mapping" in refused[(f"{CLUSTER_DIR}/user-containers.yml", key)]
    assert "not a mapping" in refused[(f"{CLUSTER_DIR}/user-list.yml", "deployment_users[eve@lab.example.org]")]
    assert site["containers"] == clean_site["containers"] and site["users"] == clean_site["users"]
    _, _, _, report = _migrated(tmp_path / "none", Inventory(**{**NOTHING, "group_vars": {"deployment_containers": None}}))
    assert any(e["key"] == "deployment_containers" and e["source"] == f"{CLUSTER_DIR}/zz-generated.yml"
               and "empty" in e["reason"] for e in report.entries)
