"""
Execution module ``ccc_settings``: check a settings file the way a deploy would.
"""

import ccc_schema
import ccc_settings_file

__virtualname__ = "ccc_settings"


def __virtual__():
    """Loaded where settings can be checked as a deploy checks them: with ``jsonschema``."""
    if ccc_schema.JSONSCHEMA_INSTALLED:
        return __virtualname__
    return False, "ccc_settings needs the jsonschema package (salt-pip install jsonschema)"


def schema():
    """
    Return the JSON schema of the user settings file.

    CLI Example:

    .. code-block:: bash

        salt-call --out=json ccc_settings.schema
    """
    return ccc_schema.USER_SETTINGS_SCHEMA


def check_file(path, stack_name):
    """
    Read, parse and schema-check one settings file; report what a deploy would say about it.

    Cluster rules (nodes, image policy, SHM maximum, subdomains) are applied by
    ``ccc_containers.resolve``, which knows the container's user type.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_settings.check_file /data/users/a@b.org/container-settings/box.yml box
    """
    try:
        text = ccc_settings_file.read_settings_file(path)
        if text is None:
            return {"ok": True, "problems": [], "settings": None}
        section = ccc_settings_file.parse_settings_text(text, stack_name)
    except ccc_settings_file.SettingsError as exc:
        return {"ok": False, "problems": [str(exc)], "settings": None}
    problems = ccc_schema.validate_user_settings(section, stack_name, {})
    return {"ok": not problems, "problems": problems, "settings": section}
