"""scripts/migrate-ansible-inventory on the test inventory in the original's layout
(tests/data/ansible-inventory/): the vault reader against files made by the real ansible-vault
(Debian's ansible-core, installed by scripts/setup.sh --test; the committed vault file is one,
with its password file, so the reader is also checked against a fixed known-answer file), the
mapping key by key, the report, --check, the refusal of a non-empty OUT_DIR, and the GPG
secrets pillar (decrypted back with the test keyring). No secret may reach stdout or the report."""

import json
import shutil
import subprocess

import pytest
import yaml

from support import secrets as gpg_support
from support.site import REPO

from ccc_migrate import migration  # noqa: E402  (support.site puts the checkout on the path)
from ccc_migrate import vault as migrate_vault  # noqa: E402

INVENTORY = REPO / "tests" / "data" / "ansible-inventory"
PASSWORD_FILE = INVENTORY / ".vault-password"
SCRIPT = REPO / "scripts" / "migrate-ansible-inventory"
VAULT_SECRETS = ["Reg1stry-Pa55-migration", "Frp-T0ken-migration-test", "Metr1cs-Pa55-migration",
                 "Patr0ller-Pa55-migration", "robot:Git-T0ken-migration", "stale-portainer-token-0001", "not-a-real-key"]
EXPECTED_SECRETS = {
    "registries": {"registry.lab.example.org": {"username": "lab-robot", "password": "Reg1stry-Pa55-migration"}},
    "frp": {"token": "Frp-T0ken-migration-test"},
    "basic_auth": {"metrics": {"user": "metrics", "password": "Metr1cs-Pa55-migration"},
                   "monitor": {"user": "monitor", "password": "Patr0ller-Pa55-migration"}},
}


def run_script(*args):
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def migrated():
    return migration.migrate(INVENTORY, migrate_vault.read_password_file(PASSWORD_FILE))


def entries(report, status):
    return {(e["source"], e["key"]) for e in report.entries if e["status"] == status}


def test_the_committed_vault_made_by_ansible_vault_decrypts_and_a_wrong_password_is_refused():
    text = (INVENTORY / "vault_vars" / "cluster-secrets.yml").read_bytes()
    assert text.startswith(b"$ANSIBLE_VAULT;1.1;AES256\n")
    plain = yaml.safe_load(migrate_vault.decrypt(text, migrate_vault.read_password_file(PASSWORD_FILE)))
    assert plain["frpc_secure"] == {"auth_token": "Frp-T0ken-migration-test"}
    with pytest.raises(migrate_vault.VaultError, match="password is wrong") as raised:
        migrate_vault.decrypt(text, b"not-the-password")
    assert "migration" not in str(raised.value)
    with pytest.raises(migrate_vault.VaultError, match="not an Ansible Vault"):
        migrate_vault.decrypt(b"frpc_secure: {}\n", b"x")


@pytest.mark.skipif(shutil.which("ansible-vault") is None, reason="ansible-vault (Debian ansible-core) not installed")
@pytest.mark.parametrize("vault_id", [None, "prod"])
def test_files_the_real_ansible_vault_writes_now_decrypt(tmp_path, vault_id):
    """1.1 (no id) and 1.2 (``--vault-id prod@file``), multi-block plain text with non-ASCII."""
    password = tmp_path / "pass"
    password.write_text("another password\n")
    plain = "value: " + "žćš-" * 300 + "\n"
    target = tmp_path / "vault.yml"
    target.write_text(plain)
    how = ["--vault-id", f"{vault_id}@{password}"] if vault_id else ["--vault-password-file", str(password)]
    subprocess.run(["ansible-vault", "encrypt", *how, str(target)], check=True, capture_output=True, timeout=60)
    assert target.read_text().startswith("$ANSIBLE_VAULT;1.2;AES256;prod" if vault_id else "$ANSIBLE_VAULT;1.1;AES256")
    assert migrate_vault.decrypt(target.read_bytes(), b"another password").decode() == plain


def test_containers_users_and_types_keep_their_ccc_keys_with_the_listed_changes(migrated):
    site, _, _, report = migrated
    containers = {c["STACK_NAME"]: c for c in site["containers"]}
    assert len(containers) == 8 and len(site["users"]) == 5 and set(site["user_types"]) == {"student", "researcher"}
    assert containers["bor-main"]["DEPLOYMENT_NODES"] == ["gpu1"]  # a string in the original
    assert containers["dara-old"] == {"STACK_NAME": "dara-old", "USER_EMAIL": "dara.kos@lab.example.org",
                                      "CONTAINER_IMAGE": "vicoslab/ccc:base-v2.0-ubuntu20.04-cuda11.1", "SHM_SIZE": "2GB",
                                      "DISABLED": True, "FRP_PORTS": {"TCP": [22]}}  # PURGE_USER_DATA not carried
    assert "USER_EMAIL" not in site["users"]["ana.novak@lab.example.org"]
    assert site["user_types"]["researcher"]["allowed_private_data_mount_groups"] == ["lab-shared"]
    changed = entries(report, "changed")
    assert ("group_vars/ccc-cluster/user-containers.yml", "deployment_containers[bor-main].DEPLOYMENT_NODES") in changed
    assert ("group_vars/ccc-cluster/user-containers.yml", "deployment_containers[dara-old].PURGE_USER_DATA") in changed
    assert report.count("refused") == 0


def test_cluster_variables_map_to_the_cluster_pillar_and_the_roles(migrated):
    site, _, _, _ = migrated
    cluster = site["cluster"]
    assert cluster["access_networks"] == {"restricted": ["student-restricted"], "unrestricted": ["lab-unrestricted"]}
    assert cluster["claims_network"] == "claims"
    assert cluster["networks"]["student-restricted"] == {
        "subnet": "173.20.0.0/16", "gateway": "173.20.0.1", "bridge_name": "docker_student",
        "restricted_access": ["192.168.0.0/16", "10.10.0.0/16"], "allowed_access": ["10.10.0.5"], "filter_enabled": True}
    assert "old-guests" not in cluster["networks"]
    assert cluster["nfs_user"] == {"name": "nfs-user", "uid": 1000}
    assert cluster["image_policy"]["allowed_prefixes"] == [
        "registry.lab.example.org/ccc/bor-env:", "vicoslab/ccc:"]
    assert cluster["image_policy"]["credentialed_prefixes"] == ["registry.lab.example.org/"]
    assert cluster["image_policy"]["pull"] == "always"  # compute_container_image_pull_always: true
    assert site["cachefilesd"]["state"] == "started"
    assert site["nfs_storage"]["mounts"]["user_data"] == {"source": "nas.lab.example.org:/export/home", "options": ["auto"]}
    assert set(site["nfs_storage"]["mounts"]) == {"user_data", "group_data", "apps_data", "dataset_data", "private_data"}
    assert site["frp_client"]["networks"][1] == {"network": "student-restricted",
                                                 "container_name": "frp-student-client-service", "log_name": "frpc-student.log"}
    assert site["roles"] == {"nvidia": True, "swarm": False, "frp_client": True, "patroller": True, "cachefilesd": True,
                             "nfs_storage": True, "superfan_gpu": False, "monitoring_agent": True}
    assert site["fail2ban"]["ignoreip"] == ["127.0.0.1/8", "::1", "10.10.0.0/16"]
    assert site["timezone"] == {"name": "Europe/Ljubljana"}


def test_host_variables_become_node_files(migrated):
    _, nodes, _, report = migrated
    assert nodes["gpu3"]["node"]["compute_devices"] == {"device_student": [
        "GPU-33333333-0000-4000-8000-000000000301", "GPU-33333333-0000-4000-8000-000000000302"]}
    gpu1 = nodes["gpu1"]
    assert gpu1["netplan"]["ethernets"]["eno2"] == {"addresses": ["10.99.0.11/24"], "mac": "3c:ec:ef:10:11:02"}
    assert gpu1["zfs"]["pools"]["scratch-disk"] == {"type": "stripe", "disks": ["/dev/sdb", "/dev/sdc"],
                                                    "properties": {"atime": "off"}}
    assert gpu1["zfs"]["datasets"]["scratch-disk/container-local-disk"] == {
        "properties": {"recordsize": "1M", "compression": "lz4", "logbias": "throughput"}, "mount_point": "ssd_data"}
    assert gpu1["roles"] == {"netplan": True, "zfs": True} and gpu1["swarm"] == {"manager": True}
    assert nodes["gpu2"]["nvidia"] == {"driver_version": "470"}
    assert nodes["gpu2"]["netplan"]["vlans"] == {"vlan20": {"id": 20, "link": "eno1", "addresses": ["10.20.0.12/24"]}}
    assert ("host_vars/gpu1.yml", "patroller_publish_ip") in entries(report, "not_mapped")


def test_every_key_of_the_inventory_is_in_the_report(migrated):
    """Each top-level variable of every vars file appears in the report (as itself or its items)."""
    _, _, _, report = migrated
    keys = {(e["source"], e["key"].split("[")[0].split(".")[0].split(":")[0]) for e in report.entries}
    for path in sorted(INVENTORY.glob("*_vars/**/*.yml")):
        source = str(path.relative_to(INVENTORY))
        if source.startswith("vault_vars"):
            continue
        for key in yaml.safe_load(path.read_text()):
            assert (source, key) in keys, f"{source}: {key} missing from the report"


def test_the_secrets_map_to_ccc_secrets_and_never_into_the_report(migrated):
    _, _, secrets, report = migrated
    assert secrets == EXPECTED_SECRETS
    gpg_support.assert_no_secret({"text": report.text(), "json": report.json()}, VAULT_SECRETS)
    assert ("vault_vars/cluster-secrets.yml", "sshd_secure.ed25519.private") in entries(report, "not_mapped")


def test_check_only_reports_and_json_is_the_same_report(tmp_path):
    out = tmp_path / "out"
    proc = run_script(INVENTORY, out, "--check", "--json", "--vault-password-file", PASSWORD_FILE)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["written"] is None and report["summary"]["refused"] == 0
    assert {d["id"] for d in report["differences"]} >= {"sshd-host-keys", "purge-user-data"}
    assert not out.exists()
    gpg_support.assert_no_secret({"stdout": proc.stdout, "stderr": proc.stderr}, VAULT_SECRETS)


def test_a_non_empty_out_dir_is_refused_and_secrets_need_a_recipient(tmp_path):
    (tmp_path / "pillar").mkdir()
    (tmp_path / "pillar" / "top.sls").write_text("base: {}\n")
    proc = run_script(INVENTORY, tmp_path / "pillar")
    assert proc.returncode == 2 and "exists and is not empty" in proc.stderr
    assert (tmp_path / "pillar" / "top.sls").read_text() == "base: {}\n"
    proc = run_script(INVENTORY, tmp_path / "new", "--vault-password-file", PASSWORD_FILE)
    assert proc.returncode == 2 and "give --recipient" in proc.stderr and not (tmp_path / "new").exists()
    wrong = tmp_path / "wrong"
    wrong.write_text("nope\n")
    proc = run_script(INVENTORY, tmp_path / "new", "--vault-password-file", wrong)
    assert proc.returncode == 2 and "password is wrong" in proc.stderr


def test_the_written_tree_holds_the_pillar_and_gpg_secrets_only_the_recipient_reads(tmp_path):
    keyring = tmp_path / "gpg"
    fingerprint = gpg_support.make_keyring(keyring)
    try:
        out = tmp_path / "out"
        proc = run_script(INVENTORY, out, "--vault-password-file", PASSWORD_FILE, "--recipient", fingerprint,
                          "--gpg-homedir", keyring)
        assert proc.returncode == 0, proc.stderr
        files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
        assert files == ["migration-report.json", "migration-report.txt", "site/cluster.sls", "site/containers.sls",
                         "site/init.sls", "site/nodes/gpu1.sls", "site/nodes/gpu2.sls", "site/nodes/gpu3.sls",
                         "site/secrets.sls", "site/user_types.sls", "site/users.sls"]
        texts = {name: (out / name).read_text() for name in files}
        gpg_support.assert_no_secret({**texts, "stdout": proc.stdout, "stderr": proc.stderr}, VAULT_SECRETS)
        assert texts["site/secrets.sls"].startswith("#!yaml|gpg\n")
        armored = yaml.safe_load(texts["site/secrets.sls"])["ccc"]["secrets"]
        assert armored["frp"]["token"].startswith("-----BEGIN PGP MESSAGE-----")
        plain = gpg_support.gpg(keyring, "--decrypt", stdin=armored["registries"]["registry.lab.example.org"]["password"])
        assert plain == "Reg1stry-Pa55-migration"
        assert yaml.safe_load(texts["site/nodes/gpu1.sls"])["ccc"]["node"]["compute_devices"]["device_lab"][0] == \
            "GPU-11111111-0000-4000-8000-000000000101"
        assert (out.stat().st_mode & 0o777) == 0o700
    finally:
        gpg_support.stop_agent(keyring)


def test_the_launcher_runs_without_the_venv_python_on_path():
    """The sh launcher finds _utils itself (no sys.path tricks): run from another directory."""
    proc = subprocess.run([str(SCRIPT), "--help"], capture_output=True, text=True, cwd="/", timeout=60)
    assert proc.returncode == 0 and "--vault-password-file" in proc.stdout


def test_a_key_with_control_characters_shows_on_one_line_of_the_text_report(tmp_path):
    """An inventory key is text from outside: its newline cannot forge a report line of its own, and
    its escape sequence never reaches the admin's terminal (the JSON report keeps the key as it is)."""
    inventory = tmp_path / "inventory"
    shutil.copytree(INVENTORY, inventory)
    with (inventory / "host_vars" / "gpu1.yml").open("a", encoding="utf-8") as handle:
        handle.write('"odd\\nMapped unchanged (99):\\e[2J": 1\n')
    proc = run_script(inventory, tmp_path / "out", "--check", "--vault-password-file", PASSWORD_FILE)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout
    forged = [line for line in proc.stdout.splitlines() if line.startswith("Mapped unchanged (99)")]
    assert forged == []
    shown = [line for line in proc.stdout.splitlines() if "odd\\nMapped unchanged (99):\\x1b[2J" in line]
    assert len(shown) == 1 and shown[0].startswith("  host_vars/gpu1"), shown
    as_json = run_script(inventory, tmp_path / "out", "--check", "--json", "--vault-password-file", PASSWORD_FILE)
    assert "odd\nMapped unchanged (99):\x1b[2J" in {entry["key"] for entry in json.loads(as_json.stdout)["entries"]}
