"""
SSH host key sets made ahead, so that a new stack's first deploy does not wait for them.

RSA generation costs about 0.13 s of CPU per 3072-bit key; 50 new stacks take 6-7 s of CPU from
a first deploy, on a node whose CPUs Docker needs to start the containers. So after every deploy
(``top_up_later``, from ``ccc_deploy``) a detached, lowest-priority process makes:

* the shared set of every stack in pillar that has none yet (the key store is the cluster's: a
  stack added for any node gets its keys at the first apply anywhere, before its own node runs it);
* spare sets, up to ``ccc:cluster:host_keys:spare_sets`` (0, the default, switches all of this
  off), in ``<store>/host-keys-spare/``
  (root-only, on the key store beside the sets, covered in containers like them): the first
  deploy of a stack no apply has seen yet ``take``s one instead of generating.

A spare is claimed by renaming it to a name of this process's own (atomic on one file system,
NFS included: two nodes never get the same set), read, and removed; its public keys get the
stack's comment then. A spare made for another RSA size is never used. Everything here is best
effort: without spares or the background process a set is generated during the deploy, as before.
"""

import fcntl
import os
import secrets
import shutil
import threading

import ccc_hostkeys
import ccc_rules

SPARE_DIR = "host-keys-spare"
LOCK_FILE = ".top-up.lock"


def spare_dir(root):
    return os.path.join(root, SPARE_DIR)


def target(cluster):
    """``ccc:cluster:host_keys:spare_sets`` (``ccc_pillar.cluster_settings``; a whole number, 0
    or anything else switches spares off)."""
    value = (cluster.get("host_keys") or {}).get("spare_sets", 0)
    return value if ccc_rules.is_whole(value, 1) else 0


def _spares(root, rsa_bits):
    """Names of the spare sets of ``rsa_bits`` in the store ``root`` (one directory read: a set
    gets its name only once complete, ``_make_spare``)."""
    try:
        names = os.listdir(spare_dir(root))
    except OSError:
        return []
    prefix = f"{int(rsa_bits)}-"
    return [name for name in names if name.startswith(prefix)]


def count(root, rsa_bits):
    return len(_spares(root, rsa_bits))


def take(root, stack, rsa_bits):
    """One spare set of ``rsa_bits`` as ``ccc_hostkeys.material`` gives it (public keys with
    ``stack``'s comment), removed from the spares; None when there is none."""
    folder = spare_dir(root)
    for name in _spares(root, rsa_bits):
        claimed = os.path.join(folder, f".taken-{secrets.token_hex(8)}")
        try:
            os.rename(os.path.join(folder, name), claimed)
        except OSError:
            continue  # another deploy took it first
        try:
            data = ccc_hostkeys.read_set(claimed)  # raises for an incomplete one (never made so)
        except OSError:
            continue
        finally:
            shutil.rmtree(claimed, ignore_errors=True)
        return {file: (_comment(content, stack) if file.endswith(".pub") else content) for file, content in data.items()}
    return None


def _comment(public, stack):
    """A public key line with ``ccc-salt <STACK>`` as its comment."""
    return b" ".join(public.split()[:2]) + f" ccc-salt {stack}\n".encode()


def _make_spare(root, rsa_bits):
    folder = spare_dir(root)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    temporary = os.path.join(folder, f".making-{secrets.token_hex(8)}")
    os.mkdir(temporary, 0o700)
    try:
        ccc_hostkeys.write_set(temporary, ccc_hostkeys.material("", rsa_bits))
        os.rename(temporary, os.path.join(folder, f"{int(rsa_bits)}-{secrets.token_hex(8)}"))
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def wanted_stacks(ccc):
    """STACK_NAMEs of pillar's containers that run somewhere (valid names, not DISABLED)."""
    return [entry["STACK_NAME"] for entry in ccc.get("containers") or []
            if isinstance(entry, dict) and ccc_rules.is_stack_name(entry.get("STACK_NAME"))
            and not ccc_rules.truthy(entry.get("DISABLED"))]


def _locked(root):
    """The top-up lock of the store ``root`` (a descriptor holding ``flock``), None when another
    top-up holds it; one top-up per store at a time. Makes the store's folders (root-only);
    raises when the storage is away."""
    ccc_hostkeys.keys_dir(root)
    os.makedirs(spare_dir(root), mode=0o700, exist_ok=True)
    os.chmod(spare_dir(root), 0o700)
    fd = os.open(os.path.join(spare_dir(root), LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _make(root, stacks, spares, rsa_bits):
    made = {"sets": 0, "spares": 0}
    for stack in stacks:
        if not ccc_hostkeys.shared_complete(root, stack):
            ccc_hostkeys.shared_set(root, stack, rsa_bits)
            made["sets"] += 1
    while count(root, rsa_bits) < spares:
        _make_spare(root, rsa_bits)
        made["spares"] += 1
    return made


def top_up(root, stacks, spares, rsa_bits):
    """Make the missing shared sets of ``stacks``, then spare sets until ``spares`` are there
    (none while another top-up of the store runs); returns what it made."""
    fd = _locked(root)
    if fd is None:
        return {"sets": 0, "spares": 0}
    try:
        return _make(root, stacks, spares, rsa_bits)
    finally:
        os.close(fd)


def top_up_later(cluster, stacks):
    """
    Start ``top_up`` for the key store of ``cluster`` in a detached process at the lowest CPU
    priority, and return at once (True when started; it holds the store's top-up lock from
    then until it is done). Nothing is started with ``spare_sets`` 0 (the default: the key store
    then changes only during an apply), while other threads run (a fork could copy a lock one
    holds), nor when there is nothing to make.
    """
    try:
        root = ccc_hostkeys.store_root(cluster)
    except ValueError:
        return False
    rsa_bits = int((cluster.get("host_keys") or {}).get("rsa_bits", 3072))
    spares = target(cluster)
    if not spares or threading.active_count() > 1:
        return False  # switched off (the default): nothing is made behind the apply's back
    shared = ccc_hostkeys.shared_names(root)  # one directory read, not a stat per stack (NFS)
    stacks = [stack for stack in stacks if stack not in shared]
    if not stacks and count(root, rsa_bits) >= spares:
        return False
    if not os.path.isdir(os.path.dirname(root.rstrip("/"))):
        return False  # the storage is away
    pid = os.fork()
    if pid:
        _, status = os.waitpid(pid, 0)  # the first child takes the lock, forks again and ends
        return os.waitstatus_to_exitcode(status) == 0
    code = 1
    try:
        os.setsid()
        lock = _locked(root)
        if lock is not None and os.fork() == 0:
            _background(lock, root, stacks, spares, rsa_bits)
        code = 0 if lock is not None else 1
    except BaseException:  # noqa: BLE001 - best effort: the next deploy generates what is missing
        pass
    finally:
        os._exit(code)


def _background(lock, root, stacks, spares, rsa_bits):
    """The detached process: never holds the caller's output open (salt-call's pipe), keeps
    only the lock, runs at the lowest priority, and ends without running the caller's exit
    handlers."""
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.closerange(3, lock)
        os.closerange(lock + 1, 1 << 16)
        os.nice(19)
        _make(root, stacks, spares, rsa_bits)
    except BaseException:  # noqa: BLE001 - best effort, as above
        pass
    finally:
        os._exit(0)
