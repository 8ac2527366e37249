"""
The Docker API a third-party role container gets (frpc, Patroller, the Portainer agent): never
the engine's socket, but a socket of its own behind a filtering proxy that passes only the calls
that container needs. Pure: profiles, paths, the haproxy configuration and the systemd units as
text; ``_states/ccc_service_container.py`` writes and starts them.

Why so: any process that can ``connect()`` to ``docker.sock`` can make every API call (a
read-only bind changes nothing on a socket), and ``POST /containers/create`` with a bind of ``/``
is root on the host. frpc holds the FRP token, Patroller answers unauthenticated on the claims
network every compute container joins: a bug in either image would be host root.

How: Debian's ``haproxy`` (the approach of the widely used docker-socket-proxy: one HTTP
frontend whose ACLs on method and path, with the ``/v1.xx`` version prefix optional, allow the
listed calls and answer everything else 403), one instance per role container, run by systemd
as the unprivileged ``haproxy`` user in group ``docker``. The listening socket belongs to a
socket unit (``ccc-docker-api@<name>.socket``), not to haproxy: the container binds that socket
file at ``/var/run/docker.sock`` (where every client looks), and since a bind mount holds the
inode, a proxy restart must not replace the file; systemd keeps it, haproxy gets it as fd 3. The
socket unit starts before dockerd at boot (``sockets.target``), so Docker never finds the bind
source missing (it would make a folder there).
"""

import re
from urllib.parse import urlparse

TARGET = "/var/run/docker.sock"
ENGINE_SOCKETS = ("/var/run/docker.sock", "/run/docker.sock")
SOCKET_DIR = "/run/ccc-docker-api"
CONFIG_DIR = "/etc/ccc-docker-api"
UNIT_DIR = "/etc/systemd/system"
UNIT = "ccc-docker-api"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")

VERSION = "(/v[0-9]+[.][0-9]+)?"
ID = "[A-Za-z0-9][A-Za-z0-9_.-]*"
IMAGE = "[A-Za-z0-9][A-Za-z0-9_.:@/-]*"
EVENTS = f"^{VERSION}/events$"

# What each role container's program calls (ccc-companions.md B.3, C.3; the agent's own start).
WATCH = ["_ping", "version", "containers/json", f"containers/{ID}/json"]
PROFILES = {
    # docker-gen: version, info, the container list, each container, the network list, events
    "frpc": WATCH + ["info", "networks", "events"],
    # Patroller: a process's container by id (labels = the user), the containers' addresses
    "patroller": WATCH,
    # the Portainer agent as a read-only dashboard: its own start (info, its container, its
    # networks) and the lists and inspects Portainer shows; no logs, files, exports, exec,
    # swarm join tokens (GET /swarm), secrets or configs
    "portainer-read-only": WATCH + [
        "info", "events", "system/df", f"containers/{ID}/top", f"containers/{ID}/stats",
        "images/json", f"images/{IMAGE}/json", f"images/{IMAGE}/history", "networks", f"networks/{ID}",
        "volumes", f"volumes/{ID}", "nodes", f"nodes/{ID}", "services", f"services/{ID}", "tasks",
        f"tasks/{ID}"],
    # the Portainer agent as the management agent it is: every call (host root for whoever
    # controls Portainer; the admin's explicit choice, ccc:docker:portainer_agent:docker_api)
    "portainer-full": None,
}
READ_METHODS = "GET HEAD"
DENIED = '{"message": "ccc-salt: this Docker API call is not allowed for this role container"}'


class BadProfile(ValueError):
    """An unknown allowlist name, a bad container name or an engine the proxy cannot reach."""


def check(name, profile):
    if profile not in PROFILES:
        raise BadProfile(f"{name}: docker_api must be one of {', '.join(PROFILES)}, not {profile!r}")
    if not NAME.match(name):
        raise BadProfile(f"{name!r} cannot name a Docker API proxy (letters, digits, _ . - only)")


def socket_path(name):
    """The proxy socket of role container ``name`` on the node (root-only folder, mode 0600)."""
    return f"{SOCKET_DIR}/{name}.sock"


def config_path(name):
    return f"{CONFIG_DIR}/{name}.cfg"


def socket_unit(name):
    return f"{UNIT}@{name}.socket"


def service_unit(name):
    return f"{UNIT}@{name}.service"


def bind(name):
    """The bind ``wanted`` adds for a container with a proxy: its socket at ``TARGET``."""
    return {"source": socket_path(name), "target": TARGET, "read_only": True}


def engine_address(docker_url):
    """haproxy's ``server`` address for the node's engine (``ccc:node:docker_url``)."""
    url = urlparse(docker_url or "unix:///var/run/docker.sock")
    if url.scheme in ("unix", "http+unix") and url.path.startswith("/"):
        return url.path
    if url.scheme in ("tcp", "http") and url.hostname and url.port:
        return f"{url.hostname}:{url.port}"
    raise BadProfile(f"the Docker API proxy reaches the engine over unix:// or tcp:// only, not {docker_url!r}")


def _allow_lines(profile):
    paths = PROFILES[profile]
    if paths is None:
        return ["    # every call: the admin chose the full Docker API for this container",
                "    http-request allow"]
    lines = [f"    acl read_method method {READ_METHODS}"]
    lines += [f"    acl allowed_path path -m reg ^{VERSION}/{path}$" for path in paths]
    lines += ["    http-request allow if read_method allowed_path"]
    return lines


def config_text(name, profile, docker_url):
    """The haproxy configuration of one container's proxy: listen on fd 3 (the socket unit's),
    refuse paths with dot segments or empty segments, allow the profile's calls, answer every
    other call 403 with a JSON message, stream ``/events`` without an idle limit."""
    check(name, profile)
    engine = engine_address(docker_url)
    return "\n".join([
        f"# Docker API proxy of role container {name} (profile {profile}); written by ccc-salt, do not edit",
        "global",
        "    log stdout format raw local0 info",
        "    maxconn 64",
        "",
        "defaults",
        "    mode http",
        "    log global",
        "    option httplog",
        "    option http-buffer-request",
        "    timeout connect 5s",
        "    timeout http-request 10s",
        "    timeout http-keep-alive 10s",
        "    timeout client 24h",
        "    timeout server 10m",
        "    timeout tunnel 1h",
        "",
        "frontend docker_api",
        "    bind fd@3",
        "    acl odd_path path -m sub /. //",
        f"    http-request deny deny_status 403 content-type application/json string '{DENIED}' if odd_path",
        *_allow_lines(profile),
        f"    http-request deny deny_status 403 content-type application/json string '{DENIED}'",
        f"    use_backend engine_stream if {{ path -m reg {EVENTS} }}",
        "    default_backend engine",
        "",
        "backend engine",
        f"    server engine {engine}",
        "",
        "backend engine_stream",
        "    timeout server 24h",
        f"    server engine {engine}",
        "",
    ])


SOCKET_UNIT_TEXT = f"""# Written by ccc-salt: the Docker API socket of role container %i (_utils/ccc_docker_api.py)
[Unit]
Description=Docker API allowlist socket of role container %i (ccc-salt)
Before=docker.service

[Socket]
ListenStream={SOCKET_DIR}/%i.sock
SocketUser=root
SocketGroup=root
SocketMode=0600
DirectoryMode=0700
RemoveOnStop=yes

[Install]
WantedBy=sockets.target
"""

SERVICE_UNIT_TEXT = f"""# Written by ccc-salt: the Docker API proxy of role container %i (_utils/ccc_docker_api.py)
[Unit]
Description=Docker API allowlist proxy (haproxy) of role container %i (ccc-salt)
Requires={UNIT}@%i.socket
After={UNIT}@%i.socket

[Service]
ExecStart=/usr/sbin/haproxy -db -f {CONFIG_DIR}/%i.cfg
User=haproxy
Group=haproxy
SupplementaryGroups=docker
Restart=always
RestartSec=1
NoNewPrivileges=yes
CapabilityBoundingSet=
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
"""
