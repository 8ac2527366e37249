"""
Execution module ``ccc_netplan``: the netplan role's file as netplan would read it, checked with
``netplan generate --root-dir`` in a scratch root before anything on the node changes, and
``netplan apply`` (rules in ``_utils/ccc_netplan.py``; the state is ``_states/ccc_netplan.py``).
"""

import glob
import os
import shutil
import subprocess
import tempfile

import ccc_netplan
import ccc_role_settings
from salt.exceptions import CommandExecutionError

__virtualname__ = "ccc_netplan"

# Where netplan reads YAML (a file in a later folder shadows one of the same name in an earlier),
# below ROOT (the node's root; tests point it at a scratch tree).
SOURCE_DIRS = ("lib/netplan", "etc/netplan", "run/netplan")
ROOT = "/"


def __virtual__():
    return __virtualname__


def document(settings=None):
    """
    The role's netplan file for this node: ``{"path": ..., "text": ... or None, "document": ...}``
    (``text`` is None when ``ccc:netplan`` defines no interface). A pillar with problems (by the
    role's schema.yaml, then ``ccc_netplan.build``'s rules that compare values) raises
    ``CommandExecutionError`` listing every one. ``settings``: the role's merged settings
    (default: ``ccc_cluster.role_settings``).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_netplan.document
    """
    if settings is None:
        settings = ccc_role_settings.read("netplan", __pillar__, __salt__["cp.get_file_str"])
    problems = ccc_role_settings.problems("netplan", settings, __salt__["cp.get_file_str"])
    if not problems:
        built, problems = ccc_netplan.build(settings)
    if problems:
        raise CommandExecutionError("ccc:netplan is not valid, nothing changed: " + "; ".join(problems))
    return {"path": ccc_netplan.file_path(settings), "document": built,
            "text": None if built is None else ccc_netplan.render(built)}


def _netplan():
    found = shutil.which("netplan") or shutil.which("netplan", path="/usr/sbin:/sbin:/usr/bin")
    if not found:
        raise CommandExecutionError("netplan is not installed on this node (package netplan.io)")
    return found


def _scratch_root(root, path, text):
    """The node's netplan YAML files copied below ``root``, with the role's file (``path``, in
    /etc/netplan) replaced by ``text`` (or left out when ``text`` is None)."""
    own = os.path.join("etc/netplan", os.path.basename(path))
    for source in SOURCE_DIRS:
        os.makedirs(os.path.join(root, source), mode=0o700, exist_ok=True)
        for found in sorted(glob.glob(os.path.join(ROOT, source, "*.yaml"))):
            relative = os.path.join(source, os.path.basename(found))
            if relative != own and os.path.isfile(found):
                shutil.copyfile(found, os.path.join(root, relative))
                os.chmod(os.path.join(root, relative), 0o600)
    if text is not None:
        fd = os.open(os.path.join(root, own), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)


def validate(path, text):
    """
    ``None`` when netplan accepts this node's configuration with ``path`` holding ``text``
    (``None``: without that file), else netplan's message, paths as on the node. Runs ``netplan
    generate --root-dir`` in a scratch root: nothing on the node changes.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_netplan.validate /etc/netplan/90-ccc-salt.yaml "$(cat candidate.yaml)"
    """
    netplan = _netplan()
    root = tempfile.mkdtemp(prefix="ccc-netplan-")
    try:
        _scratch_root(root, path, text)
        try:
            proc = subprocess.run([netplan, "generate", "--root-dir", root], capture_output=True, text=True,
                                  timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"netplan generate did not run: {exc}"
        if proc.returncode == 0:
            return None
        message = (proc.stderr.strip() or proc.stdout.strip() or f"exit status {proc.returncode}")
        return message.replace(root.rstrip("/") + "/etc/netplan/", os.path.dirname(path) + "/").replace(root.rstrip("/"), "")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def apply():
    """
    ``netplan apply``: the node's running network made to match its netplan files. Raises
    ``CommandExecutionError`` with netplan's message when it fails.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_netplan.apply
    """
    try:
        proc = subprocess.run([_netplan(), "apply"], capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CommandExecutionError(f"netplan apply did not run: {exc}") from exc
    if proc.returncode:
        raise CommandExecutionError("netplan apply failed: " + (proc.stderr.strip() or proc.stdout.strip()
                                                                or f"exit status {proc.returncode}"))
    return True
