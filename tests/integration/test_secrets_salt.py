"""ccc:secrets end to end through masterless Salt (docs/secrets.md): the site's `#!yaml|gpg`
secrets.sls decrypts with the keyring in gpg_keydir; a value encrypted to a key that keyring
lacks fails the pillar render, so `state.apply containers` refuses to run (the safe behaviour:
no ciphertext ever reaches a module as a password); the containers role works with no secrets
file at all; and a `state.apply containers` logged at every level (`-l all`) leaves no secret
in its output, the minion log, Salt's cache, the node's files or the containers.

The keys are throwaway GnuPG keys made for the session (no passphrase, as a salt-master's key)."""

import json
import pathlib
import shutil
import subprocess
import sys

import pytest

from support import secrets
from support.site import SALT_CALL, SAMPLE_SITE, SaltNode

REPO = pathlib.Path(__file__).resolve().parents[2]
SECRETS = {
    "registries": {"registry.example.org": {"username": "t-registry-user-51d2", "password": "t-registry-pw-8f0a"}},
    "portainer": {"agent_secret": "t-portainer-secret-c4e7"},
    "frp": {"token": "t-frp-token-2b91"},
    "basic_auth": {"monitor": {"user": "t-monitor-user-77aa", "password": "t-monitor-pw-0d3c"},
                   "metrics": {"user": "t-metrics-user-e15f", "password": "t-metrics-pw-9a62"}},
    "swarm": {"join_token": "SWMTKN-1-t-join-token-3c5d"},
}
ALL_VALUES = ["t-registry-user-51d2", "t-registry-pw-8f0a", "t-portainer-secret-c4e7", "t-frp-token-2b91",
              "t-monitor-user-77aa", "t-monitor-pw-0d3c", "t-metrics-user-e15f", "t-metrics-pw-9a62",
              "SWMTKN-1-t-join-token-3c5d"]


@pytest.fixture(scope="session")
def keyrings(tmp_path_factory):
    """(the node's keyring, a keyring whose key the node lacks), each with one new key pair."""
    base = tmp_path_factory.mktemp("gpg")
    node_keys, foreign = base / "node", base / "foreign"
    secrets.make_keyring(node_keys, "ccc-salt test master")
    secrets.make_keyring(foreign, "ccc-salt test other master")
    yield node_keys, foreign
    for keyring in (node_keys, foreign):
        secrets.stop_agent(keyring)


@pytest.fixture(scope="session")
def secrets_file(keyrings):
    """The text of a site's secrets.sls holding SECRETS, encrypted to the node's key."""
    return secrets.secrets_sls(keyrings[0], SECRETS)


def configure(node, keydir, site=SAMPLE_SITE.parent):
    """Rewrite ``node``'s masterless config (scripts/make-local-config.py) with ``keydir`` as its
    gpg_keydir and ``site`` as the site's pillar root."""
    subprocess.run([sys.executable, str(REPO / "scripts" / "make-local-config.py"), "--config-dir", str(node.config_dir),
                    "--id", node.node, "--pillar-root", str(node.overrides_root), "--site", str(site),
                    "--gpg-keydir", str(keydir)], check=True, capture_output=True)


def write_secrets(node, text):
    """The site's secrets.sls, in the node's override root (searched before the sample site)."""
    (node.overrides_root / "site" / "secrets.sls").write_text(text)


def offline_node(tmp_path):
    return SaltNode(tmp_path / "salt", "node1", "unix:///nonexistent.sock", tmp_path / "storage")


def test_the_sample_sites_secrets_decrypt_with_the_demo_key_make_local_config_imports(tmp_path):
    node = offline_node(tmp_path)
    shown, code = node.salt_call("pillar.item", "ccc:secrets", "unmask=True")
    assert code == 0
    assert shown["ccc:secrets"] == {
        "registries": {"registry.example.org": {"username": "demo-registry-user", "password": "demo-registry-password"}},
        "portainer": {"agent_secret": "demo-portainer-agent-secret"},
        "frp": {"token": "demo-frp-token"},
        "basic_auth": {"monitor": {"user": "demo-monitor-user", "password": "demo-monitor-password"},
                       "metrics": {"user": "demo-metrics-user", "password": "demo-metrics-password"}},
        "swarm": {"worker_token": "demo-swarm-worker-token"},
    }
    secrets.stop_agent(node.config_dir / "gpgkeys")


def test_a_sites_secrets_decrypt_with_the_key_in_gpg_keydir_and_output_is_masked(tmp_path, keyrings, secrets_file):
    node = offline_node(tmp_path)
    configure(node, keyrings[0])
    write_secrets(node, secrets_file)
    shown, code = node.salt_call("pillar.item", "ccc:secrets:registries", "unmask=True")
    assert code == 0
    assert shown["ccc:secrets:registries"] == SECRETS["registries"]
    # Without unmask=True Salt 3008 prints pillar values masked.
    masked, _ = node.salt_call("pillar.item", "ccc:secrets:frp")
    assert masked["ccc:secrets:frp"] == {"token": "**********"}
    keys, _ = node.salt_call("pillar.keys", "ccc:secrets")
    assert sorted(keys) == ["basic_auth", "frp", "portainer", "registries", "swarm"]


def test_a_secret_the_node_cannot_decrypt_fails_the_render_and_states_refuse(tmp_path, keyrings):
    node_keys, foreign = keyrings
    node = offline_node(tmp_path)
    configure(node, node_keys)
    good = secrets.secrets_sls(node_keys, {"frp": {"token": "t-frp-token-2b91"}})
    bad = secrets.encrypt(foreign, "t-registry-pw-8f0a")
    write_secrets(node, good + "    registries:\n      r.example.org:\n        password: |\n"
                  + "".join(f"          {line}\n" for line in bad.splitlines()))
    command = SALT_CALL + ["--local", "-c", str(node.config_dir), "--retcode-passthrough", "state.apply", "containers"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 5, proc.stdout
    assert "Pillar failed to render" in proc.stdout
    assert "Rendering SLS 'site.secrets' failed" in proc.stdout
    assert "ccc-containers-deploy" not in proc.stdout  # no state ran
    assert "decryption failed: No secret key" in (node.config_dir / "var" / "minion.log").read_text()
    errors, _ = node.salt_call("pillar.item", "_errors", "unmask=True")
    assert errors["_errors"] == ["Rendering SLS 'site.secrets' failed. Please see master log for details."]
    secrets.assert_no_secret({"stdout": proc.stdout, "stderr": proc.stderr,
                              "minion.log": (node.config_dir / "var" / "minion.log").read_text()}, ALL_VALUES)


def managed_inspects(client):
    return {c.name: json.dumps(client.api.inspect_container(c.id))
            for c in client.containers.list(all=True, filters={"label": "ccc.managed-by=ccc-salt"})}


def files_below(*roots):
    """Every regular file's bytes below ``roots``, named by path (gpg keyrings left out)."""
    found = {}
    for root in roots:
        for path in pathlib.Path(root).rglob("*"):
            if path.is_file() and not path.is_symlink() and "gpgkeys" not in path.parts:
                found[str(path)] = path.read_bytes()
    return found


@pytest.mark.docker
def test_apply_logged_at_every_level_leaks_no_secret(tmp_path, clean_node1, storage, keyrings, secrets_file):
    node = SaltNode(tmp_path / "salt", "node1", clean_node1.url, storage)
    configure(node, keyrings[0])
    write_secrets(node, secrets_file)
    command = SALT_CALL + ["--local", "-c", str(node.config_dir), "--retcode-passthrough", "-l", "all",
                           "--log-file-level", "all", "state.apply", "containers"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[:3000]
    inspects = managed_inspects(clean_node1.client())
    assert set(inspects) == {"ana-main", "ana-jupyter", "bor-main"}
    log = (node.config_dir / "var" / "minion.log").read_text()
    assert "[TRACE   ]" in log and "[DEBUG   ]" in log  # the log really is at the lowest levels
    texts = {"state output": proc.stdout, "console log": proc.stderr, **inspects,
             **files_below(node.config_dir, storage)}
    secrets.assert_no_secret(texts, ALL_VALUES)


@pytest.mark.docker
def test_containers_role_works_without_any_secrets_file(tmp_path, clean_node1, storage):
    site_root = tmp_path / "site-root"
    shutil.copytree(SAMPLE_SITE, site_root / "site", ignore=shutil.ignore_patterns("secrets.sls"))
    node = SaltNode(tmp_path / "salt", "node1", clean_node1.url, storage)
    configure(node, tmp_path / "empty-keyring", site=site_root)
    shown, _ = node.salt_call("pillar.item", "ccc:secrets")
    assert shown == {"ccc:secrets": ""}
    results, code = node.apply()
    assert code == 0, json.dumps(results, indent=1)[-3000:]
    assert set(managed_inspects(clean_node1.client())) == {"ana-main", "ana-jupyter", "bor-main"}
