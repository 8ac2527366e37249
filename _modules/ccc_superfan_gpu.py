"""
Execution module ``ccc_superfan_gpu``: the superfan_gpu role's own settings checked (the role's
``init.sls`` asks before it uses them; the fan controller's keys are ``ccc_fans.config``'s).
"""

import ccc_role_settings
import ccc_superfan_gpu

__virtualname__ = "ccc_superfan_gpu"


def __virtual__():
    return __virtualname__


def problems(settings=None):
    """
    What is wrong with the role's keys of ``ccc:fans`` (``packages``, ``kernel_modules``): a list
    of sentences, empty when usable. ``settings`` defaults to the role's effective settings.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_superfan_gpu.problems
    """
    if settings is None:
        settings = ccc_role_settings.read("superfan_gpu", __pillar__, __salt__["cp.get_file_str"])
    return ccc_superfan_gpu.problems(settings)
