"""
State ``ccc_netplan``: the netplan role's own file (``/etc/netplan/<name>.yaml``, mode 0600)
from ``ccc:netplan``, validated before it is written and applied only then.

.. code-block:: yaml

    ccc-cluster-netplan-config:
      ccc_netplan.config_managed:
        - settings: {...}            # the role's merged settings (map.jinja)

Order of work: the pillar is checked (every problem, each naming its key); the candidate text is
compared with the file (equal: nothing to do, no ``netplan apply``); test mode shows the diff;
``netplan generate --root-dir`` validates the candidate together with the node's other netplan
files in a scratch root; only when netplan accepts it is the file replaced and ``netplan apply``
run. A candidate netplan rejects leaves the file and the running network untouched and fails with
netplan's message. When ``netplan apply`` fails, the previous file is put back and applied again.
"""

import os

from salt.exceptions import CommandExecutionError

import ccc_netplan
import ccc_safefs
import _ccc_state_ret as ccc_state_ret

__virtualname__ = "ccc_netplan"


def __virtual__():
    return __virtualname__


def _write(path, text):
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    ccc_safefs.replace_file(path, text.encode(), 0o600, root="/")


def _restore(path, old):
    """Put the previous file back (or remove the new one) and apply that; what happened, as text."""
    try:
        if old is None:
            os.unlink(path)
        else:
            _write(path, old)
        __salt__["ccc_netplan.apply"]()
    except (OSError, CommandExecutionError) as exc:
        return f"restoring the previous file failed too: {exc}"
    return "the previous file was put back and applied"


def _install(name, path, old, text, changes):
    """Validate, write, apply; the state return."""
    problem = __salt__["ccc_netplan.validate"](path, text)
    if problem:
        return ccc_state_ret.result(name, False, {},
                                    f"{path} not written, netplan rejects it (the running network is untouched): {problem}")
    _write(path, text)
    try:
        __salt__["ccc_netplan.apply"]()
    except CommandExecutionError as exc:
        return ccc_state_ret.result(name, False, {}, f"{path} was written but {exc}; {_restore(path, old)}")
    return ccc_state_ret.result(name, True, changes, f"{path} written (mode 0600) and netplan applied")


def config_managed(name, settings):
    """``/etc/netplan/<settings.name>.yaml`` from ``settings``, validated, written, applied."""
    try:
        wanted = __salt__["ccc_netplan.document"](settings)
    except CommandExecutionError as exc:
        return ccc_state_ret.result(name, False, {}, str(exc))
    path, text = wanted["path"], wanted["text"]
    if text is None:
        return ccc_state_ret.result(name, True, {}, f"ccc:netplan defines no interface, bond or VLAN: {path} is "
                                                    "not written (an existing one stays; ccc:roles:netplan: absent removes it)")
    old = ccc_safefs.read_text(path)
    mode_wrong = old is not None and os.stat(path).st_mode & 0o777 != 0o600
    if old == text and not mode_wrong:
        return ccc_state_ret.result(name, True, {}, f"{path} is up to date")
    if old == text:
        if not __opts__["test"]:
            os.chmod(path, 0o600)
        return ccc_state_ret.result(name, None if __opts__["test"] else True, {"mode": "0600"},
                                    f"{path} {'would get' if __opts__['test'] else 'got'} mode 0600")
    changes = {"diff": ccc_netplan.diff(old, text, path)}
    if __opts__["test"]:
        try:
            problem = __salt__["ccc_netplan.validate"](path, text)
        except CommandExecutionError as exc:
            problem = None
            note = f" (not validated: {exc})"
        else:
            note = ""
        if problem:
            return ccc_state_ret.result(name, False, {}, f"{path} would not be written, netplan rejects it: {problem}")
        return ccc_state_ret.result(name, None, changes, f"{path} would be written and netplan applied{note}")
    try:
        return _install(name, path, old, text, changes)
    except CommandExecutionError as exc:
        return ccc_state_ret.result(name, False, {}, f"{path} not written: {exc}")


def config_absent(name, settings):
    """The role's file removed and ``netplan apply`` run (the addresses it configured may go)."""
    try:
        path = ccc_netplan.file_path(settings or {})
    except ValueError as exc:
        return ccc_state_ret.result(name, False, {}, str(exc))
    if ccc_safefs.read_text(path) is None:
        return ccc_state_ret.result(name, True, {}, f"{path} is absent")
    changes = {"removed": path}
    if __opts__["test"]:
        return ccc_state_ret.result(name, None, changes, f"{path} would be removed and netplan applied")
    os.unlink(path)
    try:
        __salt__["ccc_netplan.apply"]()
    except CommandExecutionError as exc:
        return ccc_state_ret.result(name, False, changes, f"{path} removed, but {exc}")
    return ccc_state_ret.result(name, True, changes, f"{path} removed and netplan applied")
