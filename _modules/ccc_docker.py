"""
Apply container resolutions to a Docker engine through the Docker SDK (no docker CLI).

``ccc_containers`` decides *what* a container should be; this module makes Docker match:
create/recreate only when the spec hash label differs, start a stopped container, reattach
missing networks, remove containers that do not belong on this node, and tell the user what
happened in ``~/.containers/<STACK_NAME>.deploy``.

The worker functions take a ``docker.DockerClient`` and plain data, so tests drive them against
a real ``dockerd`` without Salt; ``plan``, ``deploy``, ``remove_orphans`` and
``network_present`` are the Salt-facing wrappers used by ``_states/ccc_container.py``.
"""

import contextlib
import datetime
import fcntl
import grp
import json
import logging
import os
import stat
import time
import urllib.error
import urllib.request

from salt.exceptions import CommandExecutionError

import ccc_hostkeys
import ccc_mounts
import ccc_moves
import ccc_pillar
import ccc_pins
import ccc_report
import ccc_resolver
import ccc_rules
import ccc_safefs
import ccc_schema
import ccc_settings_file
import ccc_userdirs

try:
    import docker
    import docker.errors
    import docker.types
    import requests.exceptions
except ImportError:  # pragma: no cover - reported by __virtual__
    docker = None

log = logging.getLogger(__name__)

__virtualname__ = "ccc_docker"

SECRET_LABEL_MARKERS = (".password",)
# A Docker engine that does not answer (stopped, restarting, socket gone).
ENGINE_ERRORS = (requests.exceptions.ConnectionError, requests.exceptions.Timeout) if docker else ()
# The contract variables ccc_containers sets (they win over EXTRA_ENVS): shown as they are. Any
# other variable of a spec comes from the admin's EXTRA_ENVS (tokens) and is masked by ``redact``.
SHOWN_ENV = frozenset({
    "USER_NAME", "USER_ID", "USER_PUBKEY", "USER_GROUPS", "INSTALL_PACKAGES", "INSTALL_REPOSITORY_KEYS",
    "INSTALL_REPOSITORY_SOURCES", "RUNIT_STATUS_FILE", "RUNIT_WORKING_ENV_FILE", "APPS", "CONTAINER_NAME",
    "CONTAINER_NODE", "CONTAINER_IMAGE", "CONTAINER_WELCOME_MSG", "NVIDIA_VISIBLE_DEVICES",
})
# In ccc:node:state_dir: the ids of the containers this role created (see ``is_managed``).
RECORD_FILE = "managed-containers.json"
# In that record, beside the ids: the name of a container being created, until its id is recorded.
CREATING = "creating:"
# A recreate's names for the new and the old container while it swaps them (``_settle_swap``).
SWAP_SUFFIXES = (".ccc-new", ".ccc-old")
NEVER_STARTED = "0001-01-01T00:00:00Z"  # Docker's State.StartedAt of a container never started
STOP_TIMEOUT = 10


def __virtual__():
    if docker is None:
        return False, "ccc_docker needs the docker Python SDK (salt-pip install docker)"
    return __virtualname__


# --------------------------------------------------------------------------------------------
# Facts from the node and the outside world


def image_lookup_for(client, pull):
    """
    Return ``lookup(ref, credentials) -> (info, error)`` backed by ``client``.

    A missing image is pulled when ``pull`` is true. User-chosen images are pulled anonymously
    (``credentials`` false) so users cannot borrow the node's registry logins.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.resolve box1  # uses this lookup without pulling
    """

    def lookup(ref, credentials):
        try:
            image = client.images.get(ref)
        except docker.errors.ImageNotFound:
            if not pull:
                return {"id": None, "labels": {}, "env": [], "note": "not on this node yet; a deploy pulls it"}, None
            try:
                repository, tag = _split_reference(ref)
                image = client.images.pull(repository, tag=tag, auth_config=None if credentials else {})
            except docker.errors.APIError as exc:
                return None, f"pull failed: {exc.explanation or exc}"
        except docker.errors.APIError as exc:
            return None, f"image lookup failed: {exc.explanation or exc}"
        except ENGINE_ERRORS:
            return None, "the Docker engine of this node does not answer"
        config = image.attrs.get("Config") or {}
        return {"id": image.id, "labels": config.get("Labels") or {}, "env": config.get("Env") or []}, None

    return lookup


def _split_reference(ref):
    if "@" in ref:
        return ref.split("@", 1)[0], ref.split("@", 1)[1]
    name, _, tag = ref.rpartition(":")
    if name and "/" not in tag:
        return name, tag
    return ref, "latest"


def github_keys_for(cluster, fetch, cache_dir):
    """
    Return ``keys(login) -> (keys, error)`` that fetches GitHub keys and falls back to the
    last fetched copy when GitHub cannot be reached. The copy is a node-local cache
    (``<ccc:node:state_dir>/github-keys``): nothing is ever written below a storage root that is
    not mounted.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.resolve box1  # shows the keys a deploy would use
    """

    def keys(login):
        cache_file = os.path.join(cache_dir, f"{login}.keys")
        error = None
        if fetch:
            url = cluster["github_keys_url"].replace("{login}", login)
            try:
                with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - https URL from pillar
                    text = response.read(65536).decode("utf-8", "replace")
                found = [line.strip() for line in text.splitlines() if line.strip()]
                good = [line for line in found if not ccc_schema.check_pubkeys(line)]
                try:
                    os.makedirs(cache_dir, mode=0o700, exist_ok=True)  # node-local, not a storage root
                    _write_file_atomic(cache_file, "\n".join(good) + "\n", 0o644, root=cache_dir)
                except OSError as exc:
                    log.warning("cannot cache the GitHub keys of %s: %s", login, exc)
                return good, None
            except (urllib.error.URLError, OSError, ValueError) as exc:
                error = f"could not fetch the keys of GitHub user {login!r} ({exc})"
        try:
            with open(cache_file, encoding="utf-8") as handle:
                cached = [line.strip() for line in handle if line.strip()]
            if error:
                error += "; the keys fetched earlier are used"
            return cached, error
        except FileNotFoundError:
            return [], error

    return keys


def node_facts(ccc, minion_id, client, pull=True, fetch=True):
    """
    Gather what the resolver needs to know about this node.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.resolve box1
    """
    node = ccc_pillar.node_settings(ccc, minion_id)
    cluster = ccc_pillar.cluster_settings(ccc)
    try:
        docker_gid = grp.getgrnam("docker").gr_gid
    except KeyError:
        docker_gid = None
    return ccc_resolver.NodeFacts(
        name=node["name"],
        compute_devices=node["compute_devices"],
        docker_gid=docker_gid,
        host_timezone_files=[p for p in ("/etc/timezone", "/etc/localtime") if os.path.exists(p)],
        image_lookup=image_lookup_for(client, pull),
        github_keys=github_keys_for(cluster, fetch, os.path.join(node["state_dir"], "github-keys")),
    )


def stored_settings(cluster):
    """
    Map STACK_NAME -> last accepted user settings, from the shared state dir.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.resolve box1
    """
    directory = os.path.join(cluster["state_dir"], "last-good")
    stored = {}
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return stored
    for name in names:
        if name.endswith(".json"):
            stored[name[:-5]] = _read_json(os.path.join(directory, name))
    return stored


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (FileNotFoundError, ValueError):
        return None


def plan_container(ccc, stack, facts, stored=None, cluster=None):
    """
    Resolve one container with its settings file, last accepted settings and taken subdomains.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.resolve box1
    """
    cluster = cluster or ccc_pillar.cluster_settings(ccc)
    record, _ = ccc_pillar.container_record(ccc, stack, check=False)
    settings_text = settings_error = last_good = None
    if record and record.get("USER_EMAIL") and ccc_rules.EMAIL_PATTERN.match(str(record["USER_EMAIL"])):
        paths = ccc_pillar.settings_paths(cluster, record)
        try:
            settings_text = ccc_settings_file.read_settings_file(paths["settings_file"])
        except ccc_settings_file.SettingsError as exc:
            settings_error = str(exc)
        last_good = _read_json(paths["last_good_file"])
    if stored is None:
        stored = stored_settings(cluster)
    taken = ccc_resolver.taken_subdomains(ccc, stored, except_stack=stack)
    return ccc_resolver.resolve_container(
        ccc, stack, facts, settings_text=settings_text, settings_error=settings_error,
        last_good=last_good, taken=taken,
    )


# --------------------------------------------------------------------------------------------
# Docker operations


def _inspect(client, name):
    try:
        return client.api.inspect_container(name)
    except docker.errors.NotFound:
        return None


def _command_error(message):
    return CommandExecutionError(message)


def docker_client(node):
    """
    A Docker client for this node's engine that carries the node's state dir, where the record
    of the containers this role created lives (every managed-container check needs it).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.managed  # uses one
    """
    client = docker.DockerClient(base_url=node["docker_url"], version="1.41", timeout=120)
    client.ccc_state_dir = node["state_dir"]
    return client


def _record_path(client):
    state_dir = getattr(client, "ccc_state_dir", None)
    if not state_dir:
        raise _command_error("this Docker client has no node state dir (ccc_docker.docker_client makes one): "
                             "without the record of created containers none counts as managed")
    return os.path.join(state_dir, RECORD_FILE)


def _check_private(path, status):
    # Whoever can write the record (or its folder) decides what ccc-salt removes.
    if status.st_uid != os.geteuid() or status.st_mode & 0o022:
        raise _command_error(f"{path} must belong to uid {os.geteuid()} and be writable by nobody else; "
                             "not trusting the record of ccc-salt's containers")


def _read_record(path):
    """The recorded container ids, ``None`` when there is no record yet; raises when untrustworthy."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _command_error(f"cannot read {path}: {exc}") from exc
    with os.fdopen(fd, "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise _command_error(f"{path} is not a regular file")
        _check_private(path, status)
        _check_private(os.path.dirname(path), os.stat(os.path.dirname(path)))
        try:
            data = json.loads(handle.read().decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            data = None
    ids = data.get("containers") if isinstance(data, dict) else None
    if not isinstance(ids, list) or not all(isinstance(item, str) for item in ids):
        raise _command_error(f"{path} is not a record of container ids: repair it, or remove it to adopt "
                             "the labelled containers again")
    return set(ids)


@contextlib.contextmanager
def _record_lock(path):
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    _check_private(directory, os.stat(directory))
    fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _load_or_adopt(client, path):
    """
    The recorded ids (lock held). Without a record (first run after an upgrade) the containers
    that carry the managed-by label now are adopted once, and logged: the earlier version kept
    no record. Even a test run writes it, so later runs never adopt again.
    """
    ids = _read_record(path)
    if ids is None:
        label = f"{ccc_rules.MANAGED_BY_LABEL}={ccc_rules.MANAGED_BY_VALUE}"
        found = client.api.containers(all=True, filters={"label": label})
        ids = {summary["Id"] for summary in found}
        _write_file_atomic(path, json.dumps({"containers": sorted(ids)}, indent=1) + "\n", 0o600)
        # A fresh node has nothing to adopt; an upgraded one has, and the admin should know which.
        (log.warning if ids else log.info)(
            "no record of ccc-salt's containers at %s yet (new node or upgrade): adopted the %d labelled container(s) %s",
            path, len(ids), sorted(name.lstrip("/") for summary in found for name in summary.get("Names") or []))
    return ids


def recorded_ids(client):
    """
    The ids of the containers this role created on this node (see ``is_managed``).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.managed  # the labelled containers whose id is recorded
    """
    path = _record_path(client)
    ids = _read_record(path)
    if ids is None:
        with _record_lock(path):
            ids = _load_or_adopt(client, path)
    return ids


def _record_change(client, add=(), drop=()):
    """Add or drop container ids (locked, replaced atomically)."""
    path = _record_path(client)
    with _record_lock(path):
        ids = _load_or_adopt(client, path)
        updated = (ids | set(add)) - set(drop)
        if updated != ids:
            _write_file_atomic(path, json.dumps({"containers": sorted(updated)}, indent=1) + "\n", 0o600)


def is_managed(client, attrs, recorded=None):
    """
    True when ccc-salt created this container: the managed-by label AND its id in the node's
    record. The label alone proves nothing: a container inherits its image's labels and anyone
    with Docker access can set one. ``attrs``: inspect data or a list summary; ``recorded``:
    the ids when already read. The one definition everything that acts on containers uses.
    A container whose create was cut short before its id was recorded counts by its name,
    recorded before the create (``_create_recorded``), so the next apply can remove it.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.managed  # lists the containers it accepts
    """
    labels = attrs["Labels"] if "Labels" in attrs else _labels(attrs)
    if (labels or {}).get(ccc_rules.MANAGED_BY_LABEL) != ccc_rules.MANAGED_BY_VALUE:
        return False
    recorded = recorded_ids(client) if recorded is None else recorded
    return attrs["Id"] in recorded or CREATING + _name(attrs) in recorded


def _name(attrs):
    """The container's name, from inspect data or a list summary."""
    return (attrs.get("Name") or (attrs.get("Names") or [""])[0]).lstrip("/")


def create_kwargs(client, spec):
    """
    Translate a spec into ``APIClient.create_container`` arguments.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.resolve box1  # the spec this translates is under "spec"
    """
    mounts = [
        docker.types.Mount(
            target=m["target"], source=m["source"], type="bind", read_only=m["read_only"],
            propagation=m.get("propagation"),
        )
        for m in spec["mounts"]
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


def _attached_networks(attrs):
    return set(((attrs.get("NetworkSettings") or {}).get("Networks") or {}).keys())


def _stop_and_remove(client, attrs):
    if (attrs.get("State") or {}).get("Running"):
        client.api.stop(attrs["Id"], timeout=STOP_TIMEOUT)
    _remove_recorded(client, attrs["Id"])


def _remove_recorded(client, container_id):
    """Remove a container this role created, and its id from the node's record."""
    client.api.remove_container(container_id, v=True, force=True)
    _record_change(client, drop=[container_id])


def spec_of_container(attrs):
    """
    The comparable parts of an existing container, shaped like a spec (for readable diffs).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.resolve box1
    """
    config = attrs.get("Config") or {}
    host = attrs.get("HostConfig") or {}
    env = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
    requests = host.get("DeviceRequests") or []
    return {
        "image": config.get("Image"),
        "hostname": config.get("Hostname"),
        "environment": env,
        "labels": config.get("Labels") or {},
        "mounts": [
            {"source": m.get("Source"), "target": m.get("Target"), "read_only": bool(m.get("ReadOnly")),
             **({"propagation": m["BindOptions"]["Propagation"]} if (m.get("BindOptions") or {}).get("Propagation") else {})}
            for m in host.get("Mounts") or []
        ],
        "networks": sorted(_attached_networks(attrs)),
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
    A readable diff between an existing container and the wanted spec, secrets masked (``redact``):
    state changes end up in job caches and event buses.

    CLI Example:

    .. code-block:: bash

        salt-call state.apply containers test=True  # shows these diffs
    """
    diff = {}
    for key in new:
        if key in ("name",):
            continue
        before, after = old.get(key), new[key]
        if key in ("environment", "labels"):
            changed = {}
            for name in sorted(set(after) | {k for k in before or {} if k.startswith(("frp.", "ccc"))}):
                if name == ccc_rules.SPEC_HASH_LABEL:
                    continue
                was, will = (before or {}).get(name), after.get(name)
                if was != will:
                    changed[name] = {"old": was, "new": will}
            if changed:
                diff[key] = changed
        elif key == "networks":
            if sorted(before or []) != sorted(after):
                diff[key] = {"old": sorted(before or []), "new": sorted(after)}
        elif key == "exposed_ports":
            if sorted(before or []) != sorted(after):
                diff[key] = {"old": sorted(before or []), "new": sorted(after)}
        elif before != after:
            diff[key] = {"old": before, "new": after}
    return redact(diff)


def _write_file_atomic(path, text, mode, owner=None, root=None):
    """``ccc_safefs.replace_file`` for text."""
    ccc_safefs.replace_file(path, text.encode("utf-8"), mode, owner, root)


def _messages_part(report):
    return report.partition("\nmessages:\n")[2]


def write_feedback(resolution, outcome, owner, changed=True):
    """
    Write ``<STACK_NAME>.deploy`` beside the user's settings file.

    After a run that changed nothing the report is kept unless its messages differ, so a no-op
    apply writes nothing and the user still sees what last happened. The folder is opened
    without following links and the report replaced atomically inside it (``ccc_userdirs``).

    CLI Example:

    .. code-block:: bash

        salt-call state.apply containers  # writes these reports
    """
    paths = resolution.get("paths")
    if not paths:
        return False
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    text, body = ccc_report.feedback_report(resolution, outcome, when)

    def unchanged(existing):
        existing = existing.split("\n", 1)[-1]
        return not changed and (existing == body or _messages_part(existing) == _messages_part(body))

    try:
        return ccc_userdirs.write_report(paths["settings_folder"], os.path.basename(paths["feedback_file"]), text,
                                         owner, unchanged)
    except OSError as exc:
        # Best effort: whatever the user put in the way (a folder, say) only costs them the report.
        log.warning("cannot write %s: %s", paths["feedback_file"], exc)
        return False


def pin_spec(binds_dir, spec, create):
    """
    The spec as Docker gets it: every pinned mount's source replaced by its pin folder.

    The pin set id (sources and their inodes) is part of the sources, so the spec hash changes
    when a user replaced a folder. ``create`` false only checks the sources (test mode).
    Raises ``ccc_safefs.UnsafePath`` / ``FileNotFoundError`` for a bad or missing source.

    CLI Example:

    .. code-block:: bash

        salt-call state.apply containers test=True  # diffs the pinned spec
    """
    pins = [m["pin"] for m in spec["mounts"] if m.get("pin")]
    set_id, identity = ccc_pins.identify(pins)
    if create:
        ccc_pins.ensure(binds_dir, spec["name"], pins, set_id, identity)
    base = ccc_pins.set_dir(binds_dir, spec["name"], set_id)
    mounts = []
    for mount in spec["mounts"]:
        mount = dict(mount)
        pin = mount.pop("pin", None)
        if pin:
            mount["source"] = os.path.join(base, pin["name"])
        mounts.append(mount)
    pinned = dict(spec, mounts=mounts, labels=dict(spec["labels"]))
    pinned["labels"][ccc_rules.SPEC_HASH_LABEL] = ccc_resolver.spec_hash(pinned)
    return pinned


def _prepare_node(cluster, node, resolution, test):
    """Folders, host keys and pins for a ``run``; returns ``(pinned spec, created folders)``."""
    spec = resolution["spec"]
    if test:
        return pin_spec(node["binds_dir"], spec, create=False), []
    created = ccc_userdirs.ensure_directories(resolution["directories"])
    if ccc_hostkeys.ensure(cluster["mount_points"]["local"]["sshd_data"], cluster["state_dir"], spec["name"],
                           (cluster.get("host_keys") or {}).get("rsa_bits", 3072)):
        created.append(ccc_hostkeys.node_dir(cluster["mount_points"]["local"]["sshd_data"], spec["name"]))
    pinned = pin_spec(node["binds_dir"], spec, create=True)
    missing = [m["source"] for m in pinned["mounts"] if not os.path.exists(m["source"])]
    if missing:
        raise FileNotFoundError(f"missing on this node (storage not mounted?): {', '.join(missing)}")
    return pinned, created


def apply_resolution(client, cluster, resolution, test=False, node=None):
    """
    Make Docker match one resolution (see ``_apply``); a Docker engine that does not answer is
    a failure of this container that the user is told about, never a silent skip.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.deploy box1 test=True
    """
    try:
        attrs, settled = _settle_swap(client, resolution["stack"], resolution["action"] != "remove", test)
        return _with_settled(_apply(client, cluster, resolution, attrs, test, node), settled, test)
    except ENGINE_ERRORS as exc:
        message = "the Docker engine of this node does not answer (the admins were told)"
        if not test and resolution["node"] in (resolution.get("placement") or []):
            owner = (cluster["nfs_user"]["uid"], cluster["nfs_user"].get("gid", cluster["nfs_user"]["uid"]))
            _note_here(cluster, resolution, running=False, error=message)
            text = f"NOT deployed on {resolution['node']}: {message}"
            kept = _kept_elsewhere(cluster, resolution)
            if kept:  # the other node's report may land first: both say where it still runs
                text += f"; still running on {', '.join(kept)} until then"
            write_feedback(resolution, text, owner)
        return _failure(f"{resolution['stack']}: {message}: {exc}")


def _apply(client, cluster, resolution, attrs, test=False, node=None):
    """
    Make Docker match one resolution. Returns ``{"result", "changes", "comment"}``.

    ``run``: create or recreate (only when the spec hash changed; the new container is created
    before the old one is removed, so a failing create leaves the old one running), start it if
    stopped, reattach missing networks. ``remove``: remove the managed container, purge the
    stack's data if asked. ``hold``: change nothing and fail with the reasons. ``node``: the
    node settings (``binds_dir``, where the pin sets live). ``attrs``: the container named
    ``<stack>`` once a recreate that a killed run left half done is settled (``_settle_swap``).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.deploy box1 test=True
    """
    stack = resolution["stack"]
    owner = (cluster["nfs_user"]["uid"], cluster["nfs_user"].get("gid", cluster["nfs_user"]["uid"]))
    notes = list(resolution["notes"])
    if attrs is not None and not is_managed(client, attrs):
        return _failure(f"a container named {stack!r} exists but is not managed by ccc-salt; not touching it")

    if resolution["action"] == "hold":
        if not test:
            write_feedback(resolution, "NOT deployed: " + resolution["reason"], owner)
        problems = resolution["admin_errors"] or [resolution["reason"]]
        return _failure("; ".join(problems + notes))

    node = node or ccc_pillar.node_settings({}, resolution["node"])
    if resolution["action"] == "remove":
        if attrs is not None and resolution.get("placement") and not resolution["reason"].startswith("DISABLED"):
            kept = _keep_for_move(cluster, resolution, owner, test)
            if kept is not None:
                return kept
        outcome = _apply_remove(client, cluster, resolution, attrs, owner, test, node["binds_dir"])
        if not test:
            ccc_moves.clear(cluster["state_dir"], stack, resolution["node"])
        return outcome

    try:
        spec, created_dirs = _prepare_node(cluster, node, resolution, test)
    except ccc_safefs.UnsafePath as exc:
        message = (f"NOT deployed: {exc.strerror}. A folder of yours is replaced by something else; "
                   "put the real folder back (the container keeps running as it was)")
        if not test:
            write_feedback(resolution, message, owner)
            if not _running(attrs):  # a running copy here stays what the markers say
                _note_here(cluster, resolution, running=False, error="a user folder is not a real folder")
        return _failure(f"{stack}: refusing a user path: {exc.strerror}")
    except FileNotFoundError as exc:
        if not test:
            write_feedback(resolution, "NOT deployed: the node's storage is not ready (the admins were told)", owner)
        return _failure(f"{stack}: {exc}")
    if test:
        return _test_run(resolution, spec, attrs, notes)
    changes = {"directories": created_dirs} if created_dirs else {}
    _store_settings(resolution, owner, changes)
    try:
        outcome = _apply_run(client, spec, attrs, changes)
    except docker.errors.APIError as exc:
        message = f"Docker refused the container, nothing was changed: {exc.explanation or exc}"
        resolution = dict(resolution, user_messages=resolution["user_messages"] + [message])
        write_feedback(resolution, "NOT deployed: " + message, owner)
        if not _running(_inspect(client, stack)):
            _note_here(cluster, resolution, running=False, error="Docker refused the container")
        return _failure(f"{stack}: {message}", changes)
    _release_unused_pins(client, node["binds_dir"], stack)
    write_feedback(resolution, outcome, owner, changed=bool(changes))
    comment = f"{stack}: {outcome} ({resolution['reason']})"
    if resolution["settings_status"] == "rejected":
        notes.append("user settings rejected: " + "; ".join(resolution["user_messages"][1:]))
    result = {"result": True, "changes": changes, "comment": _join(comment, notes)}
    kept = _note_here(cluster, resolution, running=True)
    if kept:
        result["announce"] = kept  # nodes keeping an old copy: they remove it when told
    return result


def _running(attrs):
    return bool(attrs and (attrs.get("State") or {}).get("Running"))


def _settings_since(resolution):
    """When the user last saved the settings file (0 without one): a move is confirmed only by
    a marker written after it."""
    paths = resolution.get("paths") or {}
    if not paths.get("settings_folder") or resolution.get("settings_status") != "applied":
        return 0  # no file, or a rejected one: the placement is the one already accepted
    return ccc_userdirs.mtime(paths["settings_folder"], os.path.basename(paths["settings_file"])) or 0


def _note_here(cluster, resolution, running, error=None):
    """Write this node's marker for the stack when it changed; returns the nodes outside the
    placement that still keep a copy (best effort: the shared storage may be away)."""
    stack, here = resolution["stack"], resolution["node"]
    try:
        markers = ccc_moves.read(cluster["state_dir"], stack)
        if ccc_moves.needs_note(markers.get(here), running, error, _settings_since(resolution)):
            ccc_moves.write(cluster["state_dir"], stack, here, running, error)
    except OSError as exc:
        log.warning("cannot record the state of %s on %s: %s", stack, here, exc)
        return []
    return ccc_moves.kept_elsewhere(markers, resolution.get("placement") or []) if running else []


def _kept_elsewhere(cluster, resolution):
    """Nodes outside the placement that still run the stack (best effort)."""
    try:
        return ccc_moves.kept_elsewhere(ccc_moves.read(cluster["state_dir"], resolution["stack"]),
                                        resolution.get("placement") or [])
    except OSError:
        return []


def _keep_for_move(cluster, resolution, owner, test):
    """
    Make-before-break: the container is placed on other nodes; keep this copy running until
    one of them reports it running for the current settings. Returns the state result when the
    copy is kept, None when it may go.
    """
    stack, here, placement = resolution["stack"], resolution["node"], resolution["placement"]
    since = _settings_since(resolution)
    ok, why = ccc_moves.confirmed(ccc_moves.read(cluster["state_dir"], stack), placement, here, since)
    if ok:
        return None
    comment = f"{stack}: {'would be' if test else 'is'} kept running on {here} until {', '.join(placement)} runs it: {why}"
    if not test:
        ccc_moves.write(cluster["state_dir"], stack, here, True, kept=True)
        write_feedback(resolution, f"still running on {here}: moving to {', '.join(placement)}, where {why}", owner)
    return {"result": True, "changes": {}, "comment": comment}


def _test_run(resolution, spec, attrs, notes):
    changes = {}
    if attrs is None:
        changes["created"] = {"image": spec["image"], "networks": spec["networks"], "gpus": spec["device_ids"]}
    elif _labels(attrs).get(ccc_rules.SPEC_HASH_LABEL) != spec["labels"][ccc_rules.SPEC_HASH_LABEL]:
        changes["recreated"] = spec_diff(spec_of_container(attrs), spec)
    elif not attrs["State"].get("Running"):
        changes["started"] = True
    comment = f"{resolution['stack']}: would be {', '.join(changes) or 'left as it is'} ({resolution['reason']})"
    return {"result": None if changes else True, "changes": changes, "comment": _join(comment, notes)}


def _store_settings(resolution, owner, changes):
    """The default settings file for a user who has none, and the last accepted settings."""
    paths = resolution["paths"]
    if resolution.get("default_settings_text") and ccc_userdirs.create_file(
        paths["settings_folder"], os.path.basename(paths["settings_file"]), resolution["default_settings_text"], owner
    ):
        changes["settings_file"] = f"wrote the default {paths['settings_file']}"
    if resolution.get("settings_to_store") is not None:
        if _read_json(paths["last_good_file"]) != resolution["settings_to_store"]:
            _write_file_atomic(paths["last_good_file"], json.dumps(resolution["settings_to_store"], sort_keys=True), 0o600,
                               root=os.path.dirname(os.path.dirname(os.path.dirname(paths["last_good_file"]))))


def _release_unused_pins(client, binds_dir, stack):
    """Unmount the pin sets of ``stack`` that none of its containers (swap leftovers too) uses."""
    users = [attrs for attrs in (_inspect(client, name) for name in (stack, *_swap_names(stack))) if attrs is not None]
    ccc_pins.release(binds_dir, stack, keep=ccc_pins.sets_in_use(users, binds_dir, stack) or {"-"})


def _swap_names(stack):
    """The names of a recreate's new and old container while it swaps them (``_apply_run``)."""
    return tuple(stack + suffix for suffix in SWAP_SUFFIXES)


def _ever_started(attrs):
    state = attrs.get("State") or {}
    return bool(state.get("Running")) or state.get("StartedAt", NEVER_STARTED) not in ("", NEVER_STARTED)


def _swap_plan(real, new, old):
    """
    How to finish or undo a recreate that a killed run left half done, from ``<stack>`` (``real``)
    and its managed leftovers: ``(containers to remove, container to rename back to <stack>)``.
    Once the new container has started the swap is finished (the old one goes, as the swap would
    have removed it); before that it is undone, so the last good container is never lost to a
    spec Docker may not start. A ``.ccc-new`` never ran as the real one: it always goes.
    """
    if old is not None and (real is None or not _ever_started(real)):
        return [attrs for attrs in (new, real) if attrs is not None], old
    return [attrs for attrs in (new, old) if attrs is not None], None


def _settle_swap(client, stack, start, test):
    """
    Finish or undo a swap of ``stack`` that a killed run left half done (``_swap_plan``), first
    in every apply: leftovers never outlive it and the stack never stays without ``<stack>``.
    ``start``: start a container renamed back (the swap had stopped it; not when removing).
    Returns ``(attrs of <stack> once settled, what was done)``; a test run only says what it
    would do, with the container that would then be ``<stack>``.
    """
    new_name, old_name = _swap_names(stack)
    recorded = recorded_ids(client)
    real, new, old = (_inspect(client, name) for name in (stack, new_name, old_name))
    if real is not None and not is_managed(client, real, recorded):
        return real, {}  # not ours: the apply refuses, and leaves this stack's leftovers alone too
    new, old = (attrs if attrs is not None and is_managed(client, attrs, recorded) else None for attrs in (new, old))
    remove, restore = _swap_plan(real, new, old)
    done = {"removed": sorted(_name(attrs) for attrs in remove)} if remove else {}
    if restore is not None:
        done["restored"] = f"{old_name} as {stack}" + (", started" if start and not _running(restore) else "")
    if test:
        return (restore if restore is not None else real), done
    for attrs in remove:
        _stop_and_remove(client, attrs)
    if CREATING + new_name in recorded:
        _record_change(client, drop=[CREATING + new_name])  # its create was cut short
    if restore is not None:
        client.api.rename(restore["Id"], stack)
        if start and not _running(restore):
            try:
                client.api.start(restore["Id"])
            except docker.errors.APIError as exc:  # e.g. its pins are gone (reboot): the apply goes on
                log.warning("could not start %s again after undoing its interrupted recreate: %s", stack, exc)
                done["restored"] = f"{old_name} as {stack}, not started: {exc.explanation or exc}"
    if done:
        log.warning("%s: settled a recreate that a killed run left half done: %s", stack, done)
    return (_inspect(client, stack) if done else real), done


def _with_settled(result, settled, test):
    """An apply's result, with the settling of an interrupted recreate among its changes."""
    if not settled:
        return result
    verb = "would settle" if test else "settled"
    return dict(result, changes=dict(result["changes"], swap_settled=settled),
                comment=_join(result["comment"], [f"{verb} an interrupted recreate: {settled}"]),
                result=None if test and result["result"] is True else result["result"])


def _apply_run(client, spec, attrs, changes):
    """Create, recreate (swap) or start the container; every step may be killed (``_settle_swap``)."""
    wanted_hash = spec["labels"][ccc_rules.SPEC_HASH_LABEL]
    if attrs is not None and _labels(attrs).get(ccc_rules.SPEC_HASH_LABEL) == wanted_hash:
        missing = [net for net in spec["networks"] if net not in _attached_networks(attrs)]
        for network in missing:
            client.api.connect_container_to_network(attrs["Id"], network)
        if missing:
            changes["networks_reattached"] = missing
        if not attrs["State"].get("Running"):
            client.api.start(attrs["Id"])
            changes["started"] = True
            return "started (it was stopped)"
        return "running, unchanged" if not missing else "running, networks reattached"

    new_name, old_name = _swap_names(spec["name"])  # no leftovers: _settle_swap ran first
    created = _create_recorded(client, new_name, spec)
    try:
        for network in spec["networks"][1:]:
            client.api.connect_container_to_network(created["Id"], network)
    except docker.errors.APIError:
        _remove_recorded(client, created["Id"])
        raise
    if attrs is None:
        try:
            client.api.rename(created["Id"], spec["name"])
            client.api.start(created["Id"])
        except docker.errors.APIError:
            _remove_recorded(client, created["Id"])
            raise
        changes["created"] = {"image": spec["image"], "networks": spec["networks"], "gpus": spec["device_ids"]}
        return "created and started"

    # Swap: the old container is kept (stopped, renamed) until the new one has started, so a
    # spec Docker cannot start leaves the last good container running.
    was_running = bool(attrs["State"].get("Running"))
    if was_running:
        client.api.stop(attrs["Id"], timeout=STOP_TIMEOUT)
    client.api.rename(attrs["Id"], old_name)
    try:
        client.api.rename(created["Id"], spec["name"])
        client.api.start(created["Id"])
    except docker.errors.APIError:
        _remove_recorded(client, created["Id"])
        client.api.rename(attrs["Id"], spec["name"])
        if was_running:
            client.api.start(attrs["Id"])
        raise
    _remove_recorded(client, attrs["Id"])
    changes["recreated"] = spec_diff(spec_of_container(attrs), spec)
    return "recreated with the new settings"


def _create_recorded(client, name, spec):
    """
    Create a container and record it at once: it is ours even if this run dies before the swap.
    Its name is recorded before the create (a first run also adopts the labelled containers
    then, before this one exists), so one created by a run killed before its id was recorded
    still counts as ours (``is_managed``) and the next apply removes it (``_settle_swap``).
    """
    marker = CREATING + name
    _record_change(client, add=[marker])
    try:
        created = client.api.create_container(name=name, **create_kwargs(client, spec))
    except Exception:
        _record_change(client, drop=[marker])
        raise
    try:
        _record_change(client, add=[created["Id"]], drop=[marker])
    except Exception:
        client.api.remove_container(created["Id"], v=True, force=True)
        raise
    return created


def _apply_remove(client, cluster, resolution, attrs, owner, test, binds_dir=None):
    stack = resolution["stack"]
    changes = {}
    if attrs is not None:
        changes["removed"] = {"reason": resolution["reason"]}
        if not test:
            _stop_and_remove(client, attrs)
    if not test and binds_dir:
        ccc_pins.release(binds_dir, stack)
    if resolution.get("purge"):
        existing = ccc_userdirs.existing(purge_paths(cluster, resolution))
        if existing:
            changes["purged"] = [ccc_userdirs.display(entry) for entry in existing]
            if not test:
                ccc_userdirs.remove(existing)
    if resolution["reason"].startswith("DISABLED") and not test and not resolution.get("purge"):
        write_feedback(resolution, "removed: the administrators disabled this container", owner)
    verb = "would be" if test else "was"
    comment = f"{stack}: not on this node ({resolution['reason']})"
    if changes:
        comment = f"{stack}: {verb} {' and '.join(changes)} ({resolution['reason']})"
    return {"result": None if (test and changes) else True, "changes": changes, "comment": comment}


def purge_paths(cluster, resolution):
    """
    What PURGE_USER_DATA deletes for one stack, as ``{"root", "parts"}`` entries: its home
    (unless another active stack of the user shares it), its settings files, its node-local SSD
    folder and its last accepted settings. Each is reached from its storage root without
    following links, so nothing outside the user's own folders can be named.

    CLI Example:

    .. code-block:: bash

        salt-call state.apply containers test=True  # lists them under "purged"
    """
    record = resolution["record"]
    stack = record["STACK_NAME"]
    email = record["USER_EMAIL"]
    user_data = cluster["mount_points"]["nfs"]["user_data"]
    storage = record.get("STORAGE_NAME") or stack
    entries = [{"root": user_data, "parts": [email, "container-settings", f"{stack}{suffix}"]}
               for suffix in (".yml", ".deploy", ".status", ".env-backup")]
    if storage not in resolution.get("storage_in_use", []):
        entries.append({"root": user_data, "parts": [email, storage]})
    # The image keeps ~/.cache and ~/.services of this container under <ssd>/<email>/<STACK_NAME>.
    entries.append({"root": cluster["mount_points"]["local"]["ssd_data"], "parts": [email, stack]})
    last_good = resolution["paths"]["last_good_file"]
    entries.append({"root": os.path.dirname(last_good), "parts": [os.path.basename(last_good)]})
    return entries


def _labels(attrs):
    return (attrs.get("Config") or {}).get("Labels") or {}


def _failure(comment, changes=None):
    return {"result": False, "changes": changes or {}, "comment": comment}


def _join(comment, notes):
    return comment if not notes else comment + "; " + "; ".join(notes)


def managed_containers(client):
    """
    Map STACK_NAME -> container attrs summary for every container ccc-salt manages on this
    engine (``is_managed``: labelled and recorded; a label alone is never enough). A stack is
    its container named exactly STACK_NAME: a leftover of an interrupted recreate
    (``_settle_swap``) stands for it only while there is none, so it never hides the real one
    but orphans, clean and pin releases still see a stack that has only leftovers.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.managed
    """
    return {stack: found[0] for stack, found in _managed_by_stack(client).items()}


def _managed_by_stack(client):
    """STACK_NAME -> the summaries of all its managed containers, the one named STACK_NAME
    first, then its ``.ccc-old`` (the container a half-done recreate rolls back to)."""
    found = {}
    recorded = recorded_ids(client)
    label_filter = f"{ccc_rules.MANAGED_BY_LABEL}={ccc_rules.MANAGED_BY_VALUE}"
    for summary in client.api.containers(all=True, filters={"label": label_filter}):
        stack = (summary.get("Labels") or {}).get(ccc_rules.STACK_LABEL)
        if stack and is_managed(client, summary, recorded):
            found.setdefault(stack, []).append(summary)
    for stack, summaries in found.items():
        summaries.sort(key=lambda summary: (_name(summary) != stack, _name(summary) != _swap_names(stack)[1],
                                            _name(summary)))
    return found


def orphan_refusal(orphans, managed_count, max_share, force=False, pillar_errors=None):
    """
    Why removing ``orphans`` must not happen now, or ``None`` when it may: a broken or emptied
    pillar looks exactly like containers that left it, and must never wipe a node.

    The rule: never while pillar has render errors (``force`` does not override this: fix the
    pillar); and when more than one container would go and they are more than ``max_share`` of
    the node's ``managed_count`` managed containers, only with ``force`` (pillar
    ``ccc_force_orphans``). A ``max_share`` outside 0..1 refuses too.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.remove_orphans test=True  # shows the refusal, if any
    """
    if not orphans:
        return None
    if pillar_errors:
        return "pillar has render errors, so its list of containers cannot be trusted: " + "; ".join(
            str(error) for error in pillar_errors)[:1000]
    if isinstance(max_share, bool) or not isinstance(max_share, (int, float)) or not 0 <= max_share <= 1:
        return f"ccc:cluster:orphans:max_share must be a number from 0 to 1, got {max_share!r}"
    if len(orphans) > 1 and len(orphans) > max_share * managed_count and not force:
        return (f"{len(orphans)} of the {managed_count} managed containers on this node would go, more than "
                f"max_share {max_share:g} of them; if pillar really dropped them, run again with "
                """pillar='{"ccc_force_orphans": true}'""")
    return None


def remove_orphans_from(client, known_stacks, test=False, max_share=0.5, force=False, pillar_errors=None):
    """
    Remove managed containers whose STACK_NAME is no longer in pillar, unless ``orphan_refusal``
    refuses. Data is never touched. Returns ``{"orphans", "managed", "refused"}`` (``refused``:
    the reason nothing was removed, else ``None``).

    CLI Example:

    .. code-block:: bash

        salt-call state.apply containers  # the ccc-containers-orphans state runs this
    """
    managed = _managed_by_stack(client)
    orphans = sorted(stack for stack in managed if stack not in known_stacks)
    refused = orphan_refusal(orphans, len(managed), max_share, force, pillar_errors)
    if not test and refused is None:
        for summary in (summary for stack in orphans for summary in managed[stack]):  # leftovers too
            attrs = _inspect(client, summary["Id"])
            if attrs is not None:
                _stop_and_remove(client, attrs)
    return {"orphans": orphans, "managed": len(managed), "refused": refused}


def reconcile_private_mounts(client, cluster, binds_dir, wanted, test=False):
    """
    Mount each running container's live private groups inside its ``private`` pin, unmount the
    revoked ones, undo the earlier version's mounts on user paths, and release the pin sets of
    stacks with no managed container here. Returns the changes.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.private_mounts test=True
    """
    nfs = cluster["mount_points"]["nfs"]
    owner = (cluster["nfs_user"]["uid"], cluster["nfs_user"].get("gid", cluster["nfs_user"]["uid"]))
    changes = {"mounted": [], "unmounted": [], "released": [], "refused": []}
    for point in ccc_pins.legacy_private_mounts(nfs["user_data"]):
        changes["unmounted"].append(point)
        if not test:
            _unmount_user_path(nfs["user_data"], point)
    containers = managed_containers(client)
    points = set(ccc_safefs.mount_points())
    for stack, summary in sorted(containers.items()):
        attrs = _inspect(client, summary["Id"]) if summary.get("State") == "running" else None
        private_dir = ccc_pins.private_pin(attrs) if attrs else None
        if not private_dir or not private_dir.startswith(os.path.join(binds_dir, "")) or private_dir not in points:
            continue
        done = ccc_pins.reconcile_groups(private_dir, nfs["private_data"], wanted.get(stack, []), owner, test)
        for key, value in done.items():
            changes[key].extend(value)
    for stack in ccc_pins.pinned_stacks(binds_dir):
        if stack not in containers:
            changes["released"].append(stack)
            if not test:
                ccc_pins.release(binds_dir, stack)
    return {key: value for key, value in changes.items() if value}


def _unmount_user_path(root, point):
    """Unmount a mount point below a user folder, reached without following links."""
    parts = point[len(os.path.join(root, "")):].split("/")
    try:
        fd = ccc_safefs.walk(root, parts)
    except (FileNotFoundError, ccc_safefs.UnsafePath) as exc:
        log.warning("not unmounting %s: %s", point, exc)
        return
    try:
        ccc_safefs.unmount_fd(fd)
    finally:
        os.close(fd)


def ensure_network(client, name, definition, test=False):
    """
    Make sure a Docker network exists; create it as a bridge from its pillar definition.

    Returns ``"present"``, ``"created"`` or ``"would be created"``.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.network_present claims
    """
    if any(network["Name"] == name for network in client.api.networks(names=[name])):
        return "present"
    if test:
        return "would be created"
    ipam = None
    if definition.get("subnet"):
        pool = docker.types.IPAMPool(subnet=definition["subnet"], gateway=definition.get("gateway"))
        ipam = docker.types.IPAMConfig(pool_configs=[pool])
    options = {}
    if definition.get("bridge_name"):
        options["com.docker.network.bridge.name"] = definition["bridge_name"]
    client.api.create_network(
        name, driver="bridge", internal=bool(definition.get("internal")), ipam=ipam,
        options=options or None,
        labels={ccc_rules.MANAGED_BY_LABEL: ccc_rules.MANAGED_BY_VALUE},
    )
    return "created"


# --------------------------------------------------------------------------------------------
# Salt-facing wrappers


def _client():
    key = "ccc_docker.client"
    if key not in __context__:
        __context__[key] = docker_client(ccc_pillar.node_settings(_ccc(), __grains__["id"]))
    return __context__[key]


def _node(ccc):
    return ccc_pillar.node_settings(ccc, __grains__["id"])


def _ccc():
    return ccc_pillar.pillar_ccc(__pillar__)


def _stored_settings_cached(cluster):
    # Every container of one run needs the same map of taken subdomains: read it once per run.
    key = "ccc_docker.stored_settings"
    cached = __context__.get(key)
    if cached is None or time.monotonic() - cached[0] > 30:
        cached = (time.monotonic(), stored_settings(cluster))
        __context__[key] = cached
    return cached[1]


def _plan(ccc, cluster, name, pull):
    facts = node_facts(ccc, __grains__["id"], _client(), pull=pull, fetch=pull)
    return plan_container(ccc, name, facts, _stored_settings_cached(cluster), cluster=cluster)


def plan(name, pull=False):
    """
    Resolve one container for this node (read-only unless ``pull`` is true), secrets masked
    (``redact``): it is for display.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.plan box1
    """
    ccc = _ccc()
    return redact(_plan(ccc, ccc_pillar.cluster_settings(ccc), name, pull))


def redact(data):
    """
    A copy of a resolution, spec or spec diff fit for display: the values of the admin's
    ``EXTRA_ENVS`` (tokens; in a spec's environment every variable outside ``SHOWN_ENV``),
    ``*.password`` labels and FRP basic-auth ``pass`` values become ``***`` (unset stays unset).
    The one redaction rule: plans, ``resolve`` and test-run diffs all pass through it.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.plan box1
    """
    return _redacted(json.loads(json.dumps(data)), None)


def _redacted(value, section):
    if isinstance(value, list):
        return [_redacted(item, section) for item in value]
    if not isinstance(value, dict):
        return value
    return {name: _masked(item) if _is_secret(section, name) else _redacted(item, name) for name, item in value.items()}


def _is_secret(section, name):
    if section == "EXTRA_ENVS":
        return True
    if section == "environment":
        return name not in SHOWN_ENV
    if section == "labels":
        return any(marker in name for marker in SECRET_LABEL_MARKERS)
    return section == "HTTP" and name == "pass"


def _masked(value):
    # A diff entry keeps its shape ({"old", "new"}) and still shows whether a value is set.
    if isinstance(value, dict):
        return {name: _masked(item) for name, item in value.items()}
    return value if value in (None, "") else "***"


def deploy(name, test=False):
    """
    Deploy (or remove, when it does not belong here) one container on this node.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.deploy box1 test=True
    """
    ccc = _ccc()
    cluster = ccc_pillar.cluster_settings(ccc)
    resolution = _plan(ccc, cluster, name, pull=not test)
    # a notice from the master's redeploy runner (e.g. held back by the rate limit) for the user's report
    notices = __pillar__.get("ccc_notice")
    if isinstance(notices, dict) and isinstance(notices.get(name), str):
        resolution = dict(resolution, user_messages=list(resolution.get("user_messages") or []) + [notices[name][:300]])
    outcome = apply_resolution(_client(), cluster, resolution, test=test, node=_node(ccc))
    if outcome.pop("announce", None):
        # Another node keeps an old copy for a move: tell the master, which redeploys the stack
        # there (it removes the copy now that this node runs it). Masterless: nothing listens.
        try:
            __salt__["event.send"](f"ccc/moved/{name}", {"stack": name})
        except Exception as exc:  # noqa: BLE001 - a lost announcement only delays the removal
            log.warning("could not announce that %s runs here: %s", name, exc)
    return outcome


def managed():
    """
    List the ccc-salt containers on this node with their state.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.managed
    """
    return {stack: summary.get("State") for stack, summary in managed_containers(_client()).items()}


def remove(name, test=False):
    """
    Remove the ccc-salt container ``name`` from this node (never its data), and the leftovers
    of an interrupted recreate of it.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.remove box1 test=True
    """
    client = _client()
    attrs = _inspect(client, name)
    if attrs is not None and not is_managed(client, attrs):
        return _failure(f"a container named {name!r} exists but is not managed by ccc-salt; not touching it")
    found = [found for found in (attrs, *(_inspect(client, leftover) for leftover in _swap_names(name)))
             if found is not None and is_managed(client, found)]
    if not found:
        return {"result": True, "changes": {}, "comment": f"{name} is not on this node"}
    if not test:
        for each in found:
            _stop_and_remove(client, each)
    removed = ", ".join(_name(each) for each in found)
    return {"result": None if test else True, "changes": {"removed": removed},
            "comment": f"{removed} {'would be' if test else 'was'} removed"}


def remove_orphans(test=False):
    """
    Remove ccc-salt containers whose STACK_NAME is gone from pillar, within the guard of
    ``orphan_refusal`` (share ``ccc:cluster:orphans:max_share``; run-time pillar
    ``ccc_force_orphans`` lifts it; pillar render errors always refuse).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.remove_orphans test=True
    """
    ccc = _ccc()
    known = {e.get("STACK_NAME") for e in ccc.get("containers") or [] if isinstance(e, dict)}
    max_share = (ccc_pillar.cluster_settings(ccc).get("orphans") or {}).get("max_share")
    return remove_orphans_from(_client(), known, test=test, max_share=max_share,
                               force=ccc_rules.truthy(__pillar__.get("ccc_force_orphans")),
                               pillar_errors=__pillar__.get("_errors"))


def private_mounts(test=False):
    """
    Reconcile the live private data mounts of the users with containers on this node.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.private_mounts test=True
    """
    ccc = _ccc()
    cluster = ccc_pillar.cluster_settings(ccc)
    client = _client()
    stacks = [stack for stack, summary in managed_containers(client).items() if summary.get("State") == "running"]
    return reconcile_private_mounts(client, cluster, _node(ccc)["binds_dir"],
                                    ccc_mounts.wanted_private_mounts(ccc, stacks), test=test)


def network_present(name, test=False):
    """
    Ensure the Docker network ``name`` exists (definition from ``ccc:cluster:networks``).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.network_present claims
    """
    cluster = ccc_pillar.cluster_settings(_ccc())
    return ensure_network(_client(), name, (cluster.get("networks") or {}).get(name) or {}, test=test)
