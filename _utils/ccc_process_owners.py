"""
Which container, and so which user, runs a host process: from ``/proc/<pid>/cgroup`` to the
Docker container id (cgroup v1 and v2), and from the container to its stack and user through
the ``ccc.stack`` and ``ccc-user.*`` labels the containers role puts on every container. Used by
the GPU exporter and ``salt-call ccc_gpu.processes`` to attribute GPU memory.
"""

import os
import re

import ccc_rules

# Written on every container by the containers role (``ccc_resolver``): the user's identity.
EMAIL_LABEL = "ccc-user.email"
NAME_LABEL = "ccc-user.name"

# A cgroup path component naming a container: cgroupfs driver ``/docker/<id>``, systemd driver
# ``docker-<id>.scope`` (cgroup v1 and v2), containerd/CRI ``cri-containerd-<id>.scope``, CRI-O
# ``crio-<id>.scope``, podman ``libpod-<id>.scope``, kubepods cgroupfs ``.../pod<uid>/<id>``.
_CONTAINER_COMPONENT = re.compile(r"^(?:docker-|cri-containerd-|crio-|libpod-)?([0-9a-f]{64})(?:\.scope)?$")


def container_ids_of_pid(pid, proc_root="/proc"):
    """
    Every container id in ``<proc_root>/<pid>/cgroup``, outermost first (a process in a nested
    container lists the host container before the inner one). ``[]`` when the process is in no
    container, has vanished, or cannot be read.
    """
    try:
        pid = int(pid)
    except (TypeError, ValueError):
        return []
    if pid <= 0:
        return []
    try:
        with open(os.path.join(proc_root, str(pid), "cgroup"), encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:  # vanished (ENOENT, ESRCH), hidepid (EACCES), ...
        return []
    ids = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for component in parts[2].split("/"):
            match = _CONTAINER_COMPONENT.match(component)
            if match and match.group(1) not in ids:
                ids.append(match.group(1))
    return ids


def container_of_pid(pid, proc_root="/proc"):
    """
    The full id of the Docker container that runs host process ``pid``, or ``None``.

    Reads ``<proc_root>/<pid>/cgroup``; understands cgroup v1 lines
    (``4:memory:/docker/<id>``), cgroup v2 (``0::/system.slice/docker-<id>.scope``,
    ``0::/docker/<id>``) and containerd/CRI-O/podman scopes. A vanished PID gives ``None``.
    """
    ids = container_ids_of_pid(pid, proc_root)
    return ids[0] if ids else None


def docker_client(url, timeout=10):
    """A Docker SDK client for ``url`` (the caller closes it)."""
    import docker  # pylint: disable=import-outside-toplevel

    return docker.DockerClient(base_url=url, timeout=timeout)


def docker_containers(client):
    """
    Running containers of a Docker daemon, from one API call: ``{full id: {"name", "labels"}}``.
    """
    containers = {}
    for entry in client.api.containers() or []:
        names = entry.get("Names") or []
        name = names[0].lstrip("/") if names else entry["Id"][:12]
        containers[entry["Id"]] = {"name": name, "labels": dict(entry.get("Labels") or {})}
    return containers


def attribute(processes, containers_by_id, proc_root="/proc"):
    """
    Add to each GPU process its container and user: new dicts with the process keys plus
    ``container_id``, ``container`` (name), ``stack``, ``user_email`` and ``user_name``.

    ``containers_by_id`` maps full container id -> ``{"name": ..., "labels": {...}}``
    (``docker_containers``). Stack and user come from the ``ccc.stack``, ``ccc-user.email`` and
    ``ccc-user.name`` labels. A process in no container has all of them ``None``; one in a
    container the map does not know (another daemon, gone meanwhile) has only ``container_id``.
    """
    attributed = []
    for process in processes:
        ids = container_ids_of_pid(process.get("pid"), proc_root)
        known = [cid for cid in ids if cid in containers_by_id]
        container_id = known[0] if known else (ids[0] if ids else None)
        info = containers_by_id.get(container_id) or {}
        labels = info.get("labels") or {}
        attributed.append(dict(
            process,
            container_id=container_id,
            container=info.get("name"),
            stack=labels.get(ccc_rules.STACK_LABEL),
            user_email=labels.get(EMAIL_LABEL),
            user_name=labels.get(NAME_LABEL),
        ))
    return attributed
