"""
State ``ccc_service_container``: one container a cluster role runs on a node (frpc, patroller,
portainer agent, exporters), from the plain spec of ``_utils/ccc_service_containers.py``.

.. code-block:: yaml

    ccc-cluster-frp_client-container-lab-unrestricted:
      ccc_service_container.running:
        - name: frp-lab-client-service
        - spec: {"image": "lukacu/frpc:latest", "role": "frp_client", "secret_env": {...}, ...}

    ccc-cluster-frp_client-clean-frp-lab-client-service:
      ccc_service_container.absent:
        - name: frp-lab-client-service
        - role: frp_client

    ccc-cluster-frp_client-prune:
      ccc_service_container.pruned:
        - name: frp_client containers no longer in pillar
        - role: frp_client
        - keep: [frp-lab-client-service]

``running`` pulls a missing image, writes the secret env file, and creates the container, or
recreates it when anything differs (starts it when it is only stopped). ``absent`` removes it and
its secret env file; ``pruned`` removes the role's containers (by label) that are not kept.
A container of that name without the role's label is foreign: both fail
and leave it alone. Secret values are read here from pillar by key and masked in every message.

A spec with ``docker_api: <profile>`` gets its own filtering proxy first (``ccc_docker_api``:
haproxy under systemd, socket ``/run/ccc-docker-api/<name>.sock`` bound at
``/var/run/docker.sock``); the container is made only once that socket is there. ``absent`` and
``pruned`` remove the proxy with the container.

The engine, the env file and the proxy are acted on through the execution module
``ccc_service_container`` (``__salt__``); this state compares, owns test mode and reports.
"""

import os

from salt.exceptions import CommandExecutionError

import ccc_docker_api
import ccc_engine
import ccc_frp
import ccc_pillar
import ccc_safefs
import ccc_secrets
import ccc_service_containers as svc
import _ccc_state_ret as ccc_state_ret

__virtualname__ = "ccc_service_container"
MODULE = "ccc_service_container"


def __virtual__():
    if f"{MODULE}.inspect" not in __salt__:
        return False, "ccc_service_container needs its execution module (the Docker SDK for Python, docker)"
    return __virtualname__


def _ccc():
    return ccc_pillar.pillar_ccc(__pillar__)


def _masked(text):
    return ccc_secrets.mask(text, ccc_secrets.values({"ccc": _ccc()}))


def _call(function, *args):
    return __salt__[f"{MODULE}.{function}"](*args)


def _guarded(name, work):
    """Run ``work()``: an engine that is down or refuses (the execution module's
    ``CommandExecutionError``), a bad spec or an unusable secret is a clean failure with a
    masked comment."""
    try:
        return work()
    except (svc.BadSpec, ccc_secrets.MissingSecret, ccc_secrets.InvalidSecret, ccc_docker_api.BadProfile,
            CommandExecutionError) as exc:
        return ccc_state_ret.result(name, False, {}, _masked(str(exc)))


def _foreign(name, attrs, spec):
    return ccc_state_ret.result(name, False, {}, f"a container named {name} exists that ccc-salt did not create "
                                f"(no {svc.ROLE_LABEL}={spec['role']} label); left alone")


def _secrets(spec):
    pillar = {"ccc": _ccc()}
    return {key: ccc_secrets.lookup(pillar, *path) for key, path in spec["secret_env"].items()}


def _missing_credentials(spec):
    """The FRP basic-auth credentials ``spec``'s labels ask for that the secrets lack: such a
    container is never published (frp would render the missing value as fixed text)."""
    pillar, missing = {"ccc": _ccc()}, []
    for auth in ccc_frp.credentials_used(spec["labels"]):
        try:
            for part in ("user", "password"):
                ccc_secrets.lookup(pillar, *ccc_frp.AUTH[auth], part)
        except ccc_secrets.MissingSecret:
            missing.append("ccc:secrets:" + ":".join(ccc_frp.AUTH[auth]) + ":{user,password}")
    return missing


def _env_file_state(spec, values):
    """``(whether the env file of ``spec`` is written, changed secret names)``."""
    if not svc.uses_env_file(spec):
        return False, []
    path = svc.env_file_path(spec["name"])
    text, old = svc.env_file_text(values), ccc_safefs.read_text(path)
    mode_ok = old is not None and (os.stat(path).st_mode & 0o777) == svc.ENV_MODE
    if old == text and mode_ok:
        return False, []
    return True, [f"secret {key} changed" for key in svc.changed_keys(svc.env_file_values(old), values)]


def running(name, spec):
    """The role container ``name`` exists and runs exactly as ``spec`` says."""
    return _guarded(name, lambda: _running(name, svc.normalize({**spec, "name": spec.get("name") or name})))


def _running(name, spec):
    test = bool(__opts__["test"])
    missing = _missing_credentials(spec)
    if missing:
        return ccc_state_ret.result(name, False, {}, f"{name} is not created: its FRP basic auth needs "
                                    f"{', '.join(missing)} in the GPG pillar "
                                    "(without them it would be published unprotected)")
    values = _secrets(spec)
    attrs = _call("inspect", name)
    if attrs and not svc.is_ours(attrs, spec):
        return _foreign(name, attrs, spec)
    image = _call("image", spec["image"])
    if image is None:
        if test:
            verb = "recreated" if attrs else "created"
            return ccc_state_ret.result(name, None, {"image": f"{spec['image']} would be pulled", verb: name},
                                        f"{name} would be {verb} once image {spec['image']} is pulled")
        image = _call("pull", spec["image"])
    inline = values if spec["secret_env_inline"] else {}
    want = svc.wanted(spec, image["config"], inline)
    write_env, secret_changes = _env_file_state(spec, values)
    proxy = _proxy(spec, test)
    found = svc.differences(attrs, want, image["id"], secret_keys=set(inline)) + secret_changes if attrs else []
    if attrs and spec["docker_api"] and ccc_engine.running(attrs) \
            and _call("proxy_stale", name, (attrs.get("State") or {}).get("Pid")):
        found.append("docker api socket replaced since the container started")
    if attrs and not found and not ccc_engine.running(attrs):
        return _start(name, attrs, test, proxy)
    if attrs and not found:
        if write_env and not test:
            _call("write_env_file", name, values)  # same values, the mode is repaired
        if proxy:
            return ccc_state_ret.result(name, None if test else True, {"docker api proxy": proxy},
                                        f"{name} runs as configured; its Docker API proxy "
                                        f"{'would be' if test else 'was'} set up")
        return ccc_state_ret.result(name, True, {}, f"{name} runs as configured")
    verb = "recreated" if attrs else "created"
    changes = {verb: name, **({"differences": found} if found else {}),
               **({"docker api proxy": proxy} if proxy else {})}
    if test:
        return ccc_state_ret.result(name, None, changes, _masked(f"{name} would be {verb}"))
    if write_env:
        _call("write_env_file", name, values)
    if attrs:
        _call("remove", attrs["Id"])
    _call("create", want)
    return ccc_state_ret.result(name, True, changes, _masked(f"{name} {verb}"))


def _proxy(spec, test):
    """The container's Docker API proxy made ready (``docker_api``), or in test mode what would
    change; a list of phrases, empty when nothing changes or the spec asks for none."""
    if spec["docker_api"] is None:
        return []
    return _call("proxy_pending" if test else "proxy_ensure", spec["name"], spec["docker_api"])


def _start(name, attrs, test, proxy):
    changes = {"started": name, **({"docker api proxy": proxy} if proxy else {})}
    if test:
        return ccc_state_ret.result(name, None, changes, f"{name} is stopped and would be started")
    _call("start", attrs["Id"])
    return ccc_state_ret.result(name, True, changes, f"{name} was stopped and is started")


def _remove_proxy(name, test):
    """The container's proxy, when the node has one, is removed (``{}`` or the change)."""
    if not _call("proxy_present", name):
        return {}
    if not test:
        _call("proxy_remove", name)
    return {"docker api proxy removed": ccc_docker_api.socket_unit(name)}


def absent(name, role, former_roles=None):
    """The role container ``name`` and its secret env file are gone (a foreign one is left alone)."""
    spec = {"role": role, "former_roles": list(former_roles or [])}
    return _guarded(name, lambda: _absent(name, spec))


def _absent(name, spec):
    test = bool(__opts__["test"])
    attrs = _call("inspect", name)
    if attrs and not svc.is_ours(attrs, spec):
        return _foreign(name, attrs, spec)
    env_file = svc.env_file_path(name)
    has_file = os.path.lexists(env_file)
    if not attrs and not has_file and not _call("proxy_present", name):
        return ccc_state_ret.result(name, True, {}, f"{name} is not there")
    changes = {**({"removed": name} if attrs else {}), **({"secret env file removed": env_file} if has_file else {})}
    if test:
        changes.update(_remove_proxy(name, test))
        return ccc_state_ret.result(name, None, changes, f"{name} would be removed")
    if attrs:
        _call("remove", attrs["Id"])
    if has_file:
        _call("remove_env_file", name)
    changes.update(_remove_proxy(name, test))
    return ccc_state_ret.result(name, True, changes, f"{name} removed")


def pruned(name, role, keep=None):
    """Every container of ``role`` (by its label) whose name is not in ``keep`` is removed with
    its secret env file: a role's list of containers shrank, or the role is cleaned (``keep`` empty)."""
    return _guarded(name, lambda: _pruned(name, role, set(keep or [])))


def _pruned(name, role, keep):
    test = bool(__opts__["test"])
    extra = [(container, container_id) for container, container_id in _call("of_role", role) if container not in keep]
    if not extra:
        return ccc_state_ret.result(name, True, {}, f"no other {role} containers")
    removed = [container for container, _ in extra]
    if test:
        return ccc_state_ret.result(name, None, {"removed": removed}, f"would remove {', '.join(removed)}")
    for container, container_id in extra:
        _call("remove", container_id)
        _call("remove_env_file", container)
        _remove_proxy(container, test)
    return ccc_state_ret.result(name, True, {"removed": removed}, f"removed {', '.join(removed)}")
