"""The migration on small hand-written inventories: what the original accepted and ccc-salt
reads differently (Jinja it cannot evaluate, refused; inline vault values, null compute_devices, a type
whose access class has no networks, a string of nodes) ends in the report with its reason."""

import textwrap

import pytest

from support import site  # noqa: F401  (puts _utils on the path)

from ccc_migrate import migration  # noqa: E402  (support.site puts the checkout on the path)
import ccc_migrate_inventory  # noqa: E402

HOSTS = "all:\n  children:\n    ccc-cluster:\n      hosts:\n        n1: {ansible_host: n1.example.org}\n"


def inventory(tmp_path, cluster_vars, host_vars="compute_devices: {lab: [GPU-1]}\n"):
    (tmp_path / "hosts.yml").write_text(HOSTS)
    (tmp_path / "group_vars" / "ccc-cluster").mkdir(parents=True)
    (tmp_path / "group_vars" / "ccc-cluster" / "vars.yml").write_text(textwrap.dedent(cluster_vars))
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "n1.yml").write_text(host_vars)
    return tmp_path


def by_key(report):
    return {entry["key"]: entry for entry in report.entries}


def test_plain_references_expand_other_jinja_is_refused_and_inline_vault_values_are_not_mapped(tmp_path):
    root = inventory(tmp_path, """\
        mount_points: {nfs: {user_data: /data/u}, local: {}}
        frpc_server: "{{ proxy_host }}"
        proxy_host: proxy.example.org
        timezone_setting: "{{ lookup('env', 'TZ') }}"
        frpc_image_version: !vault |
          $ANSIBLE_VAULT;1.1;AES256
          3131
        nfs_mounts:
          - {path: "{{ mount_points.nfs.user_data }}/", src: "nas:/u", opts: "auto,fsc"}
        """)
    site_tree, _, _, report = migration.migrate(root)
    entries = by_key(report)
    assert site_tree["frp_client"]["server_address"] == "proxy.example.org"
    assert site_tree["nfs_storage"]["mounts"] == {"user_data": {"source": "nas:/u", "options": ["auto"]}}
    assert entries["timezone_setting"]["status"] == "refused" and "Jinja" in entries["timezone_setting"]["reason"]
    assert entries["frpc_image_version"]["status"] == "not_mapped"
    assert "inline vault" in entries["frpc_image_version"]["reason"]
    assert entries["proxy_host"] == {"status": "not_mapped", "source": "group_vars/ccc-cluster/vars.yml",
                                     "key": "proxy_host", "target": None, "reason": "no ccc-salt equivalent"}
    assert "timezone" not in site_tree


def test_null_compute_devices_and_string_node_lists_change_with_their_reason(tmp_path):
    root = inventory(tmp_path, """\
        compute_container_networks: {open: [{name: lab}, {name: claims}]}
        deployment_types:
          t: {access: nowhere, default_nodes: [n1], allowed_nodes: n1, allowed_device_groups: [lab]}
        deployment_users:
          a@example.org: {USER_FULLNAME: A, USER_NAME: a, USER_TYPE: t, USER_EMAIL: b@example.org, COLOUR: red}
        deployment_containers:
          - {STACK_NAME: a-box, USER_EMAIL: a@example.org, CONTAINER_IMAGE: "vicoslab/ccc:x", DEPLOYMENT_NODES: "n1, n2"}
        """, host_vars="compute_devices:\n")
    site_tree, nodes, _, report = migration.migrate(root)
    entries = by_key(report)
    assert nodes["n1"]["node"]["compute_devices"] == {}
    assert "every GPU" in entries["compute_devices"]["reason"]
    assert site_tree["user_types"]["t"]["allowed_nodes"] == ["n1"]
    assert site_tree["containers"][0]["DEPLOYMENT_NODES"] == ["n1", "n2"]
    assert "differs from the key" in entries["deployment_users[a@example.org].USER_EMAIL"]["reason"]
    assert entries["deployment_users[a@example.org].COLOUR"]["status"] == "not_mapped"
    refused = [(e["source"], e["key"]) for e in report.entries if e["status"] == "refused"]
    assert ("deployment_types[t]", "access") in refused  # 'nowhere' has no networks: held, as the original failed it


def test_an_inventory_without_the_ccc_cluster_group_is_refused(tmp_path):
    (tmp_path / "hosts.yml").write_text("all:\n  children:\n    other: {hosts: {n1: }}\n")
    with pytest.raises(migration.MigrationError, match="no hosts file"):
        migration.migrate(tmp_path)
    (tmp_path / "hosts.yml").write_text("all: [unbalanced\n")
    with pytest.raises(migration.MigrationError, match="not valid YAML"):
        migration.migrate(tmp_path)


def test_expand_leaves_unknown_names_and_follows_references_of_references():
    variables = {"a": "{{ b.c }}", "b": {"c": 7}}
    assert ccc_migrate_inventory.expand("{{ a }}", variables) == 7
    assert ccc_migrate_inventory.expand("x-{{ b.c }}-{{ zz }}", variables) == "x-{{ b.c }}-{{ zz }}"
    assert ccc_migrate_inventory.expand("x-{{ b.c }}", variables) == "x-7"


def test_nested_references_that_would_blow_up_are_refused_with_little_memory(tmp_path):
    """Ten references five levels deep would expand to 10**5 copies of the text per level (a
    memory bomb anyone with push access to the lab's inventory repository could commit): the
    variable stays as written, is refused for its template syntax, and the rest migrates."""
    import tracemalloc

    levels = "\n".join(f"l{n}: \"{' '.join(['{{ l%d }}' % (n - 1)] * 10)}\"" for n in range(1, 6))
    root = inventory(tmp_path, f"""\
        mount_points: {{nfs: {{user_data: /data/u}}, local: {{}}}}
        frpc_server: proxy.example.org
        l0: "{'x' * 200}"
        {levels.replace(chr(10), chr(10) + '        ')}
        timezone_setting: "{{{{ l5 }}}}"
        """)
    tracemalloc.start()
    site_tree, _, _, report = migration.migrate(root)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    entries = by_key(report)
    assert entries["timezone_setting"]["status"] == "refused"
    assert "template syntax" in entries["timezone_setting"]["reason"]
    assert site_tree["frp_client"]["server_address"] == "proxy.example.org"
    assert peak < 64 << 20, f"migration peaked at {peak >> 20} MiB"


def test_expansion_within_the_budget_is_complete():
    variables = {"a": "y" * 100, "b": "{{ a }}{{ a }}"}
    assert ccc_migrate_inventory.expand("{{ b }}-{{ b }}", variables) == "y" * 200 + "-" + "y" * 200
