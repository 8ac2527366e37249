"""
A user's public keys from GitHub (``USER_PUBKEY_FROM_GITHUB``), with a node-local cache.

GitHub may be unreachable: the last fetched copy is used then, and the user is told. The cache
is ``<ccc:node:state_dir>/github-keys``, node-local: nothing is ever written below a storage
root that is not mounted. Only lines that pass the settings schema's key check are kept.

A login is fetched at most once per run, and again only once its copy is older than
``ccc:cluster:github_keys_max_age`` (the original fetched at every deploy: a reconcile of 50
containers made 50 sequential requests to GitHub, seconds of every run, and a lab's nodes every
few minutes run into GitHub's rate limit). The age is that of root's own copy (its mtime, on the
node's root-only state dir), never a time a user can set. A new login has no copy: it is fetched
at once.
"""

import logging
import os
import time
import urllib.error
import urllib.request

import ccc_pillar
import ccc_safefs
import ccc_schema

log = logging.getLogger(__name__)

FETCH_TIMEOUT = 5
MAX_BYTES = 65536


class GitHubKeys:
    """
    ``keys(login) -> (keys, error)`` for one run, the resolver's ``NodeFacts.github_keys``:
    fetched from ``url_template`` (``{login}`` replaced) when ``fetch`` and the node's copy is
    missing or ``max_age`` seconds old (0: every run), else (and when the fetch fails) the copy.
    ``error`` is the user's to read; ``problem`` is the admin's (a bad ``github_keys_max_age``).
    """

    def __init__(self, url_template, fetch, cache_dir, max_age=0.0, problem=None):
        self.url_template, self.fetch, self.cache_dir = url_template, fetch, cache_dir
        self.max_age, self.problem = max_age, problem
        self._answers = {}  # login -> (keys, error): one fetch per login and run

    def __call__(self, login):
        if login not in self._answers:
            self._answers[login] = self._keys(login)
        found, error = self._answers[login]
        return list(found), error

    def _keys(self, login):
        error = None
        if self.fetch and self._stale(login):
            try:
                return _fetch(self.url_template.replace("{login}", login), self.cache_dir, login), None
            except (urllib.error.URLError, OSError, ValueError) as exc:
                error = f"could not fetch the keys of GitHub user {login!r} ({exc})"
        cached = _cached(self.cache_dir, login)
        if cached is None:
            return [], error
        return cached, error and error + "; the keys fetched earlier are used"

    def _stale(self, login):
        """No copy, or one fetched ``max_age`` ago or more (or dated ahead: the clock went back)."""
        try:
            fetched = os.stat(_cache_file(self.cache_dir, login)).st_mtime
        except OSError:
            return True
        age = time.time() - fetched
        return not 0 <= age < self.max_age


def github_keys_for(cluster, fetch, cache_dir):
    """The run's ``GitHubKeys`` under ``ccc:cluster`` (``github_keys_url``, ``github_keys_max_age``)."""
    seconds, problem = ccc_pillar.cluster_seconds(cluster, ("github_keys_max_age",), zero_allowed=True)
    return GitHubKeys(cluster["github_keys_url"], fetch, cache_dir, seconds, problem)


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
