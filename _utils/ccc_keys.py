"""
A user's public keys from GitHub (``USER_PUBKEY_FROM_GITHUB``), with a node-local cache.

GitHub may be unreachable: the last fetched copy is used then, and the user is told. The cache
is ``<ccc:node:state_dir>/github-keys``, node-local: nothing is ever written below a storage
root that is not mounted. Only lines that pass the settings schema's key check are kept.
"""

import logging
import os
import urllib.error
import urllib.request

import ccc_safefs
import ccc_schema

log = logging.getLogger(__name__)

FETCH_TIMEOUT = 5
MAX_BYTES = 65536


def github_keys_for(url_template, fetch, cache_dir):
    """
    ``keys(login) -> (keys, error)`` for the resolver's ``NodeFacts.github_keys``: fetches from
    ``url_template`` (``{login}`` replaced) when ``fetch``, else (and when that fails) reads the
    cached copy.
    """

    def keys(login):
        error = None
        if fetch:
            try:
                return _fetch(url_template.replace("{login}", login), cache_dir, login), None
            except (urllib.error.URLError, OSError, ValueError) as exc:
                error = f"could not fetch the keys of GitHub user {login!r} ({exc})"
        cached = _cached(cache_dir, login)
        if cached is None:
            return [], error
        return cached, error and error + "; the keys fetched earlier are used"

    return keys


def _fetch(url, cache_dir, login):
    with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT) as response:  # noqa: S310 - https URL from pillar
        text = response.read(MAX_BYTES).decode("utf-8", "replace")
    found = [line.strip() for line in text.splitlines() if line.strip()]
    good = [line for line in found if not ccc_schema.check_pubkeys(line)]
    try:
        os.makedirs(cache_dir, mode=0o700, exist_ok=True)  # node-local, not a storage root
        ccc_safefs.replace_file(_cache_file(cache_dir, login), ("\n".join(good) + "\n").encode(), 0o644,
                                root=cache_dir)
    except OSError as exc:
        log.warning("cannot cache the GitHub keys of %s: %s", login, exc)
    return good


def _cached(cache_dir, login):
    try:
        with open(_cache_file(cache_dir, login), encoding="utf-8") as handle:
            return [line.strip() for line in handle if line.strip()]
    except FileNotFoundError:
        return None


def _cache_file(cache_dir, login):
    return os.path.join(cache_dir, f"{login}.keys")
