"""
The one redaction rule for everything ccc-salt displays: plans, ``resolve``, test-run diffs.

Plans and diffs end up in job caches, event buses and terminals, so the values of the admin's
``EXTRA_ENVS`` (tokens), ``*.password`` labels and FRP basic-auth ``pass`` values are masked.
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
