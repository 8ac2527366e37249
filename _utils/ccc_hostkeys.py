"""
SSH host keys per STACK_NAME: each container sees only its own key set.

CCC images read their sshd host keys from ``/home/.sshd/keys/ssh_host_{rsa,ecdsa,ed25519}_key``.
The original mounted one node-wide folder there, so root in any container could read every
other container's host key and impersonate its sshd. Here each stack gets its own set:

* generated once per STACK_NAME into the shared state dir (``<state_dir>/host-keys/<STACK>``,
  root-only), so the keys stay the same when the container moves to another node;
* copied to the node (``<sshd_data>/stacks/<STACK>/keys``, root-only, private keys 0600) and
  mounted read-only at ``/home/.sshd``: it works while the shared storage is away and users can
  never replace it.

Concurrent first deploys on two nodes are safe: a set is generated in a fresh temporary folder
and renamed into place; whoever renames second uses the winner's keys. A missing storage root
is never created. Keys are made with ``cryptography`` (a Salt dependency) in OpenSSH's own
formats, the same key types and sizes as ``ssh-keygen -A`` but without a process per key: RSA
generation dominates a first deploy (about 0.5 s per stack with ssh-keygen, 0.1-0.15 s here).
Plain Python, used by ``ccc_apply``.
"""

import os
import secrets
import shutil

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

import ccc_safefs

KEY_TYPES = ("rsa", "ecdsa", "ed25519")


def key_files():
    """File names of one key set (private and public)."""
    return [f"ssh_host_{kind}_key{suffix}" for kind in KEY_TYPES for suffix in ("", ".pub")]


def node_dir(sshd_data, stack):
    """The node-local folder mounted at ``/home/.sshd`` for ``stack``."""
    return os.path.join(sshd_data, "stacks", stack)


def present(sshd_data, stack):
    """True when the node already has the whole key set of ``stack``."""
    keys = os.path.join(node_dir(sshd_data, stack), "keys")
    return all(os.path.isfile(os.path.join(keys, name)) for name in key_files())


def _private_key(kind, rsa_bits):
    if kind == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=int(rsa_bits))
    if kind == "ecdsa":
        return ec.generate_private_key(ec.SECP256R1())  # ssh-keygen's default ECDSA size
    return ed25519.Ed25519PrivateKey.generate()


def _generate(folder, stack, rsa_bits):
    """Write one key set into ``folder`` (a fresh root-only folder): private keys in OpenSSH's
    format (0600), public keys as ``<type> <base64> ccc-salt <STACK>`` (0644)."""
    for kind in KEY_TYPES:
        key = _private_key(kind, rsa_bits)
        private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                    serialization.NoEncryption())
        public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        path = os.path.join(folder, f"ssh_host_{kind}_key")
        for name, data, mode in ((path, private, 0o600), (path + ".pub", public + f" ccc-salt {stack}\n".encode(), 0o644)):
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)


def _shared_set(state_dir, stack, rsa_bits):
    """The folder of the shared key set of ``stack``, generated if needed; its parent must exist."""
    parent = os.path.dirname(state_dir.rstrip("/"))
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"{parent} does not exist on this node (storage not mounted?)")
    store = os.path.join(state_dir, "host-keys")
    os.makedirs(store, mode=0o700, exist_ok=True)
    final = os.path.join(store, stack)
    if all(os.path.isfile(os.path.join(final, name)) for name in key_files()):
        return final
    temporary = os.path.join(store, f".{stack}.tmp-{secrets.token_hex(8)}")
    os.mkdir(temporary, 0o700)
    try:
        _generate(temporary, stack, rsa_bits)
        try:
            os.rename(temporary, final)
        except OSError:
            # Another node won the race (or an incomplete set is there): keep what is there.
            if not all(os.path.isfile(os.path.join(final, name)) for name in key_files()):
                shutil.rmtree(final, ignore_errors=True)
                os.rename(temporary, final)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return final


def ensure(sshd_data, state_dir, stack, rsa_bits=3072):
    """
    Make sure the node has ``stack``'s key set; returns True when it was copied (or generated).

    Raises ``FileNotFoundError`` when a storage root is missing.
    """
    if present(sshd_data, stack):
        return False
    source = _shared_set(state_dir, stack, rsa_bits)
    if not os.path.isdir(sshd_data):
        raise FileNotFoundError(f"{sshd_data} does not exist on this node (storage not mounted?)")
    local_fd = ccc_safefs.open_root(sshd_data)
    try:
        stacks_fd, _ = ccc_safefs.ensure_dir_at(local_fd, "stacks", 0o711, (0, 0))
        stack_fd, _ = ccc_safefs.ensure_dir_at(stacks_fd, stack, 0o755, (0, 0))
        keys_fd, _ = ccc_safefs.ensure_dir_at(stack_fd, "keys", 0o700, (0, 0))
        for fd in (stacks_fd, stack_fd):
            os.close(fd)
        try:
            for name in key_files():
                with open(os.path.join(source, name), "rb") as handle:
                    data = handle.read(1 << 16)
                ccc_safefs.write_file_at(keys_fd, name, data, 0o644 if name.endswith(".pub") else 0o600, (0, 0))
        finally:
            os.close(keys_fd)
    finally:
        os.close(local_fd)
    return True
