"""scripts/ccc-secret, run as admins run it, against throwaway GnuPG homes under tmp_path: gen-key
makes a passphrase-less key pair and says how to export it; encrypt takes the value from stdin
only and prints a YAML block that a gpg-rendered pillar file decrypts back to the value."""

import pathlib
import subprocess
import sys

import pytest
import yaml

from support import secrets

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "ccc-secret"


def ccc_secret(*args, stdin="", check=True):
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], input=stdin, capture_output=True, text=True,
                          timeout=60)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="module")
def master_keyring(tmp_path_factory):
    """A master key made by ``ccc-secret gen-key``: (keyring, printed fingerprint, output)."""
    keyring = tmp_path_factory.mktemp("master") / "gpgkeys"
    out = ccc_secret("gen-key", "--homedir", str(keyring), "--name", "ccc-salt test master").stdout
    yield keyring, out.split("key id: ", 1)[1].split()[0], out
    secrets.stop_agent(keyring)


def test_gen_key_makes_a_passphraseless_key_and_prints_the_export_command(master_keyring):
    keyring, fingerprint, out = master_keyring
    assert fingerprint == secrets.fingerprint(keyring)
    assert oct(keyring.stat().st_mode & 0o777) == "0o700"
    export = f"gpg --homedir {keyring} --armor --export {fingerprint} > ccc-salt-master.pub.asc"
    assert export in out
    public = subprocess.run(export.split(">")[0].split(), capture_output=True, text=True, check=True).stdout
    assert public.startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")
    # No passphrase: decrypting in batch mode without any pinentry works (as the salt-master does).
    armor = secrets.encrypt(keyring, "unattended")
    assert secrets.gpg(keyring, "--pinentry-mode", "error", "--decrypt", stdin=armor) == "unattended"


def test_gen_key_makes_a_curve25519_key_that_decrypts_fast(master_keyring):
    # The master decrypts every secret of every minion's pillar in its own gpg process: Curve25519
    # (ed25519 signing key, cv25519 encryption subkey) took 7.7 ms per value here, RSA-3072 13.5 ms.
    keyring, fingerprint, _ = master_keyring
    listing = secrets.gpg(keyring, "--with-colons", "--list-keys", fingerprint).splitlines()
    algorithms = {fields[0]: fields[16] for fields in (line.split(":") for line in listing) if fields[0] in ("pub", "sub")}
    assert algorithms == {"pub": "ed25519", "sub": "cv25519"}


def test_encrypt_reads_stdin_and_prints_a_yaml_block_that_decrypts_to_the_value(master_keyring, tmp_path):
    keyring, fingerprint, _ = master_keyring
    # An admin's keyring holding only the master's public key, as docs/secrets.md describes.
    admin = tmp_path / "admin"
    public = tmp_path / "master.pub.asc"
    public.write_text(secrets.gpg(keyring, "--armor", "--export", fingerprint))
    secrets.import_key(admin, public)
    out = ccc_secret("encrypt", "--homedir", str(admin), "--recipient", fingerprint, "--indent", "8",
                     stdin="pa ss:word\n").stdout
    assert out.startswith("|\n        -----BEGIN PGP MESSAGE-----\n")
    assert "pa ss:word" not in out
    document = yaml.safe_load("registries:\n  host:\n    password: " + out)
    armor = document["registries"]["host"]["password"]
    assert secrets.gpg(keyring, "--decrypt", stdin=armor) == "pa ss:word"  # trailing newline of echo dropped
    secrets.stop_agent(admin)


def test_encrypt_refuses_a_value_on_the_command_line_and_an_empty_stdin(master_keyring):
    _, fingerprint, _ = master_keyring
    in_argv = ccc_secret("encrypt", "--recipient", fingerprint, "hunter2", check=False)
    assert in_argv.returncode == 2 and "unrecognized arguments" in in_argv.stderr
    assert "hunter2" not in in_argv.stdout
    empty = ccc_secret("encrypt", "--recipient", fingerprint, stdin="\n", check=False)
    assert empty.returncode == 1 and "no value on stdin" in empty.stderr


def test_encrypt_to_an_unknown_key_fails_with_gpgs_reason(tmp_path):
    proc = ccc_secret("encrypt", "--homedir", str(secrets.import_key(tmp_path / "empty", secrets.DEMO_PUBLIC_KEY)),
                      "--recipient", "0000000000000000000000000000000000000000", stdin="value", check=False)
    secrets.stop_agent(tmp_path / "empty")
    assert proc.returncode == 1
    assert "ccc-secret: gpg --armor --trust-model always --encrypt" in proc.stderr and "No public key" in proc.stderr
