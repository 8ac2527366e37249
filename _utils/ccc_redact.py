"""
The one redaction rule for everything ccc-salt displays: plans, ``resolve``, test-run diffs.

Plans and diffs end up in job caches, event buses and terminals, so the values of the admin's
``EXTRA_ENVS`` (tokens), ``*.password`` labels and FRP basic-auth ``pass`` values are masked.
The same rule says which values a compute container was given (``given_secrets``): only those
are masked in its log lines (``ccc_problems``), never the node's other secrets, which the
container never receives (masking those would tell it which guess is a secret).
"""

import json

SECRET_LABEL_MARKERS = (".password",)
# The contract variables the resolver sets (they win over EXTRA_ENVS): shown as they are. Any
# other variable of a spec comes from the admin's EXTRA_ENVS (tokens) and is masked.
SHOWN_ENV = frozenset({
    "USER_NAME", "USER_ID", "USER_PUBKEY", "USER_GROUPS", "INSTALL_PACKAGES", "INSTALL_REPOSITORY_KEYS",
    "INSTALL_REPOSITORY_SOURCES", "RUNIT_STATUS_FILE", "RUNIT_WORKING_ENV_FILE", "APPS", "CONTAINER_NAME",
    "CONTAINER_NODE", "CONTAINER_IMAGE", "CONTAINER_WELCOME_MSG", "NVIDIA_VISIBLE_DEVICES",
})


def redact(data):
    """
    A copy of a resolution, spec or spec diff fit for display: the values of ``EXTRA_ENVS`` (in
    a spec's environment every variable outside ``SHOWN_ENV``), ``*.password`` labels and FRP
    ``pass`` values become ``***`` (unset stays unset, so a diff still shows that one changed).
    """
    return _redacted(json.loads(json.dumps(data)), None)


# A given value shorter than this is not masked in a container's log: a flag ("1", "yes") would
# blank every occurrence of a common word and hides nothing the container does not hold anyway.
MIN_MASKED_CHARS = 4


def given_secrets(spec):
    """
    The values a spec gives its container that ``redact`` masks (its environment outside
    ``SHOWN_ENV``, ``*.password`` labels) and that are at least ``MIN_MASKED_CHARS`` long,
    longest first: what to mask in that container's log lines, and nothing else.
    """
    found = set()
    for section in ("environment", "labels"):
        for name, value in ((spec or {}).get(section) or {}).items():
            if _is_secret(section, name) and isinstance(value, str) and len(value) >= MIN_MASKED_CHARS:
                found.add(value)
    return sorted(found, key=lambda value: (-len(value), value))


def _redacted(value, section):
    if isinstance(value, list):
        return [_redacted(item, section) for item in value]
    if not isinstance(value, dict):
        return value
    return {name: _masked(item) if _is_secret(section, name) else _redacted(item, name) for name, item in value.items()}


def _is_secret(section, name):
    if section == "EXTRA_ENVS":
        return True
    if section == "environment":
        return name not in SHOWN_ENV
    if section == "labels":
        return any(marker in name for marker in SECRET_LABEL_MARKERS)
    return section == "HTTP" and name == "pass"


def _masked(value):
    # A diff entry keeps its shape ({"old", "new"}) and still shows whether a value is set.
    if isinstance(value, dict):
        return {name: _masked(item) for name, item in value.items()}
    return value if value in (None, "") else "***"
