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

import datetime
import grp
import json
import logging
import os
import secrets
import shutil
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ccc_containers  # noqa: E402  (sibling module, also loaded by Salt)
import ccc_settings  # noqa: E402

try:
    import docker
    import docker.errors
    import docker.types
except ImportError:  # pragma: no cover - reported by __virtual__
    docker = None

log = logging.getLogger(__name__)

__virtualname__ = "ccc_docker"

SECRET_LABEL_MARKERS = (".password",)
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


def github_keys_for(cluster, fetch):
    """
    Return ``keys(login) -> (keys, error)`` that fetches GitHub keys and falls back to the
    last fetched copy (kept under the state dir) when GitHub cannot be reached.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.resolve box1  # shows the keys a deploy would use
    """
    cache_dir = os.path.join(cluster["state_dir"], "github-keys")

    def keys(login):
        cache_file = os.path.join(cache_dir, f"{login}.keys")
        error = None
        if fetch:
            url = cluster["github_keys_url"].replace("{login}", login)
            try:
                with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - https URL from pillar
                    text = response.read(65536).decode("utf-8", "replace")
                found = [line.strip() for line in text.splitlines() if line.strip()]
                good = [line for line in found if not ccc_settings.check_pubkeys(line)]
                _write_file_atomic(cache_file, "\n".join(good) + "\n", 0o644)
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
    node = ccc_containers.node_settings(ccc, minion_id)
    cluster = ccc_containers.cluster_settings(ccc)
    try:
        docker_gid = grp.getgrnam("docker").gr_gid
    except KeyError:
        docker_gid = None
    return ccc_containers.NodeFacts(
        name=node["name"],
        compute_devices=node["compute_devices"],
        docker_gid=docker_gid,
        host_timezone_files=[p for p in ("/etc/timezone", "/etc/localtime") if os.path.exists(p)],
        image_lookup=image_lookup_for(client, pull),
        github_keys=github_keys_for(cluster, fetch),
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
    cluster = cluster or ccc_containers.cluster_settings(ccc)
    record, _ = ccc_containers.container_record(ccc, stack, check=False)
    settings_text = settings_error = last_good = None
    if record and record.get("USER_EMAIL") and ccc_containers.EMAIL_PATTERN.match(str(record["USER_EMAIL"])):
        paths = ccc_containers.settings_paths(cluster, record)
        try:
            settings_text = ccc_settings.read_settings_file(paths["settings_file"])
        except ccc_settings.SettingsError as exc:
            settings_error = str(exc)
        last_good = _read_json(paths["last_good_file"])
    if stored is None:
        stored = stored_settings(cluster)
    taken = ccc_containers.taken_subdomains(ccc, stored, except_stack=stack)
    return ccc_containers.resolve_container(
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


def is_managed(attrs):
    """True when a container carries ccc-salt's managed-by label."""
    labels = (attrs.get("Config") or {}).get("Labels") or {}
    return labels.get(ccc_containers.MANAGED_BY_LABEL) == ccc_containers.MANAGED_BY_VALUE


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
    client.api.remove_container(attrs["Id"], v=True, force=True)


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
        "device_ids": [i for r in requests for i in (r.get("DeviceIDs") or [])],
        "runtime": host.get("Runtime") if host.get("Runtime") not in ("runc", None) else None,
    }


def spec_diff(old, new):
    """
    A readable diff between an existing container and the wanted spec; password labels masked.

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
                if name == ccc_containers.SPEC_HASH_LABEL:
                    continue
                was, will = (before or {}).get(name), after.get(name)
                if was != will:
                    if any(marker in name for marker in SECRET_LABEL_MARKERS):
                        was, will = ("***" if was else was), ("***" if will else will)
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
    return diff


def ensure_directories(directories):
    """
    Create missing directories with their owner and mode; existing ones are left as they are.

    Parents are never created: a missing parent is a storage root (an NFS share or a local
    dataset) that is not mounted, and creating it would hide user data on the wrong disk.
    Returns the list of created paths; raises ``FileNotFoundError`` naming the missing root.

    CLI Example:

    .. code-block:: bash

        salt-call state.apply containers  # creates the homes this way
    """
    created = []
    for entry in directories:
        path = entry["path"]
        if os.path.isdir(path):
            continue
        if not os.path.isdir(os.path.dirname(path)):
            raise FileNotFoundError(f"{os.path.dirname(path)} does not exist on this node (storage not mounted?)")
        try:
            os.mkdir(path, entry["mode"])
        except FileExistsError:
            continue
        uid, gid = entry["owner"]
        os.chown(path, uid, gid)
        os.chmod(path, entry["mode"])
        created.append(path)
    return created


def _write_file_atomic(path, text, mode, owner=None):
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    # A fresh, unpredictable name opened with O_EXCL: nothing planted in advance (a FIFO, a
    # symlink, a hard link) can be opened in its place.
    temporary = os.path.join(directory, f".{os.path.basename(path)}.ccc-tmp-{os.getpid()}-{secrets.token_hex(8)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        os.write(fd, text.encode("utf-8"))
        if owner:
            os.fchown(fd, *owner)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    try:
        os.replace(temporary, path)
    except OSError:
        os.unlink(temporary)
        raise


def _write_new_file(path, text, mode, owner):
    """Create ``path`` only if nothing (not even a dangling symlink) is there."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    except FileExistsError:
        return False
    try:
        os.write(fd, text.encode("utf-8"))
        os.fchown(fd, *owner)
    finally:
        os.close(fd)
    return True


def _messages_part(report):
    return report.partition("\nmessages:\n")[2]


def write_feedback(resolution, outcome, owner, changed=True):
    """
    Write ``<STACK_NAME>.deploy`` beside the user's settings file.

    After a run that changed nothing the report is kept unless its messages differ, so a no-op
    apply writes nothing and the user still sees what last happened. The file is replaced
    atomically; a symlink planted there is replaced, never followed.

    CLI Example:

    .. code-block:: bash

        salt-call state.apply containers  # writes these reports
    """
    paths = resolution.get("paths")
    # The settings folder is user-controlled: never write through a symlink planted in its place.
    if not paths or os.path.islink(paths["settings_dir"]) or not os.path.isdir(paths["settings_dir"]):
        return False
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    text, body = ccc_containers.feedback_report(resolution, outcome, when)
    try:
        # Non-blocking, no symlinks, regular files only: a FIFO planted here must not hang the run.
        fd = os.open(paths["feedback_file"], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise FileNotFoundError
            existing = os.read(fd, 1 << 20).decode("utf-8").split("\n", 1)[-1]
        finally:
            os.close(fd)
        if not changed and (existing == body or _messages_part(existing) == _messages_part(body)):
            return False
    except (OSError, UnicodeDecodeError):
        pass
    try:
        _write_file_atomic(paths["feedback_file"], text, 0o644, owner)
    except OSError as exc:
        # Best effort: whatever the user put in the way (a folder, say) only costs them the report.
        log.warning("cannot write %s: %s", paths["feedback_file"], exc)
        return False
    return True


def apply_resolution(client, cluster, resolution, test=False):
    """
    Make Docker match one resolution. Returns ``{"result", "changes", "comment"}``.

    ``run``: create or recreate (only when the spec hash changed; the new container is created
    before the old one is removed, so a failing create leaves the old one running), start it if
    stopped, reattach missing networks. ``remove``: remove the managed container, purge the
    stack's data if asked. ``hold``: change nothing and fail with the reasons.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.deploy box1 test=True
    """
    stack = resolution["stack"]
    owner = (cluster["nfs_user"]["uid"], cluster["nfs_user"].get("gid", cluster["nfs_user"]["uid"]))
    notes = list(resolution["notes"])
    attrs = _inspect(client, stack)
    if attrs is not None and not is_managed(attrs):
        return _failure(f"a container named {stack!r} exists but is not managed by ccc-salt; not touching it")

    if resolution["action"] == "hold":
        if not test:
            write_feedback(resolution, "NOT deployed: " + resolution["reason"], owner)
        problems = resolution["admin_errors"] or [resolution["reason"]]
        return _failure("; ".join(problems + notes))

    if resolution["action"] == "remove":
        return _apply_remove(client, cluster, resolution, attrs, owner, test)

    spec = resolution["spec"]
    changes = {}
    if test:
        if attrs is None:
            changes["created"] = {"image": spec["image"], "networks": spec["networks"], "gpus": spec["device_ids"]}
        elif _labels(attrs).get(ccc_containers.SPEC_HASH_LABEL) != spec["labels"][ccc_containers.SPEC_HASH_LABEL]:
            changes["recreated"] = spec_diff(spec_of_container(attrs), spec)
        elif not attrs["State"].get("Running"):
            changes["started"] = True
        comment = f"{stack}: would be {', '.join(changes) or 'left as it is'} ({resolution['reason']})"
        return {"result": None if changes else True, "changes": changes, "comment": _join(comment, notes)}

    try:
        # The user can rename and replace anything inside their own folder (/storage/user is rw):
        # a symlink there would make Docker bind-mount, or this node write into, its target.
        user_dir = resolution["paths"]["user_dir"]
        linked = [d["path"] for d in resolution["directories"]
                  if os.path.dirname(d["path"]) == user_dir and os.path.islink(d["path"])]
        if linked:
            raise PermissionError(f"a symbolic link where a folder belongs, refusing to use it: {', '.join(linked)}")
        created_dirs = ensure_directories(resolution["directories"])
        missing = [m["source"] for m in spec["mounts"] if not os.path.exists(m["source"])]
        if missing:
            raise FileNotFoundError(f"missing on this node (storage not mounted?): {', '.join(missing)}")
    except (FileNotFoundError, PermissionError) as exc:
        write_feedback(resolution, "NOT deployed: the node's storage is not ready (the admins were told)", owner)
        return _failure(f"{stack}: {exc}")
    if created_dirs:
        changes["directories"] = created_dirs
    paths = resolution["paths"]
    if resolution.get("default_settings_text") and _write_new_file(
        paths["settings_file"], resolution["default_settings_text"], 0o644, owner
    ):
        changes["settings_file"] = f"wrote the default {paths['settings_file']}"
    if resolution.get("settings_to_store") is not None:
        if _read_json(paths["last_good_file"]) != resolution["settings_to_store"]:
            _write_file_atomic(paths["last_good_file"], json.dumps(resolution["settings_to_store"], sort_keys=True), 0o600)

    try:
        outcome = _apply_run(client, spec, attrs, changes)
    except docker.errors.APIError as exc:
        message = f"Docker refused the container, nothing was changed: {exc.explanation or exc}"
        resolution = dict(resolution, user_messages=resolution["user_messages"] + [message])
        write_feedback(resolution, "NOT deployed: " + message, owner)
        return _failure(f"{stack}: {message}", changes)
    write_feedback(resolution, outcome, owner, changed=bool(changes))
    comment = f"{stack}: {outcome} ({resolution['reason']})"
    if resolution["settings_status"] == "rejected":
        notes.append("user settings rejected: " + "; ".join(resolution["user_messages"][1:]))
    return {"result": True, "changes": changes, "comment": _join(comment, notes)}


def _apply_run(client, spec, attrs, changes):
    wanted_hash = spec["labels"][ccc_containers.SPEC_HASH_LABEL]
    if attrs is not None and _labels(attrs).get(ccc_containers.SPEC_HASH_LABEL) == wanted_hash:
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

    new_name, old_name = f"{spec['name']}.ccc-new", f"{spec['name']}.ccc-old"
    for leftover_name in (new_name, old_name):
        leftover = _inspect(client, leftover_name)
        if leftover is not None and is_managed(leftover):
            client.api.remove_container(leftover["Id"], v=True, force=True)
    created = client.api.create_container(name=new_name, **create_kwargs(client, spec))
    try:
        for network in spec["networks"][1:]:
            client.api.connect_container_to_network(created["Id"], network)
    except docker.errors.APIError:
        client.api.remove_container(created["Id"], v=True, force=True)
        raise
    if attrs is None:
        try:
            client.api.rename(created["Id"], spec["name"])
            client.api.start(created["Id"])
        except docker.errors.APIError:
            client.api.remove_container(created["Id"], v=True, force=True)
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
        client.api.remove_container(created["Id"], v=True, force=True)
        client.api.rename(attrs["Id"], spec["name"])
        if was_running:
            client.api.start(attrs["Id"])
        raise
    client.api.remove_container(attrs["Id"], v=True, force=True)
    changes["recreated"] = spec_diff(spec_of_container(attrs), spec)
    return "recreated with the new settings"


def _apply_remove(client, cluster, resolution, attrs, owner, test):
    stack = resolution["stack"]
    changes = {}
    if attrs is not None:
        changes["removed"] = {"reason": resolution["reason"]}
        if not test:
            _stop_and_remove(client, attrs)
    if resolution.get("purge"):
        doomed = purge_paths(cluster, resolution)
        existing = [path for path in doomed if os.path.lexists(path)]
        if existing:
            changes["purged"] = existing
            if not test:
                for path in existing:
                    _remove_path(path)
    if resolution["reason"].startswith("DISABLED") and not test and not resolution.get("purge"):
        write_feedback(resolution, "removed: the administrators disabled this container", owner)
    verb = "would be" if test else "was"
    comment = f"{stack}: not on this node ({resolution['reason']})"
    if changes:
        comment = f"{stack}: {verb} {' and '.join(changes)} ({resolution['reason']})"
    return {"result": None if (test and changes) else True, "changes": changes, "comment": comment}


def _remove_path(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def purge_paths(cluster, resolution):
    """
    The paths PURGE_USER_DATA deletes for one stack: its home (unless another active stack of
    the user shares it), its settings files and its last accepted settings. Never the user's
    whole tree, never anything outside the user's directories.

    CLI Example:

    .. code-block:: bash

        salt-call state.apply containers test=True  # lists them under "purged"
    """
    record = resolution["record"]
    stack = record["STACK_NAME"]
    paths = resolution["paths"]
    user_dir = os.path.realpath(paths["user_dir"])
    storage = record.get("STORAGE_NAME") or stack
    candidates = [
        os.path.join(paths["settings_dir"], f"{stack}{suffix}")
        for suffix in (".yml", ".deploy", ".status", ".env-backup")
    ]
    if storage not in resolution.get("storage_in_use", []):
        candidates.append(os.path.join(paths["user_dir"], storage))
    safe = [p for p in candidates if os.path.realpath(os.path.dirname(p)).startswith(user_dir)]
    # The image keeps ~/.cache and ~/.services of this container under <ssd>/<email>/<STACK_NAME>.
    safe.append(os.path.join(cluster["mount_points"]["local"]["ssd_data"], record["USER_EMAIL"], stack))
    safe.append(paths["last_good_file"])
    return safe


def _labels(attrs):
    return (attrs.get("Config") or {}).get("Labels") or {}


def _failure(comment, changes=None):
    return {"result": False, "changes": changes or {}, "comment": comment}


def _join(comment, notes):
    return comment if not notes else comment + "; " + "; ".join(notes)


def managed_containers(client):
    """
    Map STACK_NAME -> container attrs summary for every ccc-salt container on this engine.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.managed
    """
    found = {}
    label_filter = f"{ccc_containers.MANAGED_BY_LABEL}={ccc_containers.MANAGED_BY_VALUE}"
    for summary in client.api.containers(all=True, filters={"label": label_filter}):
        stack = (summary.get("Labels") or {}).get(ccc_containers.STACK_LABEL)
        if stack:
            found[stack] = summary
    return found


def remove_orphans_from(client, known_stacks, test=False):
    """
    Remove managed containers whose STACK_NAME is no longer in pillar. Data is never touched.

    CLI Example:

    .. code-block:: bash

        salt-call state.apply containers  # the ccc-containers-orphans state runs this
    """
    removed = []
    for stack, summary in sorted(managed_containers(client).items()):
        if stack in known_stacks:
            continue
        removed.append(stack)
        if not test:
            attrs = _inspect(client, summary["Id"])
            if attrs is not None:
                _stop_and_remove(client, attrs)
    return removed


def _mount_points():
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        return {
            line.split()[4].encode().decode("unicode_escape") for line in handle
        }


def reconcile_private_mounts(cluster, wanted, test=False):
    """
    Bind-mount each user's live private groups under ``<user_data>/<email>/private/<group>`` and
    unmount the groups no container of that user on this node has any more. Only bind mounts
    whose source is under ``private_data`` are ever unmounted. Returns the changes.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.private_mounts test=True
    """
    nfs = cluster["mount_points"]["nfs"]
    owner = (cluster["nfs_user"]["uid"], cluster["nfs_user"].get("gid", cluster["nfs_user"]["uid"]))
    mounted = _mount_points()
    changes = {"mounted": [], "unmounted": []}
    user_root = nfs["user_data"]
    emails = set(wanted)
    prefix = os.path.join(user_root, "")
    for point in mounted:
        parts = point[len(prefix):].split("/") if point.startswith(prefix) else []
        if len(parts) == 3 and parts[1] == "private":
            emails.add(parts[0])
    for email in sorted(emails):
        private_dir = os.path.join(user_root, email, "private")
        groups = wanted.get(email, [])
        for group in groups:
            target = os.path.join(private_dir, group)
            if target in mounted:
                continue
            changes["mounted"].append(target)
            if test:
                continue
            if not os.path.isdir(private_dir) or os.path.islink(private_dir):
                raise FileNotFoundError(f"{private_dir} is missing or a symbolic link; not mounting {group}")
            if not os.path.isdir(target):
                os.mkdir(target, 0o755)
                os.chown(target, *owner)
            _run_mount(["mount", "--bind", os.path.join(nfs["private_data"], group), target])
        for point in sorted(p for p in mounted if os.path.dirname(p) == private_dir):
            if os.path.basename(point) in groups:
                continue
            changes["unmounted"].append(point)
            if not test:
                _run_mount(["umount", point])
                try:
                    os.rmdir(point)
                except OSError:
                    pass
    return {key: value for key, value in changes.items() if value}


def _run_mount(command):
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    if result.returncode != 0:
        raise OSError(f"{' '.join(command[:2])} failed: {result.stderr.strip()}")


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
        labels={ccc_containers.MANAGED_BY_LABEL: ccc_containers.MANAGED_BY_VALUE},
    )
    return "created"


# --------------------------------------------------------------------------------------------
# Salt-facing wrappers


def _client():
    key = "ccc_docker.client"
    if key not in __context__:
        node = ccc_containers.node_settings(_ccc(), __grains__["id"])
        __context__[key] = docker.DockerClient(base_url=node["docker_url"], version="1.41", timeout=120)
    return __context__[key]


def _ccc():
    return ccc_containers.pillar_ccc(__pillar__)


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
    Resolve one container for this node (read-only unless ``pull`` is true).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.plan box1
    """
    ccc = _ccc()
    return _plan(ccc, ccc_containers.cluster_settings(ccc), name, pull)


def redact(resolution):
    """
    A copy of a resolution fit for display: HTTP basic-auth passwords are masked.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_containers.resolve box1
    """
    shown = json.loads(json.dumps(resolution))
    for http in ((shown.get("record") or {}).get("FRP_PORTS") or {}).get("HTTP") or []:
        if isinstance(http, dict) and "pass" in http:
            http["pass"] = "***"
    for name in ((shown.get("spec") or {}).get("labels") or {}):
        if any(marker in name for marker in SECRET_LABEL_MARKERS):
            shown["spec"]["labels"][name] = "***"
    return shown


def deploy(name, test=False):
    """
    Deploy (or remove, when it does not belong here) one container on this node.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.deploy box1 test=True
    """
    ccc = _ccc()
    cluster = ccc_containers.cluster_settings(ccc)
    resolution = _plan(ccc, cluster, name, pull=not test)
    return apply_resolution(_client(), cluster, resolution, test=test)


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
    Remove the ccc-salt container ``name`` from this node (never its data).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.remove box1 test=True
    """
    attrs = _inspect(_client(), name)
    if attrs is None:
        return {"result": True, "changes": {}, "comment": f"{name} is not on this node"}
    if not is_managed(attrs):
        return _failure(f"a container named {name!r} exists but is not managed by ccc-salt; not touching it")
    if not test:
        _stop_and_remove(_client(), attrs)
    return {"result": None if test else True, "changes": {"removed": name},
            "comment": f"{name} {'would be' if test else 'was'} removed"}


def remove_orphans(test=False):
    """
    Remove ccc-salt containers whose STACK_NAME is gone from pillar.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.remove_orphans test=True
    """
    known = {e.get("STACK_NAME") for e in _ccc().get("containers") or [] if isinstance(e, dict)}
    return remove_orphans_from(_client(), known, test=test)


def ensure_host_keys(keys_dir, test=False):
    """
    Generate the SSH host keys the containers of this node share, where none exist yet.

    The directory is root-only (0700) and each private key 0600: the containers mount it
    read-only, so users never get to write or replace them. The sshd role installs one
    cluster-wide key set at the same place; existing keys are never touched. Returns the key
    types generated (or that would be).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.sshd_host_keys test=True
    """
    missing = [kind for kind in ("rsa", "ecdsa", "ed25519")
               if not os.path.exists(os.path.join(keys_dir, f"ssh_host_{kind}_key"))]
    if test or not missing:
        return missing
    os.makedirs(keys_dir, mode=0o700, exist_ok=True)
    os.chmod(keys_dir, 0o700)
    for kind in missing:
        path = os.path.join(keys_dir, f"ssh_host_{kind}_key")
        subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", f"ccc-salt {kind} host key", "-f", path],
                       check=True, capture_output=True, timeout=120)
        os.chmod(path, 0o600)
    return missing


def sshd_host_keys(test=False):
    """
    Make sure this node has the SSH host keys its containers mount at ``/home/.sshd/keys``.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.sshd_host_keys test=True
    """
    cluster = ccc_containers.cluster_settings(_ccc())
    keys_dir = os.path.join(cluster["mount_points"]["local"]["sshd_data"], ".sshd", "keys")
    return ensure_host_keys(keys_dir, test=test)


def private_mounts(test=False):
    """
    Reconcile the live private data mounts of the users with containers on this node.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.private_mounts test=True
    """
    ccc = _ccc()
    cluster = ccc_containers.cluster_settings(ccc)
    stacks = [stack for stack, summary in managed_containers(_client()).items() if summary.get("State") == "running"]
    return reconcile_private_mounts(cluster, ccc_containers.wanted_private_mounts(ccc, stacks), test=test)


def network_present(name, test=False):
    """
    Ensure the Docker network ``name`` exists (definition from ``ccc:cluster:networks``).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_docker.network_present claims
    """
    cluster = ccc_containers.cluster_settings(_ccc())
    return ensure_network(_client(), name, (cluster.get("networks") or {}).get(name) or {}, test=test)
