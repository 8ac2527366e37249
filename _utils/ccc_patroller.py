"""
The patroller role's rules: the ``claims`` container (Patroller, the GPU claims service compute
containers reach as ``claims``/``reservation``) and its optional web UI, as specs for the generic
``ccc_service_container`` state. Pure: the role's settings, ``ccc:cluster`` and the node's facts
in, checked specs and problems out.

Decisions against the original deployment (ccc-ansible-behaviour §1.12, B20, S13):

* **Not privileged.** Patroller needs ``nvidia-smi`` (the GPUs come through the device request
  and the NVIDIA runtime, not through privileges), host PIDs to read ``/proc/<pid>/cgroup`` of
  GPU processes (``pid_mode: host``; those files are world-readable) and to read containers from
  the Docker API. ``privileged`` would add every device and capability on top, for nothing.
* **Never docker.sock.** Its API is unauthenticated on the claims network every compute
  container joins, so a bug in it must not be host root: it gets its own filtering proxy
  (``docker_api: patroller``: ping, version, the container list and inspect; ``ccc_docker_api``).
* **No ``bridge`` network.** Patroller talks to dockerd over the bound socket, compute containers
  reach it on the claims network and frpc on the proxy network. The default bridge would only
  open it to every container started without a network, and Patroller names a caller by its IP
  across all networks of all containers, so fewer shared networks mean fewer ambiguous callers.
* **Never all GPUs by accident.** The request is the union of the node's device groups; a node
  without groups gets none (``NVIDIA_VISIBLE_DEVICES=void``: the image's CUDA base sets ``all``,
  which the NVIDIA runtime would honour); only ``all_gpus: true`` asks for every GPU.
"""

import json
import os

import ccc_device_groups
import ccc_frp
import ccc_quote
import ccc_role_schema

ROLE = "patroller"
PORT = 80
ALIASES = ["claims", "reservation"]  # ccc-tools' default host is http://claims
USER_LABELS = "ccc-user.email"  # labels ccc-salt puts on every compute container
USER_INFO_LABELS = "ccc-user.name,ccc-user.mentor"
# The original's log limits: 10 MB x 5 files, compressed.
LOG_CONFIG = {"type": "json-file", "config": {"max-size": "10m", "max-file": "5", "compress": "true"}}
PARQUET = "occupancy_data.parquet"
WEBUI_JSON = "web-ui.json"
WEBUI_BINDS = {PARQUET: "/code/occupancy_data.parquet", WEBUI_JSON: "/etc/patroller/web-ui.json"}
USER_TREES = ("nfs", "local")  # ccc:cluster:mount_points sections users write into


def _storage_path(path, cluster, problems):
    """The web UI's folder (the schema made it absolute and normalised) outside every tree users
    can write to."""
    mount_points = cluster.get("mount_points") or {}
    for tree in USER_TREES:
        for key, root in (mount_points.get(tree) or {}).items():
            if isinstance(root, str) and os.path.isabs(root) and \
                    os.path.commonpath([path, os.path.normpath(root)]) in (path, os.path.normpath(root)):
                problems.append(f"ccc:patroller:webui:storage_path {ccc_quote.quote_value(path)} overlaps users' "
                                f"storage ccc:cluster:mount_points:{tree}:{key} ({root}): "
                                "root writes only to admin paths")
                return None
    return path


def _check_webui(webui, cluster, problems):
    """``webui`` settings checked; ``None`` when it is off. Enabled, it needs its image (no public
    one is known), name, subdomain and storage path, and a config JSON can hold."""
    if webui.get("enabled") is not True:
        return None
    for key in ("name", "image", "subdomain", "storage_path"):
        if webui.get(key) is None:
            problems.append(f"ccc:patroller:webui:{key} must be set while the web UI is enabled, got None")
    if problems:
        return None
    checked = {key: webui[key] for key in ("name", "image", "subdomain")}
    checked["storage_path"] = _storage_path(webui["storage_path"], cluster, problems)
    try:
        checked["config_text"] = json.dumps(webui.get("config") or {}, indent=2, sort_keys=True, allow_nan=False) + "\n"
    except (TypeError, ValueError) as exc:
        problems.append(f"ccc:patroller:webui:config must be a mapping of JSON values ({exc})")
    return checked


def check(settings, cluster, schema):
    """
    ``ccc:patroller`` (defaults merged) and ``ccc:cluster`` (``ccc_pillar.cluster_settings``) →
    ``(checked, problems)`` by the role's ``schema`` and the rules that compare values;
    ``checked`` is usable only when ``problems`` is empty. The claims network defaults to
    ``ccc:cluster:claims_network`` (the one every compute container joins).
    """
    problems = ccc_role_schema.problems(ROLE, settings, schema)
    if problems:
        return {}, problems
    checked = {key: settings[key] for key in ("name", "image", "lease", "proxy_network", "all_gpus")}
    network = settings.get("network") or cluster.get("claims_network")
    if not isinstance(network, str) or not network.strip():
        problems.append("no claims network: set ccc:patroller:network or ccc:cluster:claims_network "
                        "(compute containers reach Patroller there)")
    checked["network"] = network
    checked["webui"] = _check_webui(settings["webui"], cluster, problems)
    return checked, problems


def gpus(compute_devices, all_gpus=False):
    """
    The GPUs Patroller watches: ``(device_requests, visible, note)``. One request (driver
    ``nvidia``, capabilities ``[["gpu"]]``) for the union of the node's device groups in their
    order; none for a node without groups; every GPU only when ``all_gpus`` says so. ``visible``
    is the ``NVIDIA_VISIBLE_DEVICES`` value set explicitly; ``note`` says in words what it gets.
    """
    if all_gpus:
        request = {"driver": "nvidia", "device_ids": [], "count": -1, "capabilities": [["gpu"]]}
        return [request], "all", "Patroller gets every GPU of this node (ccc:patroller:all_gpus: true)"
    groups = sorted(compute_devices or {})
    uuids, _ = ccc_device_groups.device_ids_for_groups(groups, compute_devices)
    if not uuids:
        return [], "void", ("Patroller gets no GPU: ccc:node:compute_devices lists none on this node "
                            "(ccc:patroller:all_gpus: true would give it every GPU)")
    request = {"driver": "nvidia", "device_ids": uuids, "count": 0, "capabilities": [["gpu"]]}
    return [request], ",".join(uuids), (f"Patroller watches {len(uuids)} GPU(s) of device groups "
                                        f"{', '.join(groups)}: {', '.join(uuids)}")


def claims_spec(checked, node_name, compute_devices):
    """The ``claims`` container for ``ccc_service_container.running`` (``checked``: ``check``'s)."""
    requests, visible, _ = gpus(compute_devices, checked["all_gpus"])
    # Docker resolves a container's own name on every user-defined network (and newer engines list
    # it among the aliases), so an alias equal to the name is implied, not asked for
    networks = [{"name": checked["network"], "aliases": [a for a in ALIASES if a != checked["name"]]}]
    if checked["proxy_network"] != checked["network"]:
        networks.append({"name": checked["proxy_network"], "aliases": []})
    return {
        "name": checked["name"], "image": checked["image"], "role": ROLE, "hostname": None, "command": None,
        "env": {"PATROLLER_USER_LABELS": USER_LABELS, "PATROLLER_USER_INFO_LABELS": USER_INFO_LABELS,
                "PATROLLER_LEASE": str(checked["lease"]), "NVIDIA_VISIBLE_DEVICES": visible},
        "labels": ccc_frp.service_labels(PORT, f"{node_name}-monitor", "/", auth="monitor", health_check=False),
        "secret_env": {}, "networks": networks,
        "binds": [], "docker_api": "patroller",
        "pid_mode": "host", "privileged": False, "device_requests": requests, "exposed_ports": [PORT],
        "ports": {}, "restart": "always", "log_config": LOG_CONFIG, "extra_hosts": {},
    }


def webui_files(webui):
    """The web UI's folder and files (absolute paths) under its ``storage_path``."""
    folder = webui["storage_path"]
    return {"folder": folder, "parquet": os.path.join(folder, PARQUET), "config": os.path.join(folder, WEBUI_JSON)}


def webui_spec(checked):
    """The ``patroller-webui`` container (Streamlit on port 80), or ``None`` when it is off."""
    webui = checked["webui"]
    if webui is None:
        return None
    files = webui_files(webui)
    return {
        "name": webui["name"], "image": webui["image"], "role": ROLE, "hostname": None, "command": None,
        "env": {"STREAMLIT_SERVER_PORT": str(PORT)},
        "labels": ccc_frp.service_labels(PORT, webui["subdomain"], "/", auth="patroller_webui", health_check=False),
        "secret_env": {}, "networks": [{"name": checked["proxy_network"], "aliases": []}],
        "binds": [{"source": files["parquet"], "target": WEBUI_BINDS[PARQUET], "read_only": False},
                  {"source": files["config"], "target": WEBUI_BINDS[WEBUI_JSON], "read_only": True}],
        "pid_mode": None, "privileged": False, "device_requests": [], "exposed_ports": [PORT],
        "ports": {}, "restart": "always", "log_config": LOG_CONFIG, "extra_hosts": {},
    }


def plan(settings, cluster, node_name, compute_devices, schema):
    """
    Everything the role does on a node: ``{"problems", "gpus" (a sentence), "claims" (spec),
    "webui" (spec or None), "webui_files" (paths or None), "webui_config" (JSON text or None)}``.
    While ``problems`` is not empty nothing else is filled and the role changes nothing.
    """
    checked, problems = check(settings, cluster, schema)
    problems += ccc_device_groups.check_compute_devices(compute_devices)
    result = {"problems": problems, "gpus": None, "claims": None, "webui": None,
              "webui_files": None, "webui_config": None}
    if problems:
        return result
    result["gpus"] = gpus(compute_devices, checked["all_gpus"])[2]
    result["claims"] = claims_spec(checked, node_name, compute_devices)
    if checked["webui"] is not None:
        result["webui"] = webui_spec(checked)
        result["webui_files"] = webui_files(checked["webui"])
        result["webui_config"] = checked["webui"]["config_text"]
    return result


def container_names(settings):
    """The names of both role containers, whatever the settings switch on (for ``clean``)."""
    webui = settings.get("webui") if isinstance(settings.get("webui"), dict) else {}
    return [name for name in (settings.get("name"), webui.get("name")) if isinstance(name, str) and name]


def services(settings, node_id):
    """
    The services the role runs on node ``node_id`` with these settings (for ``ccc.status``): the
    claims container, and the web UI's where it is enabled.
    """
    found = []
    if isinstance(settings.get("name"), str) and settings["name"]:
        found.append({"kind": "container", "name": settings["name"], "role": ROLE})
    webui = settings.get("webui") if isinstance(settings.get("webui"), dict) else {}
    if webui.get("enabled") is True and isinstance(webui.get("name"), str) and webui["name"]:
        found.append({"kind": "container", "name": webui["name"], "role": ROLE})
    return found
