"""GPG-encrypted pillar (``ccc:secrets``, docs/secrets.md) for tests: throwaway keyrings, values
encrypted at test time, ``#!yaml|gpg`` files, and a leak check that never prints a secret.

Keyrings are real GnuPG home directories (the gpg binary Salt's renderer runs), made without a
passphrase as the salt-master's key is; ``stop_agent`` ends the gpg-agent gpg starts in one."""

import os
import pathlib
import subprocess

import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
DEMO_SECRET_KEY = REPO / "sample-pillar" / "gpgkeys" / "demo-secret-key.asc"
DEMO_PUBLIC_KEY = REPO / "sample-pillar" / "gpgkeys" / "demo-public-key.asc"
CONTEXT = 30  # characters shown on each side of a leak (secrets in them masked)
MARK = "<SECRET>"


def gpg(keyring, *args, stdin=None):
    """Run gpg in batch mode on ``keyring``; returns stdout (text). Fails with gpg's stderr."""
    proc = subprocess.run(["gpg", "--batch", "--no-tty", "--homedir", str(keyring), *args],
                          input=stdin, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"gpg {' '.join(args)} failed: {proc.stderr}"
    return proc.stdout


def make_keyring(path, name="ccc-salt test key"):
    """A new keyring at ``path`` holding one key pair without passphrase; returns its fingerprint."""
    path = pathlib.Path(path)
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    gpg(path, "--passphrase", "", "--quick-gen-key", name, "future-default", "default", "never")
    return fingerprint(path)


def fingerprint(keyring):
    """The fingerprint of the (first) secret key in ``keyring``."""
    for line in gpg(keyring, "--with-colons", "--list-secret-keys").splitlines():
        if line.startswith("fpr:"):
            return line.split(":")[9]
    raise AssertionError(f"no secret key in {keyring}")


def import_key(keyring, key_file):
    """Import an armored key (public or secret) into ``keyring`` (created 0700 if missing)."""
    keyring = pathlib.Path(keyring)
    keyring.mkdir(parents=True, exist_ok=True)
    os.chmod(keyring, 0o700)
    gpg(keyring, "--import", str(key_file))
    return keyring


def demo_keyring(path):
    """A keyring holding the sample site's public DEMO key (sample-pillar/site/secrets.sls)."""
    return import_key(path, DEMO_SECRET_KEY)


def export_secret_key(keyring, path):
    """Write ``keyring``'s secret key, armored, to ``path`` (to install it in another keyring)."""
    pathlib.Path(path).write_text(gpg(keyring, "--armor", "--export-secret-keys", fingerprint(keyring)))
    return path


def stop_agent(keyring):
    """End the gpg-agent that gpg started for ``keyring`` (it would outlive the test)."""
    subprocess.run(["gpgconf", "--homedir", str(keyring), "--kill", "gpg-agent"], capture_output=True, check=False)


def encrypt(keyring, value):
    """``value`` encrypted to ``keyring``'s key: the armored text the gpg renderer decrypts."""
    return gpg(keyring, "--armor", "--trust-model", "always", "--encrypt", "--recipient", fingerprint(keyring),
               stdin=value)


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (armored messages) as literal blocks, as admins paste them."""


_BlockDumper.add_representer(
    str, lambda dumper, text: dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None))


def secrets_sls(keyring, mapping):
    """The text of a ``#!yaml|gpg`` file holding ``{"ccc": {"secrets": mapping}}`` with every
    string in ``mapping`` encrypted to ``keyring``'s key."""
    return "#!yaml|gpg\n" + yaml.dump({"ccc": {"secrets": _encrypted(keyring, mapping)}}, Dumper=_BlockDumper,
                                      sort_keys=False)


def _encrypted(keyring, node):
    if isinstance(node, dict):
        return {key: _encrypted(keyring, value) for key, value in node.items()}
    if isinstance(node, list):
        return [_encrypted(keyring, value) for value in node]
    return encrypt(keyring, node) if isinstance(node, str) else node


def _named(texts):
    """A mapping name → text; a plain sequence of texts is named by position."""
    return dict(texts) if isinstance(texts, dict) else {f"text #{i}": text for i, text in enumerate(texts)}


def leaks(texts, secrets):
    """``[(text name, offset, secret number)]`` of every secret found in ``texts``
    (a mapping name → text or bytes, or a sequence of texts)."""
    found = []
    for name, text in _named(texts).items():
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        for number, secret in enumerate(secrets):
            offset = text.find(secret)
            if secret and offset >= 0:
                found.append((name, offset, number))
    return found


def _masked(text, secrets):
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, MARK)
    return text


def assert_no_secret(texts, secrets):
    """Fail when any of ``secrets`` occurs in ``texts`` (a mapping name → text), naming the text,
    the offset and the surroundings with every secret masked, never a secret itself."""
    secrets, texts = [s for s in secrets if s], _named(texts)
    found = leaks(texts, secrets)
    if not found:
        return
    lines = []
    for name, offset, number in found:
        text = texts[name].decode("utf-8", errors="replace") if isinstance(texts[name], bytes) else texts[name]
        # Masked before cutting, so no part of any secret is shown.
        before, after = _masked(text[:offset], secrets), _masked(text[offset:], secrets)
        around = before[-CONTEXT:] + after[:len(MARK) + CONTEXT]
        lines.append(f"secret #{number} ({len(secrets[number])} chars) in {name} at offset {offset}: {around!r}")
    raise AssertionError("secrets leaked:\n" + "\n".join(lines))
