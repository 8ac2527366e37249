"""An imported inventory is data: template syntax in it never runs on the salt-master.

The attack: a value or key such as ``{{ salt["cmd.run"]("touch ...") }}`` in ``group_vars``,
``host_vars``, the hosts file or the vault would run as root the first time the master renders a
pillar file holding it with Salt's default ``jinja|yaml`` renderer. Here the committed test
inventory gets such entries (each would create its own file under ``ran/``), is migrated by
``scripts/migrate-ansible-inventory``, and the written tree is compiled by Salt's own pillar
code with the project's master config (``scripts/master_config.py``, the GPG keyring that
decrypts the secrets): nothing ran, the entries that held the syntax are left out one by one and
named in the report, and everything else arrives as the same data as without the attack. A
control renders the same attack without the ``#!yaml`` line and sees it run, so the check can
fail."""

import json
import shutil
import subprocess

import pytest
import salt.config
import salt.pillar
import yaml

import master_config
from support import secrets as gpg_support
from support.site import REPO

from ccc_migrate import migration  # noqa: E402  (support.site puts the checkout on the path)
from ccc_migrate import vault as migrate_vault  # noqa: E402
from ccc_migrate import write as migrate_write  # noqa: E402
from ccc_pillar import deep_merge  # noqa: E402

INVENTORY = REPO / "tests" / "data" / "ansible-inventory"
PASSWORD_FILE = INVENTORY / ".vault-password"
SCRIPT = REPO / "scripts" / "migrate-ansible-inventory"
CLUSTER_VARS = "group_vars/ccc-cluster/cluster-vars.yml"
USER_LIST = "group_vars/ccc-cluster/user-list.yml"
CONTAINERS = "group_vars/ccc-cluster/user-containers.yml"
EXPECTED_SECRETS = {
    "registries": {"registry.lab.example.org": {"username": "lab-robot", "password": "Reg1stry-Pa55-migration"}},
    "frp": {"token": "Frp-T0ken-migration-test"},
    "basic_auth": {"metrics": {"user": "metrics", "password": "Metr1cs-Pa55-migration"},
                   "monitor": {"user": "monitor", "password": "Patr0ller-Pa55-migration"}},
}


def run(ran, name):
    """Jinja that creates ``ran/<name>`` when Salt renders it."""
    return '{{ salt["cmd.run"]("touch ' + str(ran / name) + '") }}'


def edit(path, change):
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def attacked_inventory(root, ran):
    """The test inventory with template syntax added in every place an admin's file can hold it;
    returns the copy's path. Each attack is one entry the report must name as refused."""
    shutil.copytree(INVENTORY, root)
    edit(root / "ccc-cluster.yml", lambda d: d["all"]["children"]["ccc-cluster"]["hosts"].update(
        {run(ran, "node-name"): None, "gpu9\nccc: {roles: {zfs: true}}": None}))

    def cluster(d):
        d["timezone_setting"] = run(ran, "cluster-value")
        d["docker_daemon_vars"] = {"{% for x in [1] %}" + run(ran, "cluster-key") + "{% endfor %}": 1}
        d["patroller_webui_config"] = {"note": "{# a Jinja comment hides what follows #}"}
        d[run(ran, "variable-name")] = 1
    edit(root / CLUSTER_VARS, cluster)

    def users(d):
        d["deployment_types"][run(ran, "type-name")] = {"access": "restricted"}
        d["deployment_users"]["eve@lab.example.org"] = {"USER_FULLNAME": run(ran, "user-value"), "USER_NAME": "eve",
                                                        "USER_TYPE": "student"}
    edit(root / USER_LIST, users)

    def containers(d):
        image = "vicoslab/ccc:base-v2.0-ubuntu20.04-cuda11.1"
        d["deployment_containers"] += [
            {"STACK_NAME": "eve-box", "USER_EMAIL": "ana.novak@lab.example.org", "CONTAINER_IMAGE": image,
             "FRP_PORTS": {"HTTP": [{"port": 8888, "subdomain": "eve", "pass": run(ran, "container-secret")}]}},
            {"STACK_NAME": run(ran, "stack-name"), "USER_EMAIL": "ana.novak@lab.example.org", "CONTAINER_IMAGE": image},
            {"STACK_NAME": "eve-two", "USER_EMAIL": "ana.novak@lab.example.org", "CONTAINER_IMAGE": image,
             "INSTALL_PACKAGES": '{%- set x = salt["cmd.run"]("touch ' + str(ran / "statement") + '") %}'}]
    edit(root / CONTAINERS, containers)
    edit(root / "host_vars" / "gpu2.yml", lambda d: d.update(netplan_name=run(ran, "host-value")))
    return root


REFUSED = {  # (source, key) -> the place the reason names
    ("ccc-cluster.yml", "host '{{ salt[\"cmd.run\"](\"touch RAN/node-name\") }}'"): "template syntax",
    ("ccc-cluster.yml", "host 'gpu9\\nccc: {roles: {zfs: true}}'"): "not one printable line",
    (CLUSTER_VARS, "timezone_setting"): "at the value",
    (CLUSTER_VARS, "docker_daemon_vars"): "(a key)",
    (CLUSTER_VARS, "patroller_webui_config"): "at note",
    (CLUSTER_VARS, "'{{ salt[\"cmd.run\"](\"touch RAN/variable-name\") }}'"): "the variable's name",
    (USER_LIST, "deployment_types['{{ salt[\"cmd.run\"](\"touch RAN/type-name\") }}']"): "its key",
    (USER_LIST, "deployment_users[eve@lab.example.org]"): "at USER_FULLNAME",
    (CONTAINERS, "deployment_containers[eve-box]"): "at FRP_PORTS.HTTP[0].pass",
    (CONTAINERS, "deployment_containers[#9]"): "at STACK_NAME",
    (CONTAINERS, "deployment_containers[eve-two]"): "at INSTALL_PACKAGES",
    ("host_vars/gpu2.yml", "netplan_name"): "at the value",
}


def refused(report, ran):
    return {(e["source"], e["key"].replace(str(ran), "RAN")): e["reason"] for e in report["entries"]
            if e["status"] == "refused"}


@pytest.fixture(scope="module")
def keyring(tmp_path_factory):
    """The salt-master's keyring (the recipient of site/secrets.sls)."""
    path = tmp_path_factory.mktemp("master-gpg") / "gpgkeys"
    fingerprint = gpg_support.make_keyring(path)
    yield path, fingerprint
    gpg_support.stop_agent(path)


@pytest.fixture(scope="module")
def attack(tmp_path_factory, keyring):
    """``(ran folder, inventory, written tree, JSON report)`` of the attacked inventory, migrated."""
    work = tmp_path_factory.mktemp("attack")
    ran = work / "ran"
    ran.mkdir()
    root = attacked_inventory(work / "inventory", ran)
    out = work / "pillar"
    proc = subprocess.run([str(SCRIPT), str(root), str(out), "--json", "--vault-password-file", str(PASSWORD_FILE),
                           "--recipient", keyring[1], "--gpg-homedir", str(keyring[0])],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    return ran, root, out, json.loads(proc.stdout)


def compile_pillar(work, site_root, minion, keydir):
    """``minion``'s pillar as the salt-master compiles it: Salt's pillar code and renderers, with
    the master config admins install (``scripts/master_config.py``) serving ``site_root``."""
    config = master_config.master_config(REPO, site_root, gpg_keydir=keydir)
    var = work / f"master-{minion}"
    config.update(root_dir=str(var), cachedir=str(var / "cache"), pki_dir=str(var / "pki"), sock_dir=str(var / "sock"),
                  log_file=str(var / "master.log"))
    (work / "master").write_text(yaml.safe_dump(config))
    opts = salt.config.master_config(str(work / "master"))
    compiled = salt.pillar.get_pillar(opts, {"id": minion}, minion, "base").compile_pillar()
    return json.loads(json.dumps(compiled, default=str))


def test_each_entry_holding_template_syntax_is_refused_alone_and_named(attack):
    ran, _, _, report = attack
    found = refused(report, ran)
    assert set(found) == set(REFUSED)
    for entry, place in REFUSED.items():
        assert place in found[entry], (entry, found[entry])
    assert "touch" not in found[(CONTAINERS, "deployment_containers[eve-box]")]  # keys are named, never values
    assert list(ran.iterdir()) == []


def test_the_rest_migrates_as_without_the_attack(attack):
    _, root, _, _ = attack
    password = migrate_vault.read_password_file(PASSWORD_FILE)
    clean_site, clean_nodes, clean_secrets, _ = migration.migrate(INVENTORY, password)
    site, nodes, secrets, _ = migration.migrate(root, password)
    del clean_site["timezone"], clean_site["docker"]["daemon"], clean_nodes["gpu2"]["netplan"]["name"]
    assert site == clean_site and nodes == clean_nodes and secrets == clean_secrets == EXPECTED_SECRETS


def test_every_written_file_is_yaml_only_and_holds_no_template_syntax(attack):
    _, _, out, report = attack
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*.sls"))
    assert written == ["site/cluster.sls", "site/containers.sls", "site/init.sls", "site/nodes/gpu1.sls",
                       "site/nodes/gpu2.sls", "site/nodes/gpu3.sls", "site/secrets.sls", "site/user_types.sls",
                       "site/users.sls"]
    for name in written:
        text = (out / name).read_text()
        assert text.startswith("#!yaml|gpg\n" if name == "site/secrets.sls" else "#!yaml\n"), name
        assert not any(marker in text for marker in ("{{", "{%", "{#")), name
    assert "site/nodes/gpu9" not in " ".join(report["written"])


@pytest.mark.parametrize("minion", ["gpu1", "gpu2", "gpu3"])
def test_the_master_renders_the_migrated_pillar_without_running_anything(attack, keyring, tmp_path, minion):
    ran, root, out, _ = attack
    compiled = compile_pillar(tmp_path, out, minion, keyring[0])
    assert "_errors" not in compiled
    assert list(ran.iterdir()) == []
    site, nodes, _, _ = migration.migrate(root, migrate_vault.read_password_file(PASSWORD_FILE))
    expected = deep_merge(deep_merge(site, nodes[minion]), {"secrets": EXPECTED_SECRETS})  # decrypted by the master
    assert compiled["ccc"] == json.loads(json.dumps(expected, default=str))


def test_the_yaml_line_alone_keeps_jinja_from_running_and_the_attack_is_real_without_it(tmp_path, keyring):
    """The writer's shebang is a guard of its own: the attack written verbatim (the refusal
    bypassed) arrives as text; the same file without its first line runs it (the control)."""
    ran = tmp_path / "ran"
    ran.mkdir()
    attack_text = run(ran, "shebang")
    text = migrate_write._sls({"cluster": {"note": attack_text}}, "test")
    for name, body, runs in (("with", text, False), ("without", text.split("\n", 1)[1], True)):
        site_root = tmp_path / name / "site-root"
        (site_root / "site").mkdir(parents=True)
        (site_root / "site" / "init.sls").write_text(body)
        compiled = compile_pillar(tmp_path / name, site_root, "gpu1", keyring[0])
        assert (ran / "shebang").exists() is runs, name
        if not runs:
            assert compiled["ccc"]["cluster"]["note"] == attack_text
    with pytest.raises(migrate_write.WriteError, match="template syntax"):
        migrate_write.plain_files({"cluster": {"note": attack_text}}, {})


@pytest.mark.skipif(shutil.which("ansible-vault") is None, reason="ansible-vault (Debian ansible-core) not installed")
def test_vault_values_and_keys_holding_template_syntax_are_refused_by_name(tmp_path):
    ran = tmp_path / "ran"
    ran.mkdir()
    root = tmp_path / "inventory"
    shutil.copytree(INVENTORY, root)
    vault = root / "vault_vars" / "cluster-secrets.yml"
    password = migrate_vault.read_password_file(PASSWORD_FILE)
    plain = yaml.safe_load(migrate_vault.decrypt(vault.read_bytes(), password))
    plain["frpc_secure"]["auth_token"] = run(ran, "vault-value")
    plain["docker_secure"]["registry_auth"][run(ran, "vault-key")] = {"username": "u", "password": "p"}
    vault.write_text(yaml.safe_dump(plain))
    subprocess.run(["ansible-vault", "encrypt", "--vault-password-file", str(PASSWORD_FILE), str(vault)],
                   check=True, capture_output=True, timeout=60)
    _, _, secrets, report = migration.migrate(root, password)
    assert secrets == {key: value for key, value in EXPECTED_SECRETS.items() if key != "frp"}
    found = refused(report.as_dict(), ran)
    assert set(found) == {("vault_vars/cluster-secrets.yml", "frpc_secure.auth_token"),
                          ("vault_vars/cluster-secrets.yml",
                           "docker_secure.registry_auth.'{{ salt[\"cmd.run\"](\"touch RAN/vault-key\") }}'")}
    assert all("scripts/ccc-secret" in reason for reason in found.values())
    assert list(ran.iterdir()) == []
