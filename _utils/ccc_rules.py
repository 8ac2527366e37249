"""
The small rules every part of ccc-salt agrees on (execution modules, states, beacons, runner,
agents): the STACK_NAME, e-mail and variable-name patterns, the Docker labels that mark a
managed container, and how CCC's loose booleans read.

Shared code lives in ``_utils/``: ``saltutil.sync_all`` (or the master's ``utils_dirs``)
puts it where Salt's loader lets custom modules import it by name.
"""

import re

STACK_NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
EMAIL_PATTERN = re.compile(r"^[A-Za-z0-9_%+-][A-Za-z0-9._%+-]{0,63}@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$")
ENV_NAME_PATTERN = re.compile(r"^[A-Z_][A-Z0-9_]{0,63}$")

MANAGED_BY_LABEL = "ccc.managed-by"
MANAGED_BY_VALUE = "ccc-salt"
STACK_LABEL = "ccc.stack"
SPEC_HASH_LABEL = "ccc.spec-hash"


def truthy(value):
    """CCC's loose booleans: ``true``, ``"True"``, ``"yes"``, ``1``."""
    return value is True or (isinstance(value, (str, int)) and str(value).lower() in ("true", "1", "yes"))
