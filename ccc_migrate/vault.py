"""
Decrypt an Ansible Vault file (format 1.1 and 1.2, cipher AES256), the original CCC inventory's
``vault_vars/cluster-secrets.yml``, so the migration can move its secrets into the GPG pillar
without ansible installed.

The format (ansible's documented vault payload): a header line ``$ANSIBLE_VAULT;1.1;AES256``
(1.2 adds a vault id label), then hex text whose bytes are three hex lines: salt, HMAC, cipher
text. PBKDF2-HMAC-SHA256 (10000 rounds) of the password and salt gives 80 bytes: the AES key,
the HMAC key and the CTR counter block. The HMAC (SHA-256 over the cipher text) is checked
before anything is decrypted, so a wrong password is told apart from a damaged file only as
far as the format allows. Nothing here ever puts plain text or the password in a message.
"""

import binascii
import hmac

from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

HEADER = "$ANSIBLE_VAULT"
ROUNDS = 10000


class VaultError(Exception):
    """The vault cannot be read: not a vault, an unsupported format, or the wrong password."""


def is_vault(text):
    """True when ``text`` (str or bytes) starts like an Ansible Vault file."""
    if isinstance(text, bytes):
        text = text.decode("ascii", errors="replace")
    return text.lstrip().startswith(HEADER + ";")


def read_password_file(path):
    """The vault password in ``path`` without its trailing line break (as ansible reads it)."""
    with open(path, "rb") as handle:
        password = handle.read().rstrip(b"\r\n")
    if not password:
        raise VaultError(f"the vault password file {path} is empty")
    return password


def _payload(text):
    """``(salt, mac, ciphertext)`` of the vault ``text``."""
    if isinstance(text, bytes):
        text = text.decode("ascii", errors="replace")
    lines = [line.strip() for line in text.strip().splitlines()]
    fields = lines[0].split(";") if lines else []
    if len(fields) < 3 or fields[0] != HEADER:
        raise VaultError("not an Ansible Vault file (no $ANSIBLE_VAULT header)")
    if fields[1] not in ("1.1", "1.2") or fields[2].strip() != "AES256":
        raise VaultError(f"unsupported vault format {fields[1]};{fields[2]} (1.1/1.2 with AES256 are read)")
    try:
        inner = binascii.unhexlify("".join(lines[1:])).decode("ascii").split("\n")
        salt, mac, ciphertext = (binascii.unhexlify(part) for part in inner[:3])
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise VaultError("the vault body is damaged (not the hex payload of a vault)") from None
    return salt, mac, ciphertext


def _keys(password, salt):
    """AES key, HMAC key and counter block derived from ``password`` and ``salt``."""
    material = PBKDF2HMAC(algorithm=hashes.SHA256(), length=80, salt=salt, iterations=ROUNDS).derive(password)
    return material[:32], material[32:64], material[64:80]


def decrypt(text, password):
    """The plain bytes of the vault ``text`` (str or bytes), decrypted with ``password`` (bytes)."""
    salt, mac, ciphertext = _payload(text)
    cipher_key, mac_key, counter = _keys(password, salt)
    if not hmac.compare_digest(hmac.new(mac_key, ciphertext, "sha256").digest(), mac):
        raise VaultError("the vault password is wrong (or the file was changed): its HMAC does not match")
    decryptor = Cipher(algorithms.AES(cipher_key), modes.CTR(counter)).decryptor()
    padded = decryptor.update(ciphertext) + decryptor.finalize()
    unpadder = padding.PKCS7(128).unpadder()
    try:
        return unpadder.update(padded) + unpadder.finalize()
    except ValueError:
        raise VaultError("the vault's padding is damaged") from None
