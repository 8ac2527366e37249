"""
State ``ccc_docker_registry``: root's Docker login to a registry, from the secrets pillar.

.. code-block:: yaml

    ccc-cluster-docker-registry-registry.example.org:
      ccc_docker_registry.logged_in:
        - name: registry.example.org

The SLS names only the registry; the credentials are read here from
``ccc:secrets:registries:<host>:{username,password}`` and never reach SLS text, ``changes``,
comments or logs (errors pass through ``ccc_secrets.mask``). New or changed credentials are
checked with the registry first (``ccc_docker_host.registry_login``, through this node's engine) and
written only when the registry accepts them, as ``docker login`` writes them
(``/root/.docker/config.json``, 0600). Unchanged credentials are not checked again, so a registry
that is down does not fail every run.
"""

import os

from salt.exceptions import CommandExecutionError

import ccc_docker_auth
import ccc_pillar
import ccc_safefs
import _ccc_state_ret as ccc_state_ret
import ccc_secrets

__virtualname__ = "ccc_docker_registry"
CONFIG = "/root/.docker/config.json"


def __virtual__():
    return __virtualname__


def _write(path, config):
    ccc_safefs.replace_file(path, ccc_docker_auth.render(config).encode(), 0o600, root="/")


def _verify(host, username, password):
    """``None`` when the registry accepts the login, else why not (secrets masked by the caller)."""
    try:
        __salt__["ccc_docker_host.registry_login"](host, username, password)
    except CommandExecutionError as exc:
        return str(exc)
    return None


def logged_in(name, config=CONFIG):
    """Root is logged in to registry ``name`` with the credentials of the secrets pillar."""
    pillar = {"ccc": ccc_pillar.pillar_ccc(__pillar__)}
    secrets = ccc_secrets.values(pillar)
    try:
        username = ccc_secrets.lookup(pillar, "registries", name, "username")
        password = ccc_secrets.lookup(pillar, "registries", name, "password")
        current = ccc_docker_auth.parse(ccc_safefs.read_text(config))
    except (KeyError, ValueError) as exc:
        return ccc_state_ret.result(name, False, {}, ccc_secrets.mask(str(exc), secrets))
    if ccc_docker_auth.logged_in(current, name, username, password):
        return ccc_state_ret.result(name, True, {}, f"logged in to {name}")
    changes = {"login": f"{name} ({config})"}
    if __opts__["test"]:
        return ccc_state_ret.result(name, None, changes, f"would log in to {name}")
    problem = _verify(name, username, password)
    if problem:
        return ccc_state_ret.result(name, False, {}, f"login to {name} refused, nothing written: "
                                        f"{ccc_secrets.mask(problem, secrets + [username, password])}")
    _write(config, ccc_docker_auth.with_login(current, name, username, password))
    return ccc_state_ret.result(name, True, changes, f"logged in to {name}")


def logins_absent(name, hosts, config=CONFIG):
    """Remove root's logins to ``hosts`` (other registries' logins and settings are kept)."""
    try:
        current = ccc_docker_auth.parse(ccc_safefs.read_text(config))
    except ValueError as exc:
        return ccc_state_ret.result(name, False, {}, str(exc))
    remaining, removed = ccc_docker_auth.without_logins(current, hosts or [])
    if not removed:
        return ccc_state_ret.result(name, True, {}, "no registry logins to remove")
    changes = {"logged out": removed}
    if __opts__["test"]:
        return ccc_state_ret.result(name, None, changes, f"would log out of {', '.join(removed)}")
    if os.path.exists(config):
        _write(config, remaining)
    return ccc_state_ret.result(name, True, changes, f"logged out of {', '.join(removed)}")
