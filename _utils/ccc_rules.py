"""
The small rules every part of ccc-salt agrees on (execution modules, states, runner, and the
beacons through execution functions): the STACK_NAME, e-mail, variable-name and minion-id patterns, the
Docker labels that mark a managed container, and how CCC's loose booleans read.
"""

import re

STACK_NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")  # also STORAGE_NAME and data group names
EMAIL_PATTERN = re.compile(r"^[A-Za-z0-9_%+-][A-Za-z0-9._%+-]{0,63}@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$")
ENV_NAME_PATTERN = re.compile(r"^[A-Z_][A-Z0-9_]{0,63}$")
# A minion id the master's runners act on (ids come from minion-supplied event data).
MINION_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")

MANAGED_BY_LABEL = "ccc.managed-by"
MANAGED_BY_VALUE = "ccc-salt"
STACK_LABEL = "ccc.stack"
SPEC_HASH_LABEL = "ccc.spec-hash"


def truthy(value):
    """CCC's loose booleans: ``true``, ``"True"``, ``"yes"``, ``1``."""
    return value is True or (isinstance(value, (str, int)) and str(value).lower() in ("true", "1", "yes"))


def is_whole(value, low=None, high=None):
    """True for a whole number (``low``..``high`` when given). Never a bool: YAML reads ``yes``
    and ``true`` as True, which Python would count as 1 (one second, one retry, port 1)."""
    return (isinstance(value, int) and not isinstance(value, bool)
            and (low is None or value >= low) and (high is None or value <= high))


def is_number(value):
    """True for an int or a float, never a bool (see ``is_whole``)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_stack_name(value):
    """
    A string shaped like a STACK_NAME (so also a safe folder name: no ``/``, no leading dot).
    ``fullmatch``: the pattern's ``$`` also matches before a final newline.
    """
    return isinstance(value, str) and STACK_NAME_PATTERN.fullmatch(value) is not None


def is_email(value):
    """A string shaped like a user's e-mail address (the name of their storage folder)."""
    return isinstance(value, str) and EMAIL_PATTERN.fullmatch(value) is not None


def is_env_name(value):
    """A string usable as an environment variable name (``EXTRA_ENVS`` keys)."""
    return isinstance(value, str) and ENV_NAME_PATTERN.fullmatch(value) is not None


def is_minion_id(value):
    """A string shaped like a minion id the runners act on (``fullmatch``: no final newline)."""
    return isinstance(value, str) and MINION_ID_PATTERN.fullmatch(value) is not None
