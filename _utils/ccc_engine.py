"""
The Docker engine side, one call at a time: a client for the node's engine, a spec turned into
``create_container`` arguments, an existing container turned back into a spec (for readable
diffs), and creating/removing containers together with the node's record of them
(``ccc_node_record``). Networks belong to ``ccc_docker_networks`` (the docker role).

Everything takes a ``docker.DockerClient`` and plain data, so tests drive it against a real
``dockerd`` without Salt. The Docker SDK is optional at import time: the execution module
reports its absence (``docker is None``).
"""

import contextlib
import threading

import ccc_covers
import ccc_node_record
import ccc_redact
import ccc_rules

try:
    import docker
    import docker.errors
    import docker.transport
    import docker.types
    import requests.exceptions
except ImportError:  # pragma: no cover - reported by the execution module's __virtual__
    docker = None

API_VERSION = "1.41"
STOP_TIMEOUT = 10
# A Docker engine that does not answer (stopped, restarting, socket gone).
ENGINE_ERRORS = (requests.exceptions.ConnectionError, requests.exceptions.Timeout) if docker else ()
ENGINE_DOWN = "the Docker engine of this node does not answer"


def client(node):
    """
    A Docker client for this node's engine (``ccc:node:docker_url``) that carries the node's
    state dir, where the record of the containers this role created lives: every managed-container
    check needs it. Creating one does not contact the engine. Not thread-safe: one per thread.
    """
    made = docker.DockerClient(base_url=node["docker_url"], version=API_VERSION, timeout=120)
    if str(node["docker_url"]).startswith("unix://"):
        # No proxy or .netrc reaches a local socket; requests would look both up in the
        # environment on every call (a tenth of a millisecond each, twice per container).
        made.api.trust_env = False
        made.api.mount(_SCHEME, _OneSocketPool(made.api.adapters[_SCHEME]))
    made.ccc_state_dir = node["state_dir"]
    return made


_SCHEME = "http+docker://"  # where the SDK mounts its adapter for a local socket
if docker is not None:

    class _OneSocketPool(docker.transport.UnixHTTPAdapter):
        """
        The SDK's adapter for a unix socket, with one connection pool for the socket. The SDK's
        own keys its pools by the whole request URL, so each container's URL opened a new
        connection to the engine (and closed one: it keeps 25 pools): 0.4 ms more per call, 50
        inspects of a no-op apply took 50-64 ms instead of 39-41 ms.
        """

        def __init__(self, shipped):
            """The same socket, timeout and pool size as the SDK's adapter ``shipped``."""
            super().__init__("http+unix://" + shipped.socket_path, timeout=shipped.timeout,
                             max_pool_size=shipped.max_pool_size)

        def get_connection(self, url, proxies=None):
            return super().get_connection(_SCHEME, proxies)


class Clients:
    """
    ``clients()`` -> the calling thread's client for one node (``client``): the SDK's clients
    share a connection pool that is not meant for several threads. ``close`` closes them all.
    """

    def __init__(self, node):
        self.node = node
        self._local = threading.local()
        self._made = []
        self._lock = threading.Lock()

    def __call__(self):
        made = getattr(self._local, "client", None)
        if made is None:
            made = self._local.client = client(self.node)
            with self._lock:
                self._made.append(made)
        return made

    def close(self):
        with self._lock:
            made, self._made = self._made, []
        for each in made:
            each.close()
        self._local = threading.local()


CONTEXT_KEY = "ccc_engine.clients"


def context_clients(context, node):
    """
    The run's ``Clients`` for ``node``, kept in Salt's ``__context__`` under one key for every
    module of the run (per engine URL and state dir), so one process holds one set of clients.
    """
    kept = context.setdefault(CONTEXT_KEY, {})
    key = (node["docker_url"], node["state_dir"])
    if key not in kept:
        kept[key] = Clients(node)
    return kept[key]


def inspect(client, name):
    """Inspect data of a container by name or id, ``None`` when there is none."""
    try:
        return client.api.inspect_container(name)
    except docker.errors.NotFound:
        return None


def listed(client):
    """Every container of the engine now, ``{name: list summary}``, in one list call: a run over
    many containers asks for a leftover of an interrupted recreate only when it is there, and
    schedules the containers that already run as wanted apart (``ccc_deploy``)."""
    return {name.lstrip("/"): summary for summary in client.api.containers(all=True)
            for name in summary.get("Names") or []}


def labels(attrs):
    return (attrs.get("Config") or {}).get("Labels") or {}


def running(attrs):
    return bool(attrs and (attrs.get("State") or {}).get("Running"))


def attached_networks(attrs):
    return set(((attrs.get("NetworkSettings") or {}).get("Networks") or {}).keys())


def create_kwargs(client, spec):
    """Translate a spec into ``APIClient.create_container`` arguments."""
    mounts = [
        docker.types.Mount(target=m["target"], source=m["source"], type="bind", read_only=m["read_only"],
                           propagation=m.get("propagation"))
        for m in spec["mounts"]
    ] + [  # ccc_covers: an empty read-only tmpfs over a root-only folder inside a bind
        docker.types.Mount(target=target, source=None, type="tmpfs", read_only=True,
                           tmpfs_size=ccc_covers.SIZE, tmpfs_mode=ccc_covers.MODE)
        for target in spec.get("covers") or []
    ]
    device_requests = []
    if spec["device_ids"]:
        device_requests.append(docker.types.DeviceRequest(
            driver="nvidia", device_ids=list(spec["device_ids"]), capabilities=[["gpu"]],
        ))
    host_config = client.api.create_host_config(
        mounts=mounts,
        shm_size=spec["shm_size"],
        restart_policy={"Name": spec["restart_policy"]},
        privileged=spec["privileged"],
        security_opt=spec["security_opt"] or None,
        device_requests=device_requests or None,
        runtime=spec["runtime"],
        network_mode=spec["networks"][0],
        cap_drop=spec.get("cap_drop") or None,
        pids_limit=spec.get("pids_limit"),
    )
    return {
        "image": spec["image"],
        "hostname": spec["hostname"],
        "environment": [f"{key}={value}" for key, value in spec["environment"].items()],
        "labels": spec["labels"],
        "ports": [int(port) for port in spec["exposed_ports"]],
        "host_config": host_config,
        "networking_config": client.api.create_networking_config(
            {spec["networks"][0]: client.api.create_endpoint_config()}
        ),
    }


def spec_of_container(attrs):
    """The comparable parts of an existing container, shaped like a spec (for readable diffs)."""
    config = attrs.get("Config") or {}
    host = attrs.get("HostConfig") or {}
    env = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
    requests = host.get("DeviceRequests") or []
    covers = [m.get("Target") for m in host.get("Mounts") or [] if m.get("Type") == "tmpfs"]
    return {
        "image": config.get("Image"),
        "hostname": config.get("Hostname"),
        "environment": env,
        "labels": config.get("Labels") or {},
        "mounts": [
            {"source": m.get("Source"), "target": m.get("Target"), "read_only": bool(m.get("ReadOnly")),
             **({"propagation": m["BindOptions"]["Propagation"]} if (m.get("BindOptions") or {}).get("Propagation") else {})}
            for m in host.get("Mounts") or [] if m.get("Type", "bind") == "bind"
        ],
        **({"covers": covers} if covers else {}),
        "networks": sorted(attached_networks(attrs)),
        "exposed_ports": sorted(int(p.split("/")[0]) for p in (config.get("ExposedPorts") or {})),
        "shm_size": host.get("ShmSize"),
        "restart_policy": (host.get("RestartPolicy") or {}).get("Name"),
        "privileged": bool(host.get("Privileged")),
        "security_opt": host.get("SecurityOpt") or [],
        "cap_drop": sorted(host.get("CapDrop") or []),
        "pids_limit": host.get("PidsLimit") or None,
        "device_ids": [i for r in requests for i in (r.get("DeviceIDs") or [])],
        "runtime": host.get("Runtime") if host.get("Runtime") not in ("runc", None) else None,
    }


def spec_diff(old, new):
    """
    A readable diff between an existing container (``spec_of_container``) and the wanted spec,
    secrets masked (``ccc_redact``): state changes end up in job caches and event buses.
    """
    diff = {}
    for key in new:
        if key == "name":
            continue
        before, after = old.get(key), new[key]
        if key in ("environment", "labels"):
            changed = {}
            for name in sorted(set(after) | {k for k in before or {} if k.startswith(("frp.", "ccc"))}):
                was, will = (before or {}).get(name), after.get(name)
                if name != ccc_rules.SPEC_HASH_LABEL and was != will:
                    changed[name] = {"old": was, "new": will}
            if changed:
                diff[key] = changed
        elif key in ("networks", "exposed_ports"):
            if sorted(before or []) != sorted(after):
                diff[key] = {"old": sorted(before or []), "new": sorted(after)}
        elif before != after:
            diff[key] = {"old": before, "new": after}
    return ccc_redact.redact(diff)


def create_recorded(client, name, spec):
    """
    Create a container and record it at once: it is ours even if this run dies before the swap.
    Its name is recorded before the create (a first run also adopts the labelled containers
    then, before this one exists), so one created by a run killed before its id was recorded
    still counts as ours (``ccc_node_record.is_managed``) and the next apply removes it
    (``ccc_swap.settle``).
    """
    marker = ccc_node_record.CREATING + name
    ccc_node_record.change(client, add=[marker])
    try:
        created = client.api.create_container(name=name, **create_kwargs(client, spec))
    except Exception:
        ccc_node_record.change(client, drop=[marker])
        raise
    try:
        ccc_node_record.change(client, add=[created["Id"]], drop=[marker])
    except Exception:
        client.api.remove_container(created["Id"], v=True, force=True)
        raise
    return created


def remove_recorded(client, container_id):
    """Remove a container this role created, and its id from the node's record."""
    client.api.remove_container(container_id, v=True, force=True)
    ccc_node_record.change(client, drop=[container_id])


def stop_and_remove(client, attrs):
    """Stop (politely, ``STOP_TIMEOUT``) and remove a container this role created."""
    if running(attrs):
        client.api.stop(attrs["Id"], timeout=STOP_TIMEOUT)
    remove_recorded(client, attrs["Id"])


def engine_problem(exc, url):
    """
    One clean line for an engine that does not answer (``ENGINE_DOWN``) or refuses (its API
    error); ``None`` for any other exception. Execution modules raise it as their error.
    """
    if ENGINE_ERRORS and isinstance(exc, ENGINE_ERRORS):
        return f"{ENGINE_DOWN} ({url})"
    if docker is not None and isinstance(exc, docker.errors.APIError):
        return f"the Docker engine refused: {exc.explanation or exc}"
    return None


@contextlib.contextmanager
def answering(url, error):
    """Run the block against the engine at ``url``: an engine that does not answer or refuses
    (``engine_problem``) becomes one ``error(line)``, the caller's exception (an execution
    module passes Salt's ``CommandExecutionError``); any other exception passes through."""
    try:
        yield
    except Exception as exc:
        problem = engine_problem(exc, url)
        if problem is None:
            raise
        raise error(problem) from exc


@contextlib.contextmanager
def session(node, error):
    """A client of ``node``'s engine (``client``) for the block, closed after it, with the
    engine's problems raised as ``answering`` does."""
    made = client(node)
    try:
        with answering(node["docker_url"], error):
            yield made
    finally:
        made.close()
