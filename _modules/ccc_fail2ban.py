"""
Execution module ``ccc_fail2ban``: the fail2ban role's checked settings and jail file
(rules in ``_utils/ccc_fail2ban.py``).
"""

import ccc_fail2ban
import ccc_role_settings

__virtualname__ = "ccc_fail2ban"


def __virtual__():
    return __virtualname__


def jail(settings=None):
    """
    The host sshd jail from ``ccc:fail2ban`` (``settings``: the role's merged settings; from
    the command line they are read through ``ccc_cluster.role_settings``). Returns
    ``{"problems": [...], "text": jail file or None, "ignore_country": code or None,
    "ignore_script": path}``: the role writes nothing while ``problems`` is not empty.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_fail2ban.jail
    """
    settings, schema = ccc_role_settings.given("fail2ban", settings, __pillar__, __salt__["cp.get_file_str"])
    checked, problems = ccc_fail2ban.check(settings, schema)
    text = None if problems else ccc_fail2ban.jail_text(checked)
    return {"problems": problems, "text": text, "ignore_country": checked.get("ignore_country"),
            "ignore_script": ccc_fail2ban.IGNORE_SCRIPT}
