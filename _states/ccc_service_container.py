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
"""

import os

import ccc_docker_api
import ccc_docker_api_host as api_host
import ccc_engine
import ccc_frp
import ccc_pillar
import ccc_safefs
import ccc_secrets
import ccc_service_containers as svc
import ccc_state_ret

__virtualname__ = "ccc_service_container"
ENV_MODE = 0o600


def __virtual__():
    if ccc_engine.docker is None:
        return False, "ccc_service_container needs the Docker SDK for Python (docker)"
    return __virtualname__


def _ccc():
    return ccc_pillar.pillar_ccc(__pillar__)


def _masked(text):
    return ccc_secrets.mask(text, ccc_secrets.values({"ccc": _ccc()}))


def _guarded(name, work):
    """Run ``work(client)`` against this node's engine; a Docker engine that is down or refuses,
    a bad spec or an unusable secret is a clean failure with a masked comment."""
    node = ccc_pillar.node_settings(_ccc(), __grains__["id"])
    client = ccc_engine.client(node)
    try:
        return work(client)
    except (svc.BadSpec, ccc_secrets.MissingSecret, ccc_secrets.InvalidSecret, ccc_docker_api.BadProfile,
            api_host.ProxyFailed) as exc:
        return ccc_state_ret.result(name, False, {}, _masked(str(exc)))
    except Exception as exc:
        problem = ccc_engine.engine_problem(exc, node["docker_url"])
        if problem is None:
            raise
        return ccc_state_ret.result(name, False, {}, _masked(problem))
    finally:
        client.close()


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


def _image_config(client, image):
    try:
        found = client.api.inspect_image(image)
    except ccc_engine.docker.errors.ImageNotFound:
        return None, None
    return found["Id"], found.get("Config") or {}


def _write_env_file(path, text):
    """The secret env file: root-only folder (0700) and file (0600), replaced atomically."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    fd = ccc_safefs.open_root(directory)
    try:
        ccc_safefs.write_file_at(fd, os.path.basename(path), text.encode(), ENV_MODE)
    finally:
        os.close(fd)


def _env_file_state(spec, values):
    """``(text to write or None, changed secret names)`` for the env file of ``spec``."""
    if not svc.uses_env_file(spec):
        return None, []
    path = svc.env_file_path(spec["name"])
    text, old = svc.env_file_text(values), ccc_safefs.read_text(path)
    mode_ok = old is not None and (os.stat(path).st_mode & 0o777) == ENV_MODE
    if old == text and mode_ok:
        return None, []
    return text, [f"secret {key} changed" for key in svc.changed_keys(svc.env_file_values(old), values)]


def _create(client, want):
    created = client.api.create_container(**svc.create_kwargs(want))
    for network in svc.later_networks(want):
        client.api.connect_container_to_network(created["Id"], network["name"], aliases=network["aliases"] or None)
    client.api.start(created["Id"])


def running(name, spec):
    """The role container ``name`` exists and runs exactly as ``spec`` says."""
    return _guarded(name, lambda client: _running(client, name, svc.normalize({**spec, "name": spec.get("name") or name})))


def _running(client, name, spec):
    test = bool(__opts__["test"])
    missing = _missing_credentials(spec)
    if missing:
        return ccc_state_ret.result(name, False, {}, f"{name} is not created: its FRP basic auth needs "
                                    f"{', '.join(missing)} in the GPG pillar (without them it would be published unprotected)")
    values = _secrets(spec)
    attrs = ccc_engine.inspect(client, name)
    if attrs and not svc.is_ours(attrs, spec):
        return _foreign(name, attrs, spec)
    image_id, image_config = _image_config(client, spec["image"])
    if image_id is None:
        if test:
            verb = "recreated" if attrs else "created"
            return ccc_state_ret.result(name, None, {"image": f"{spec['image']} would be pulled", verb: name},
                                        f"{name} would be {verb} once image {spec['image']} is pulled")
        client.api.pull(spec["image"])
        image_id, image_config = _image_config(client, spec["image"])
    inline = values if spec["secret_env_inline"] else {}
    want = svc.wanted(spec, image_config, inline)
    env_text, secret_changes = _env_file_state(spec, values)
    proxy = _proxy(spec, test)
    found = svc.differences(attrs, want, image_id, secret_keys=set(inline)) + secret_changes if attrs else []
    if attrs and spec["docker_api"] and ccc_engine.running(attrs) \
            and api_host.stale(name, (attrs.get("State") or {}).get("Pid")):
        found.append("docker api socket replaced since the container started")
    if attrs and not found and not ccc_engine.running(attrs):
        return _start(client, name, attrs, test, proxy)
    if attrs and not found:
        if env_text is not None and not test:
            _write_env_file(svc.env_file_path(name), env_text)  # same values, the mode is repaired
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
    if env_text is not None:
        _write_env_file(svc.env_file_path(name), env_text)
    if attrs:
        client.api.remove_container(attrs["Id"], force=True)
    _create(client, want)
    return ccc_state_ret.result(name, True, changes, _masked(f"{name} {verb}"))


def _proxy(spec, test):
    """The container's Docker API proxy made ready (``docker_api``), or in test mode what would
    change; a list of phrases, empty when nothing changes or the spec asks for none."""
    if spec["docker_api"] is None:
        return []
    url = ccc_pillar.node_settings(_ccc(), __grains__["id"])["docker_url"]
    if test:
        return api_host.pending(spec["name"], spec["docker_api"], url, __salt__["cmd.run_all"])
    return api_host.ensure(spec["name"], spec["docker_api"], url, __salt__["cmd.run_all"])


def _start(client, name, attrs, test, proxy):
    changes = {"started": name, **({"docker api proxy": proxy} if proxy else {})}
    if test:
        return ccc_state_ret.result(name, None, changes, f"{name} is stopped and would be started")
    client.api.start(attrs["Id"])
    return ccc_state_ret.result(name, True, changes, f"{name} was stopped and is started")


def _remove_proxy(name, test):
    """The container's proxy, when the node has one, is removed (``{}`` or the change)."""
    if not api_host.present(name):
        return {}
    if not test:
        api_host.remove(name, __salt__["cmd.run_all"])
    return {"docker api proxy removed": ccc_docker_api.socket_unit(name)}


def absent(name, role, former_roles=None):
    """The role container ``name`` and its secret env file are gone (a foreign one is left alone)."""
    spec = {"role": role, "former_roles": list(former_roles or [])}
    return _guarded(name, lambda client: _absent(client, name, spec))


def _absent(client, name, spec):
    test = bool(__opts__["test"])
    attrs = ccc_engine.inspect(client, name)
    if attrs and not svc.is_ours(attrs, spec):
        return _foreign(name, attrs, spec)
    env_file = svc.env_file_path(name)
    has_file = os.path.lexists(env_file)
    if not attrs and not has_file and not api_host.present(name):
        return ccc_state_ret.result(name, True, {}, f"{name} is not there")
    changes = {**({"removed": name} if attrs else {}), **({"secret env file removed": env_file} if has_file else {})}
    if test:
        changes.update(_remove_proxy(name, test))
        return ccc_state_ret.result(name, None, changes, f"{name} would be removed")
    if attrs:
        client.api.remove_container(attrs["Id"], force=True)
    if has_file:
        os.unlink(env_file)
    changes.update(_remove_proxy(name, test))
    return ccc_state_ret.result(name, True, changes, f"{name} removed")


def pruned(name, role, keep=None):
    """Every container of ``role`` (by its label) whose name is not in ``keep`` is removed with
    its secret env file: a role's list of containers shrank, or the role is cleaned (``keep`` empty)."""
    return _guarded(name, lambda client: _pruned(client, name, role, set(keep or [])))


def _pruned(client, name, role, keep):
    test = bool(__opts__["test"])
    listed = client.api.containers(all=True, filters={"label": f"{svc.ROLE_LABEL}={role}"})
    extra = sorted((item["Names"][0].lstrip("/"), item["Id"]) for item in listed
                   if item["Names"] and item["Names"][0].lstrip("/") not in keep)
    if not extra:
        return ccc_state_ret.result(name, True, {}, f"no other {role} containers")
    removed = [container for container, _ in extra]
    if test:
        return ccc_state_ret.result(name, None, {"removed": removed}, f"would remove {', '.join(removed)}")
    for container, container_id in extra:
        client.api.remove_container(container_id, force=True)
        if os.path.lexists(svc.env_file_path(container)):
            os.unlink(svc.env_file_path(container))
        _remove_proxy(container, test)
    return ccc_state_ret.result(name, True, {"removed": removed}, f"removed {', '.join(removed)}")
