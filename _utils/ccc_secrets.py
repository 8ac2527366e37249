"""
The one way ccc-salt code reads a secret from pillar and keeps it out of what people see.

Secrets live under ``ccc:secrets`` (the site's ``site/secrets.sls``, rendered by ``#!yaml|gpg``,
see docs/secrets.md). Errors name the pillar key, never the value. A value that is still an
armored PGP message means the renderer could not decrypt it on this node; it is refused rather
than sent on as a password. ``mask`` removes secret values from any text (e.g. an error message of
``docker login`` that echoes its input) before it reaches a state comment, a log or a report.
"""

ROOT = ("ccc", "secrets")
CIPHERTEXT_MARK = "-----BEGIN PGP MESSAGE-----"
MASK = "***"


class MissingSecret(KeyError):
    """A secret's pillar key is not set (``str()`` is the plain message, not KeyError's repr)."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


class InvalidSecret(ValueError):
    """A secret's pillar value cannot be used: not decrypted, not a string, or empty."""


def key_name(*path):
    """The colon path of a secret in pillar, e.g. ``ccc:secrets:frp:token``."""
    return ":".join(ROOT + tuple(str(part) for part in path))


def lookup(pillar, *path):
    """
    The secret at ``ccc:secrets:<path...>`` of ``pillar`` (a non-empty string), e.g.
    ``lookup(__pillar__, "registries", host, "password")``. Raises ``MissingSecret`` or
    ``InvalidSecret`` naming the key (never the value).
    """
    if not path:
        raise ValueError("lookup needs the path of a secret below ccc:secrets")
    node = pillar
    for depth, part in enumerate(ROOT + path, start=1):
        if not isinstance(node, dict) or part not in node:
            where = ":".join(str(p) for p in (ROOT + path)[:depth])
            raise MissingSecret(f"secret {key_name(*path)} is not in this node's pillar ({where} is missing; "
                                "see docs/secrets.md)")
        node = node[part]
    return check_value(key_name(*path), node)


def check_value(key, value):
    """``value`` if it is a usable secret for the pillar key ``key``; else ``InvalidSecret``."""
    if isinstance(value, bytes):
        raise InvalidSecret(f"secret {key} is binary data, not text")
    if not isinstance(value, str):
        raise InvalidSecret(f"secret {key} must be a string, not {type(value).__name__}")
    if is_ciphertext(value):
        raise InvalidSecret(f"secret {key} could not be decrypted on this node (gpg_keydir lacks the secret "
                            "key it was encrypted to, or gpg failed); see docs/secrets.md")
    if not value:
        raise InvalidSecret(f"secret {key} is empty")
    return value


def is_ciphertext(value):
    """True when ``value`` still holds an armored PGP message (the renderer left it encrypted)."""
    if isinstance(value, bytes):
        return CIPHERTEXT_MARK.encode() in value
    return isinstance(value, str) and CIPHERTEXT_MARK in value


def values(pillar):
    """Every non-empty string under ``ccc:secrets`` of ``pillar``, longest first (for ``mask``)."""
    ccc = pillar.get("ccc") if isinstance(pillar, dict) else None
    found = set()
    _collect(ccc.get("secrets") if isinstance(ccc, dict) else None, found)
    return sorted(found, key=lambda value: (-len(value), value))


def _collect(node, found):
    if isinstance(node, dict):
        for item in node.values():
            _collect(item, found)
    elif isinstance(node, list):
        for item in node:
            _collect(item, found)
    elif isinstance(node, str) and node:
        found.add(node)


def mask(text, secrets):
    """``text`` with every occurrence of every value in ``secrets`` replaced by ``***``
    (longest first, so a secret that contains another is masked whole)."""
    if not text:
        return text
    for secret in sorted({s for s in secrets if isinstance(s, str) and s}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
