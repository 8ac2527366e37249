"""
SSH host keys per STACK_NAME: each container sees only its own key set.

CCC images read their sshd host keys from ``/home/.sshd/keys/ssh_host_{rsa,ecdsa,ed25519}_key``.
The original mounted one node-wide folder there, so root in any container could read every
other container's host key and impersonate its sshd. Here each stack gets its own set:

* generated once per STACK_NAME into the shared key store (``store_root``: by default the
  cluster state dir, ``<state_dir>/host-keys/<STACK>``, root-only, on the user-data share), so the
  keys stay the same when the container moves to another node. The state dir lies below the
  user-data root, which ``ADMIN_USER_ACCESS`` containers mount: ``ccc_covers`` hides it in them
  under an empty read-only tmpfs. An admin may set ``ccc:cluster:host_keys:store_dir`` to a
  folder no container mounts instead; sets at the state dir are then moved there (``migrate``)
  at the next deploy, keys unchanged;
* copied to the node (``<sshd_data>/stacks/<STACK>/keys``, root-only, private keys 0600) and
  mounted read-only at ``/home/.sshd``: it works while the shared storage is away and users can
  never replace it. Only the stack's own container binds that folder.

A changed shared set (``rotate``, for ``salt-call ccc_hostkeys.rotate <STACK>``) reaches every
node at its next deploy: ``ensure`` compares the node copy with the shared set and replaces the
files that differ one by one, each atomically, so a container never sees a missing key file.
The old set is kept, root-only, in ``<store>/host-keys-retired/<STACK>.<UTC time>``.

Concurrent first deploys on two nodes are safe: a set is generated in a fresh temporary folder
and renamed into place; whoever renames second uses the winner's keys. A missing storage root
is never created. Keys are made with ``cryptography`` (a Salt dependency) in OpenSSH's own
formats, the same key types and sizes as ``ssh-keygen -A`` but without a process per key (about
0.5 s per stack with ssh-keygen, 0.1-0.15 s here); during a deploy ``ccc_hostkey_maker`` makes them
in child processes, since RSA generation holds Python's GIL.
Plain Python, used by ``ccc_apply``.
"""

import base64
import hashlib
import os
import secrets
import shutil
import stat
import time

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


def material(stack, rsa_bits=3072):
    """One key set as ``{file name: bytes}``: private keys in OpenSSH's format, public keys as
    ``<type> <base64> ccc-salt <STACK>``. Pure CPU (RSA holds Python's GIL for the whole
    generation): ``ccc_hostkey_maker`` runs it in a child process during a deploy."""
    data = {}
    for kind in KEY_TYPES:
        key = _private_key(kind, rsa_bits)
        name = f"ssh_host_{kind}_key"
        data[name] = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                       serialization.NoEncryption())
        data[name + ".pub"] = key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH) + f" ccc-salt {stack}\n".encode()
    return data


def write_set(folder, data):
    """Write a key set (``material``) into ``folder`` (a fresh root-only folder): private keys
    0600, public keys 0644."""
    for name, content in data.items():
        fd = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o644 if name.endswith(".pub") else 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)


def _generate(folder, stack, rsa_bits):
    """Write one fresh key set into ``folder`` (a fresh root-only folder)."""
    write_set(folder, material(stack, rsa_bits))


def store(cluster):
    """
    The shared key store of ``cluster`` (``cluster_settings``) as ``{"root", "legacy"}``: ``root``
    is ``ccc:cluster:host_keys:store_dir``, by default ``ccc:cluster:state_dir`` (on the user-data
    share, covered in containers by ``ccc_covers``); ``legacy`` the state dir, where sets are
    moved from when the admin set another store. ``ValueError`` for a store_dir that lies below
    (or holds) a folder that containers mount.
    """
    return {"root": store_root(cluster), "legacy": cluster.get("state_dir")}


def _spec(where):
    """A ``store`` dict from itself or a plain root path (no old place)."""
    return where if isinstance(where, dict) else {"root": str(where), "legacy": None}


def store_root(cluster):
    """``store(cluster)["root"]``: ``ccc:cluster:host_keys:store_dir`` (checked) or the state dir."""
    configured = (cluster.get("host_keys") or {}).get("store_dir")
    if not configured:
        return os.path.normpath(cluster["state_dir"])
    root = os.path.normpath(str(configured))
    if not os.path.isabs(root):
        raise ValueError(f"ccc:cluster:host_keys:store_dir must be an absolute path, got {configured!r}")
    mounted = [path for group in cluster["mount_points"].values() for path in group.values()]
    mounted.append(cluster.get("admin_log_dir") or "/var/log/ccc-salt")
    for path in mounted:
        path = os.path.normpath(str(path))
        if root == path or root.startswith(path.rstrip("/") + "/") or path.startswith(root.rstrip("/") + "/"):
            raise ValueError(f"the host key store {root} must not be {path} or hold it or lie below it: containers mount "
                             "that folder (leave ccc:cluster:host_keys:store_dir unset to keep the keys in the state dir)")
    return root


def keys_dir(root):
    """``<root>/host-keys`` (made root-only; ``root`` made 0700 when missing); the storage above
    ``root`` must be there: a missing one is an unmounted share, never created."""
    parent = os.path.dirname(root.rstrip("/"))
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"{parent} does not exist on this node (storage not mounted?)")
    os.makedirs(root, mode=0o700, exist_ok=True)
    store = os.path.join(root, "host-keys")
    os.makedirs(store, mode=0o700, exist_ok=True)
    os.chmod(store, 0o700)
    return store


def _copy_tree(source, target):
    """Copy the plain files of folder ``source`` into the new folder ``target`` (0700), keeping
    their modes; links and anything else are left out."""
    os.mkdir(target, 0o700)
    for name in os.listdir(source):
        path = os.path.join(source, name)
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, "rb") as handle:
                data = handle.read(1 << 16)
            fd = os.open(os.path.join(target, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         stat.S_IMODE(os.lstat(path).st_mode) & 0o644)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)


def _move_set(source, target):
    """Move one folder of keys to ``target`` unless a folder is there already (another node
    moved it first: same keys), then remove ``source``. Copy and rename: the store may be on
    another file system than the old place."""
    if not os.path.isdir(target):
        temporary = os.path.join(os.path.dirname(target), f".migrating-{secrets.token_hex(8)}")
        try:
            _copy_tree(source, temporary)
            try:
                os.rename(temporary, target)
            except OSError:
                if not os.path.isdir(target):
                    raise
        finally:
            shutil.rmtree(temporary, ignore_errors=True)
    shutil.rmtree(source, ignore_errors=True)


def migrate(where):
    """
    Move the key sets (and retired sets) kept in the state dir (``where["legacy"]``) into a
    store the admin set elsewhere (``host_keys:store_dir``), keys unchanged, and remove them
    there; nothing to do for the default store (the state dir itself). Returns the moved names
    (``[]`` when there is nothing to move: a ``stat`` per call). Safe on several nodes at once.
    """
    where = _spec(where)
    root, legacy_root = where["root"], where["legacy"]
    if not legacy_root or os.path.normpath(legacy_root) == os.path.normpath(root):
        return []
    moved = []
    for kind in ("host-keys", "host-keys-retired"):
        old = os.path.join(legacy_root, kind)
        if not os.path.isdir(old) or os.path.islink(old):
            continue
        target_dir = keys_dir(root) if kind == "host-keys" else _retired_store(root)
        for name in sorted(os.listdir(old)):
            folder = os.path.join(old, name)
            if name.startswith(".") or os.path.islink(folder) or not os.path.isdir(folder):
                continue
            if kind == "host-keys" and not complete_set(folder):
                continue
            _move_set(folder, os.path.join(target_dir, name))
            moved.append(f"{kind}/{name}")
        try:
            os.rmdir(old)  # empty now (temporary folders of a crashed run stay, to be looked at)
        except OSError:
            pass
    return moved


def _retired_store(root):
    keys_dir(root)
    os.makedirs(retired_dir(root), mode=0o700, exist_ok=True)
    return retired_dir(root)


def shared_set(root, stack, rsa_bits, make=None):
    """The folder of the shared key set of ``stack``, generated if needed (``make(stack, rsa_bits)``,
    default ``material``); its parent must exist."""
    store_dir = keys_dir(root)
    final = os.path.join(store_dir, stack)
    if all(os.path.isfile(os.path.join(final, name)) for name in key_files()):
        return final
    temporary = os.path.join(store_dir, f".{stack}.tmp-{secrets.token_hex(8)}")
    data = (make or material)(stack, rsa_bits)
    os.mkdir(temporary, 0o700)
    try:
        write_set(temporary, data)
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


def complete_set(folder):
    return all(os.path.isfile(os.path.join(folder, name)) for name in key_files())


def read_set(folder):
    """``{file name: bytes}`` of a complete key set in ``folder``."""
    data = {}
    for name in key_files():
        with open(os.path.join(folder, name), "rb") as handle:
            data[name] = handle.read(1 << 16)
    return data


def _node_copy(sshd_data, stack):
    """The node copy of ``stack`` as ``{file name: bytes}`` (``{}`` when incomplete)."""
    keys = os.path.join(node_dir(sshd_data, stack), "keys")
    return read_set(keys) if present(sshd_data, stack) else {}


def shared_names(root):
    """The names in the key store ``root``'s set folder (one directory read; empty when it is
    not there): a stack not among them has no shared set."""
    try:
        return set(os.listdir(os.path.join(root, "host-keys")))
    except OSError:
        return set()


def node_names(sshd_data):
    """The stacks with a folder in this node's copies (one directory read)."""
    try:
        return set(os.listdir(os.path.join(sshd_data, "stacks")))
    except OSError:
        return set()


def shared_complete(root, stack):
    """True when the key store ``root`` holds the complete shared set of ``stack``."""
    return complete_set(os.path.join(root, "host-keys", stack))


def _shared_if_reachable(root, stack):
    """The shared folder of ``stack`` when the storage and a complete set are there, else None."""
    final = os.path.join(root, "host-keys", stack)
    return final if complete_set(final) else None


def ensure(sshd_data, where, stack, rsa_bits=3072, make=None):
    """
    Make sure the node has ``stack``'s current key set; returns True when files were copied
    (first copy, generation, or a shared set that changed since: compared by content).
    ``where`` is the shared key store (``store``, or its root path); sets still at its old place
    are moved into it first (``migrate``). ``make``: where a missing set is generated
    (``material``'s signature; ``ccc_hostkey_maker`` passes its child processes).

    A complete node copy is kept as it is while the shared set is unreachable or missing (the
    storage is away, the store not usable, or nobody has generated it): it is never replaced by
    a fresh set. Raises ``FileNotFoundError`` when the store cannot be used and the node has no copy.
    """
    where = _spec(where)
    local = _node_copy(sshd_data, stack)
    try:
        migrate(where)
    except FileNotFoundError:
        if not local:
            raise
    if local:
        source = _shared_if_reachable(where["root"], stack)
        if source is None:
            return False
    else:
        source = shared_set(where["root"], stack, rsa_bits, make)
    wanted = read_set(source)
    changed = [name for name in key_files() if local.get(name) != wanted[name]]
    if not changed:
        return False
    _write_node_copy(sshd_data, stack, wanted, changed)
    return True


def _write_node_copy(sshd_data, stack, wanted, names):
    """Replace ``names`` in the node copy of ``stack``, each file atomically (``write_file_at``)."""
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
            for name in names:
                ccc_safefs.write_file_at(keys_fd, name, wanted[name], 0o644 if name.endswith(".pub") else 0o600, (0, 0))
        finally:
            os.close(keys_fd)
    finally:
        os.close(local_fd)


def retired_dir(root):
    """Where ``rotate`` keeps the sets it replaced (in the store: shared, root-only)."""
    return os.path.join(root, "host-keys-retired")


def rotate(where, stack, rsa_bits=3072, now=None):
    """
    Replace the shared key set of ``stack`` with a fresh one; returns ``{"retired": path or
    None, "current": path}``.

    The new set is generated in a temporary folder first. The old set is then renamed to
    ``<root>/host-keys-retired/<STACK>.<UTC time>`` and the new one renamed into its
    place: two renames on one file system, so a set is never half written. Containers are not
    touched: they use their node copies until the next ``state.apply containers`` copies the
    new set (``ensure``). A node that generates a set between the two renames (a first deploy
    racing the rotation) wins, and its fresh set is kept: either way the old keys are retired.
    """
    where = _spec(where)
    migrate(where)
    root = where["root"]
    store_dir = keys_dir(root)
    final = os.path.join(store_dir, stack)
    temporary = os.path.join(store_dir, f".{stack}.tmp-{secrets.token_hex(8)}")
    os.mkdir(temporary, 0o700)
    retired = None
    try:
        _generate(temporary, stack, rsa_bits)
        if os.path.isdir(final):
            os.makedirs(retired_dir(root), mode=0o700, exist_ok=True)
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
            retired = os.path.join(retired_dir(root), f"{stack}.{stamp}-{secrets.token_hex(2)}")
            os.rename(final, retired)
        try:
            os.rename(temporary, final)
        except OSError:
            if not complete_set(final):
                raise
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return {"retired": retired, "current": final}


def fingerprints(folder):
    """``{key type: "SHA256:..."}`` of the public keys in ``folder`` (as ``ssh-keygen -l`` shows them)."""
    result = {}
    for kind in KEY_TYPES:
        with open(os.path.join(folder, f"ssh_host_{kind}_key.pub"), encoding="ascii") as handle:
            blob = base64.b64decode(handle.read().split()[1])
        result[kind] = "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return result


def outdated(sshd_data, root):
    """The stacks with a node copy on this node that differs from their complete shared set
    (rotated since the copy was made); stacks without a shared set are left out."""
    stacks_dir = os.path.join(sshd_data, "stacks")
    if not os.path.isdir(stacks_dir):
        return []
    stale = []
    for stack in sorted(os.listdir(stacks_dir)):
        source = _shared_if_reachable(root, stack) if not stack.startswith(".") else None
        if source and present(sshd_data, stack) and _node_copy(sshd_data, stack) != read_set(source):
            stale.append(stack)
    return stale
