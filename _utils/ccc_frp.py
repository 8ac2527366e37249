"""
The FRP label convention for the services cluster roles publish (``ccc-companions.md`` C.3), and
the one place that says which basic-auth credential a service uses.

frpc's image renders its config from the ``frp.*`` labels of containers on its network
(docker-gen), and frp >= 0.27 expands ``{{ .Envs.NAME }}`` in that config from frpc's own
environment. So a role service's auth labels carry placeholders, never a password, and the
frp_client role hands the credentials to each frpc container as secret env (``frpc_secret_env``).
Pure: no Salt, no Docker.
"""

# credential name -> its place below ccc:secrets (a mapping with ``user`` and ``password``)
AUTH = {
    "metrics": ("basic_auth", "metrics"),
    "monitor": ("basic_auth", "monitor"),
    "patroller_webui": ("basic_auth", "patroller_webui"),
}
TOKEN = ("frp", "token")
TOKEN_ENV = "FRPC_AUTH_TOKEN"
HEALTH = {True: "true", False: "false"}


def env_names(auth):
    """The frpc environment variables that carry credential ``auth``: ``{"user": .., "password": ..}``."""
    if auth not in AUTH:
        raise KeyError(f"unknown FRP basic-auth credential {auth!r} (known: {', '.join(sorted(AUTH))})")
    stem = f"FRP_CCC_{auth.upper()}"
    return {"user": f"{stem}_USER", "password": f"{stem}_PASSWORD"}


def placeholder(env):
    """What frpc replaces with the value of its environment variable ``env``."""
    return "{{ .Envs.%s }}" % env


def service_labels(port, subdomain, location=None, auth=None, health_check=False):
    """
    The labels that make frpc publish ``port`` of a role's container over HTTP at
    ``<subdomain>.<frps subdomain host>`` (``location``: only that path, so several containers share
    a subdomain), with basic auth from credential ``auth`` (a key of ``AUTH``) when given.
    """
    port = int(port)
    labels = {
        "frp.enabled": "true",
        f"frp.{port}": "http",
        f"frp.{port}.http.subdomain": str(subdomain),
        f"frp.{port}.health_check": HEALTH[bool(health_check)],
    }
    if location:
        labels[f"frp.{port}.http.locations"] = str(location)
    if auth is not None:
        names = env_names(auth)
        labels[f"frp.{port}.http.username"] = placeholder(names["user"])
        labels[f"frp.{port}.http.password"] = placeholder(names["password"])
    return labels


def auth_secret_env(auth):
    """``secret_env`` entries (env name -> path below ccc:secrets) of credential ``auth``."""
    names = env_names(auth)
    return {names[part]: [*AUTH[auth], part] for part in ("user", "password")}


def frpc_secret_env(present):
    """
    The ``secret_env`` of an frpc container: the token, plus every credential of ``AUTH`` for
    which ``present(path)`` (a path below ccc:secrets) says both user and password are set.
    A credential that is not there is not offered; a role container whose labels ask for it is
    never created (``credentials_used``, checked by the ``ccc_service_container`` state), since frp
    would render the missing variable as a fixed text anyone could log in with.
    """
    env = {TOKEN_ENV: list(TOKEN)}
    for auth in sorted(AUTH):
        wanted = auth_secret_env(auth)
        if all(present(path) for path in wanted.values()):
            env.update(wanted)
    return env


def credentials_used(labels):
    """The ``AUTH`` credentials whose placeholders appear in ``labels`` (sorted)."""
    values = set(labels.values())
    return sorted(auth for auth in AUTH if any(placeholder(env) in values for env in env_names(auth).values()))


def has_template(value):
    """True when a user value contains ``{{`` or ``}}``: frpc would expand it from its own environment."""
    return isinstance(value, str) and ("{{" in value or "}}" in value)
