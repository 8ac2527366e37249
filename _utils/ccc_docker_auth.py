"""
Root's Docker registry logins (``/root/.docker/config.json``), written as ``docker login``
writes them: ``{"auths": {"<host>": {"auth": base64("user:password")}}}``. Pure functions over
the parsed file; the credentials never appear in what they return for people (``describe``).
"""

import base64
import json


def auth_value(username, password):
    """The ``auth`` field ``docker login`` stores for these credentials."""
    return base64.b64encode(f"{username}:{password}".encode()).decode()


def parse(text):
    """The config file's mapping (``{}`` for no file); ``ValueError`` for one that is not JSON."""
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"the Docker config file is not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise ValueError("the Docker config file is not a JSON object")
    return data


def logged_in(config, host, username, password):
    """True when ``config`` holds exactly these credentials for ``host``."""
    entry = (config.get("auths") or {}).get(host) or {}
    return entry.get("auth") == auth_value(username, password)


def with_login(config, host, username, password):
    """A copy of ``config`` with ``host``'s login set (other keys and hosts kept)."""
    result = json.loads(json.dumps(config))
    auths = result.setdefault("auths", {})
    auths[host] = {"auth": auth_value(username, password)}
    return result


def without_logins(config, hosts):
    """A copy of ``config`` without the logins of ``hosts``, and the hosts that were removed."""
    result = json.loads(json.dumps(config))
    auths = result.get("auths") or {}
    removed = sorted(host for host in hosts if host in auths)
    for host in removed:
        del auths[host]
    return result, removed


def render(config):
    return json.dumps(config, indent="\t", sort_keys=True) + "\n"
