"""
The inotify role's rules: which ``fs.inotify.*`` sysctls ``ccc:inotify`` sets, and what to tell
the admin when the node is itself a container.

Lab users run IDEs, file watchers and Jupyter, which each hold thousands of inotify watches; the
kernel default (8192 watches, 128 instances on older kernels) runs out and editors silently stop
noticing changes. Plain Python, no Salt imports.
"""

import ccc_role_schema

CONFIG_FILE = "/etc/sysctl.d/60-ccc-inotify.conf"


def sysctls(settings, schema):
    """
    ``ccc:inotify`` (defaults merged) → ``({sysctl name: value}, problems)`` for the keys that
    are set (null = leave the kernel's value alone), by the role's ``schema`` (every key is one
    ``fs.inotify.*`` sysctl; unknown keys are refused there).
    """
    problems = ccc_role_schema.problems("inotify", settings, schema)
    if problems:
        return {}, problems
    return {f"fs.inotify.{key}": value for key, value in settings.items() if value is not None}, []


def container_verdict(container, writable):
    """
    What a node that is a container (``container``: its kind, e.g. ``docker``; None on a real
    host) means for these sysctls: ``None`` on a real host, else ``(ok, text)``. Without a
    writable ``/proc/sys`` nothing can be set (the values belong to the container's host); with
    one, the values reach the host's kernel, which the admin should know.
    """
    if not container:
        return None
    if not writable:
        return (False, f"this node is a {container} container with a read-only /proc/sys: fs.inotify.* "
                       "cannot be set here, nothing was changed; set them on the machine that runs it")
    return (True, f"this node is a {container} container: the fs.inotify.* values set here apply to "
                  "the kernel of the machine that runs it")
