"""
Execution module ``ccc_hostkeys``: the shared SSH host key sets of the containers (one per
STACK_NAME in ``<store>/host-keys``, ``ccc_hostkeys.store``): rotation, fingerprints, and what the
sshd_hostkeys role's states act through (the backup, the move into the key store, the node
copies). Thin: the rules are in ``_utils/ccc_hostkeys.py`` and ``_utils/ccc_hostkey_backup.py``.
"""

import os

import ccc_hostkey_backup
import ccc_hostkeys
import ccc_pillar
import ccc_role_settings
import ccc_rules
from salt.exceptions import CommandExecutionError

__virtualname__ = "ccc_hostkeys"


def __virtual__():
    return __virtualname__


def _cluster():
    return ccc_pillar.cluster_settings(ccc_pillar.pillar_ccc(__pillar__))


def _store():
    try:
        return ccc_hostkeys.store(_cluster())
    except ValueError as exc:
        raise CommandExecutionError(str(exc)) from None


def _stack_folder(stack):
    if not ccc_rules.is_stack_name(stack):
        raise CommandExecutionError(f"{stack!r} is not a STACK_NAME")
    try:
        ccc_hostkeys.migrate(_store())  # a set still at its old place is read from the store
    except OSError as exc:
        raise CommandExecutionError(f"moving the host key sets into the key store failed: {exc}") from exc
    folder = os.path.join(_store()["root"], "host-keys", stack)
    if not os.path.isfile(os.path.join(folder, "ssh_host_ed25519_key.pub")):
        raise CommandExecutionError(f"no shared host key set for {stack} in {os.path.dirname(folder)} "
                                    "(never deployed, or the storage is not mounted here)")
    return folder


def fingerprints(stack):
    """
    The SHA256 fingerprints of ``stack``'s shared host key set (what users' ``ssh`` shows).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_hostkeys.fingerprints ana-main
    """
    return ccc_hostkeys.fingerprints(_stack_folder(stack))


def rotate(stack):
    """
    Replace ``stack``'s shared SSH host key set with a new one. The old set is kept as a dated
    copy in ``<store>/host-keys-retired/``. Nodes copy the new set at their next
    ``state.apply cluster`` (role sshd_hostkeys) or ``state.apply containers``; a running
    container serves the new keys once it restarts.
    Users will see a "host key changed" warning: tell them first.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_hostkeys.rotate ana-main
    """
    old = fingerprints(stack)
    cluster = _cluster()
    rsa_bits = (cluster.get("host_keys") or {}).get("rsa_bits", 3072)
    try:
        result = ccc_hostkeys.rotate(_store(), stack, rsa_bits)
    except OSError as exc:
        raise CommandExecutionError(f"rotating the host keys of {stack} failed: {exc}") from exc
    return {
        "stack": stack,
        "old": old,
        "new": ccc_hostkeys.fingerprints(result["current"]),
        "retired_copy": result["retired"],
        "next": ("nodes copy the new keys at their next state.apply cluster (role sshd_hostkeys) or "
                 f"containers, e.g. now: salt '*' state.apply containers pillar='{{\"containers\": \"{stack}\"}}'; "
                 "the container serves them after its next restart"),
    }


def _backup_steps(backup_dir, keep):
    """``(backup_dir, source, ccc_hostkey_backup.plan or None when there are no sets yet)``;
    ``backup_dir`` and ``keep`` default to the role's settings."""
    if backup_dir is None or keep is None:
        settings = ccc_role_settings.read("sshd_hostkeys", __pillar__, __salt__["cp.get_file_str"])
        backup_dir = backup_dir or settings["backup_dir"]
        keep = keep if keep is not None else settings["keep"]
    source = os.path.join(_store()["root"], "host-keys")
    if not os.path.isdir(source):
        return backup_dir, source, None
    try:
        return backup_dir, source, ccc_hostkey_backup.plan(source, backup_dir, keep)
    except (OSError, ValueError) as exc:
        raise CommandExecutionError(str(exc)) from exc


def _shown(source, steps):
    if steps is None:
        return {"source": source, "sets": 0, "write": None, "prune": []}
    return {"source": source, "sets": steps["sets"], "digest": steps["digest"], "write": steps["write"],
            "prune": steps["prune"]}


def backup_plan(backup_dir=None, keep=None):
    """
    What the sshd_hostkeys role's backup would do now: the content digest of the shared sets,
    the tar it would write (none when the newest backup is current) and the old ones it would
    delete. Defaults: ``ccc:sshd_hostkeys:backup_dir`` and ``keep``.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_hostkeys.backup_plan
    """
    _, source, steps = _backup_steps(backup_dir, keep)
    return _shown(source, steps)


def backup(backup_dir=None, keep=None):
    """
    Carry out ``backup_plan``: a root-only tar (0600, folder 0700) of the shared sets when they
    changed since the newest backup, and the backups beyond the newest ``keep`` deleted. Returns
    the plan carried out.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_hostkeys.backup /root/host-key-backups keep=5
    """
    backup_dir, source, steps = _backup_steps(backup_dir, keep)
    if steps is not None:
        try:
            ccc_hostkey_backup.apply(steps, backup_dir)
        except OSError as exc:
            raise CommandExecutionError(f"host key backup to {backup_dir} failed: {exc}") from exc
    return _shown(source, steps)


def migrate():
    """
    Move the key sets still in the state dir into ``ccc:cluster:host_keys:store_dir`` when the
    admin set one (keys unchanged; nothing to do for the default store). Returns the moved names.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_hostkeys.migrate
    """
    try:
        return ccc_hostkeys.migrate(_store())
    except OSError as exc:
        raise CommandExecutionError(f"moving the host key sets into the key store failed: {exc}") from exc


def outdated(sshd_data):
    """
    The stacks whose node copy in ``sshd_data`` differs from their shared set (rotated since).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_hostkeys.outdated /data/sshd
    """
    try:
        return ccc_hostkeys.outdated(sshd_data, _store()["root"])
    except OSError as exc:
        raise CommandExecutionError(f"comparing the node's host keys with the shared sets failed: {exc}") from exc


def refresh(sshd_data, stack):
    """
    Copy ``stack``'s shared set over its node copy in ``sshd_data``, file by file and atomically,
    when they differ; ``True`` when files were copied. The container serves them after its next
    restart.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_hostkeys.refresh /data/sshd ana-main
    """
    try:
        return ccc_hostkeys.ensure(sshd_data, _store(), stack)
    except OSError as exc:
        raise CommandExecutionError(f"copying the host keys of {stack} failed: {exc}") from exc
