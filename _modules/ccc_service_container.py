"""
Execution module ``ccc_service_container``: what the role-container state
(``_states/ccc_service_container.py``) asks of this node: the engine's view of a container or an
image, the acts on them (pull, create, start, remove), the root-only secret env file, and the
container's Docker API proxy (``_utils/ccc_docker_api_host.py``). Containers are described by
the plain specs of ``_utils/ccc_service_containers.py``; the state compares and reports. Returns
data or raises ``CommandExecutionError`` (an engine that does not answer or refuses: one line).
"""

import os

from salt.exceptions import CommandExecutionError

import ccc_docker_api_host as api_host
import ccc_engine
import ccc_pillar
import ccc_safefs
import ccc_service_containers as svc

__virtualname__ = "ccc_service_container"


def __virtual__():
    if ccc_engine.docker is None:
        return False, "ccc_service_container needs the Docker SDK for Python (docker)"
    return __virtualname__


def _node():
    return ccc_pillar.node_settings(ccc_pillar.pillar_ccc(__pillar__), __grains__["id"])


def _engine():
    """``(client, url)``: the run's client of this node's engine (one per process, ``__context__``)."""
    node = _node()
    return ccc_engine.context_clients(__context__, node)(), node["docker_url"]


def inspect(name):
    """
    ``docker inspect`` of container ``name``, ``None`` when there is none.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_service_container.inspect frp-lab-client-service
    """
    client, url = _engine()
    with ccc_engine.answering(url, CommandExecutionError):
        return ccc_engine.inspect(client, name)


def image(name):
    """
    ``{"id", "config"}`` of image ``name`` on this node (its id and its ``Config``: entrypoint,
    command, env, labels, exposed ports), ``None`` when the engine does not have it.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_service_container.image lukacu/frpc:latest
    """
    client, url = _engine()
    with ccc_engine.answering(url, CommandExecutionError):
        try:
            found = client.api.inspect_image(name)
        except ccc_engine.docker.errors.ImageNotFound:
            return None
    return {"id": found["Id"], "config": found.get("Config") or {}}


def pull(name):
    """
    Pull image ``name``; returns its ``image`` facts.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_service_container.pull lukacu/frpc:latest
    """
    client, url = _engine()
    with ccc_engine.answering(url, CommandExecutionError):
        client.api.pull(name)
    found = image(name)
    if found is None:
        raise CommandExecutionError(f"image {name} is not on this node after its pull")
    return found


def create(want):
    """
    Create and start the container ``want`` describes (``ccc_service_containers.wanted``): its
    first network at create, the others connected before it starts. Returns its id.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_service_container.create '{"name": "box", "image": "busybox", ...}'
    """
    client, url = _engine()
    with ccc_engine.answering(url, CommandExecutionError):
        created = client.api.create_container(**svc.create_kwargs(want))
        for network in svc.later_networks(want):
            client.api.connect_container_to_network(created["Id"], network["name"], aliases=network["aliases"] or None)
        client.api.start(created["Id"])
    return created["Id"]


def start(name):
    """
    Start the stopped container ``name`` (a name or an id).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_service_container.start frp-lab-client-service
    """
    client, url = _engine()
    with ccc_engine.answering(url, CommandExecutionError):
        client.api.start(name)
    return True


def remove(name):
    """
    Remove container ``name`` (a name or an id), running or not.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_service_container.remove frp-lab-client-service
    """
    client, url = _engine()
    with ccc_engine.answering(url, CommandExecutionError):
        client.api.remove_container(name, force=True)
    return True


def of_role(role):
    """
    ``[[name, id], ...]`` of every container carrying role ``role``'s label, by name.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_service_container.of_role frp_client
    """
    client, url = _engine()
    with ccc_engine.answering(url, CommandExecutionError):
        listed = client.api.containers(all=True, filters={"label": f"{svc.ROLE_LABEL}={role}"})
    return sorted([item["Names"][0].lstrip("/"), item["Id"]] for item in listed if item["Names"])


def write_env_file(name, values):
    """
    Write container ``name``'s secret env file from ``values`` (``{VARIABLE: value}``): a
    root-only folder (0700) and file (0600), replaced atomically. Returns its path.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_service_container.write_env_file frp-lab-client-service '{"FRPC_AUTH_TOKEN": "..."}'
    """
    path = svc.env_file_path(name)
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    fd = ccc_safefs.open_root(directory)
    try:
        ccc_safefs.write_file_at(fd, os.path.basename(path), svc.env_file_text(values).encode(), svc.ENV_MODE)
    finally:
        os.close(fd)
    return path


def remove_env_file(name):
    """
    Remove container ``name``'s secret env file; ``True`` when there was one.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_service_container.remove_env_file frp-lab-client-service
    """
    path = svc.env_file_path(name)
    if not os.path.lexists(path):
        return False
    os.unlink(path)
    return True


def _proxy_failed(work):
    try:
        return work()
    except api_host.ProxyFailed as exc:
        raise CommandExecutionError(str(exc)) from exc


def proxy_pending(name, profile):
    """
    What ``proxy_ensure`` would change for container ``name``'s Docker API proxy with allowlist
    ``profile``: a list of phrases, empty when it is as wanted.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_service_container.proxy_pending portainer-agent portainer-agent
    """
    return _proxy_failed(lambda: api_host.pending(name, profile, _node()["docker_url"], __salt__["cmd.run_all"]))


def proxy_ensure(name, profile):
    """
    Container ``name``'s Docker API proxy in place (units, allowlist ``profile``, socket enabled
    and started); returns ``proxy_pending``'s phrases. ``CommandExecutionError`` when systemd
    does not start it or its socket is not there (the container must not be made then).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_service_container.proxy_ensure portainer-agent portainer-agent
    """
    return _proxy_failed(lambda: api_host.ensure(name, profile, _node()["docker_url"], __salt__["cmd.run_all"]))


def proxy_stale(name, pid):
    """
    Whether running container ``name`` (process ``pid``) holds an older proxy socket than the one
    there now (its bind is dead until the container is made again).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_service_container.proxy_stale portainer-agent 4242
    """
    return api_host.stale(name, pid)


def proxy_present(name):
    """
    Whether this node has a Docker API proxy (configuration or socket) for container ``name``.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_service_container.proxy_present portainer-agent
    """
    return api_host.present(name)


def proxy_remove(name):
    """
    Stop and disable container ``name``'s Docker API proxy and remove its configuration.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_service_container.proxy_remove portainer-agent
    """
    api_host.remove(name, __salt__["cmd.run_all"])
    return True
