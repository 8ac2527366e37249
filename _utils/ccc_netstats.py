"""
A running container's network counters and live SSH sessions, read from the host side.

The one definition the usage accounting (``ccc_usage.collect``), the active-users listing
(``ccc_usage.active_sessions``) and the GPU exporter's container metrics
(``ccc_container_metrics``) share. Everything comes from the host's procfs of the container's
first process (``State.Pid`` of ``docker inspect``): ``/proc/<pid>/net/route`` names the
interface of each Docker network (the connected route of its subnet), ``/proc/<pid>/net/dev``
gives that interface's rx/tx bytes as the container sees them (what the original CCC read
from ``/sys/class/net`` through ``docker exec``), and ``/proc/<pid>/net/tcp``/``tcp6`` list the
established connections to local port 22. Never ``docker exec``, never a path inside the
container's file system: the user controls both.

The connection tables are the user's to fill (a container can hold 100,000 sockets: 13 MiB of
``net/tcp``, which cost a scrape 1.8 s and 30 MiB when read whole), so each is read in
chunks up to ``MAX_TCP_BYTES`` and only lines naming port 22 are parsed; a table cut there is
reported (``ssh_peers_truncated``: the session count is then a lower bound).

A PID can be reused once the container stops, so the files are read through one descriptor of
``/proc/<pid>`` (a descriptor keeps naming that process, and reading through it fails once it is
gone), its cgroup must name the container, and the container must still have that PID and
start time after the reading (``read_netns``). Plain Python, no Salt, no Docker SDK.
"""

import ipaddress
import os
import socket
import struct

import ccc_process_owners

SSH_PORT = 22
TCP_ESTABLISHED = "01"
# /proc/net/dev and /proc/net/route of one network namespace: a few lines per interface.
MAX_SMALL_FILE = 1 << 20
# Of each connection table (net/tcp, net/tcp6) per read: about 14,000 IPv4 sockets, far more than
# a container's sshd and tools hold; a table read this far is cut and the cut reported.
MAX_TCP_BYTES = 2 << 20
_CHUNK = 1 << 16


class NetnsGone(Exception):
    """The container stopped, restarted or is not the process read: nothing is reported for it."""


# ---------------------------------------------------------------------------------------------
# Parsers of procfs text (the kernel's formats)


def parse_dev(text):
    """``/proc/net/dev`` -> ``{interface: {"rx_bytes", "rx_packets", "tx_bytes", "tx_packets"}}``."""
    counters = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        fields = rest.split()
        if not sep or len(fields) < 16 or not all(field.isdigit() for field in fields[:16]):
            continue  # the two header lines
        values = [int(field) for field in fields[:16]]
        counters[name.strip()] = {"rx_bytes": values[0], "rx_packets": values[1],
                                  "tx_bytes": values[8], "tx_packets": values[9]}
    return counters


def _ipv4(hex_word):
    # The kernel prints an IPv4 address as one 32-bit word in host byte order.
    return socket.inet_ntoa(struct.pack("=I", int(hex_word, 16)))


def _ipv6(hex_words):
    # ... and an IPv6 address as four such words.
    packed = b"".join(struct.pack("=I", int(hex_words[i:i + 8], 16)) for i in range(0, 32, 8))
    return socket.inet_ntop(socket.AF_INET6, packed)


def parse_route(text):
    """``/proc/net/route`` -> ``[{"interface", "destination", "gateway", "mask"}]`` (dotted IPv4)."""
    routes = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        try:
            routes.append({"interface": fields[0], "destination": _ipv4(fields[1]),
                           "gateway": _ipv4(fields[2]), "mask": _ipv4(fields[7])})
        except (ValueError, struct.error):
            continue
    return routes


def _endpoint(text):
    address, _, port = text.partition(":")
    host = _ipv4(address) if len(address) == 8 else _ipv6(address)
    return host, int(port, 16)


def parse_tcp_line(line):
    """One line of ``/proc/net/tcp`` or ``tcp6`` -> ``(local, local_port, remote, remote_port, state)``
    or ``None`` (the header, a malformed line)."""
    fields = line.split()
    if len(fields) < 4 or not fields[0].endswith(":"):
        return None
    try:
        local, local_port = _endpoint(fields[1])
        remote, remote_port = _endpoint(fields[2])
    except (ValueError, struct.error, OSError):
        return None
    return local, local_port, remote, remote_port, fields[3].upper()


def sessions_to_port(lines, port=SSH_PORT):
    """The peers (``"ip:port"``) of the established TCP connections to local ``port``."""
    peers = []
    for line in lines:
        entry = parse_tcp_line(line)
        if entry and entry[4] == TCP_ESTABLISHED and entry[1] == port:
            remote = entry[2].removeprefix("::ffff:") if "." in entry[2] else entry[2]
            peers.append(f"{remote}:{entry[3]}" if ":" not in remote else f"[{remote}]:{entry[3]}")
    return peers


def interface_of(routes, address, prefixlen):
    """The interface of the connected route (no gateway) of ``address/prefixlen``, or ``None``."""
    try:
        network = ipaddress.IPv4Network(f"{address}/{int(prefixlen)}", strict=False)
    except (ValueError, TypeError):
        return None
    for route in routes:
        if (route["gateway"] == "0.0.0.0" and route["mask"] == str(network.netmask)
                and route["destination"] == str(network.network_address)):
            return route["interface"]
    return None


# ---------------------------------------------------------------------------------------------
# Reading one container's network namespace


def networks_of(attrs):
    """The container's Docker networks with an IPv4 address: ``{name: {"address", "prefixlen"}}``."""
    found = {}
    for name, settings in ((attrs.get("NetworkSettings") or {}).get("Networks") or {}).items():
        if (settings or {}).get("IPAddress"):
            found[name] = {"address": settings["IPAddress"], "prefixlen": settings.get("IPPrefixLen") or 0}
    return found


def same_run(before, after):
    """True when inspect data ``after`` is the same run of the same container as ``before``."""
    state_before, state_after = (before or {}).get("State") or {}, (after or {}).get("State") or {}
    return bool(after and state_after.get("Running") and before["Id"] == after.get("Id")
                and state_after.get("Pid") == state_before.get("Pid")
                and state_after.get("StartedAt") == state_before.get("StartedAt"))


def _read_at(dir_fd, path, limit=MAX_SMALL_FILE):
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as handle:
        return handle.read(limit).decode("ascii", "replace")


def peers_at(dir_fd, path, port=SSH_PORT, limit=MAX_TCP_BYTES):
    """
    ``(peers, truncated)`` of a connection table (``sessions_to_port``), read in chunks, at most
    ``limit`` bytes: only lines naming ``port`` are parsed, and ``truncated`` says the table was
    longer (its rest is not read: the kernel makes the text as it is read).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return [], False  # no IPv6 in that namespace: no tcp6 table
    needle = f":{port:04X} ".encode()
    peers, rest, read, truncated = [], b"", 0, False
    with os.fdopen(fd, "rb", buffering=0) as handle:
        while not truncated:
            chunk = handle.read(_CHUNK)
            if not chunk:
                break
            read += len(chunk)
            if read > limit:
                chunk, truncated = chunk[:len(chunk) - (read - limit)], True
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()  # a line's start; its end comes with the next chunk (or was cut)
            peers.extend(sessions_to_port([line.decode("ascii", "replace") for line in lines if needle in line], port))
    if rest and not truncated:
        peers.extend(sessions_to_port([rest.decode("ascii", "replace")], port))
    return peers, truncated


def read_netns(attrs, reinspect, proc_root="/proc"):
    """
    ``{"dev": text, "route": text, "ssh_peers": [...], "ssh_peers_truncated": bool}`` of the
    running container ``attrs`` (inspect data; ``peers_at``); ``reinspect()`` returns its
    inspect data again (``None`` when gone). Raises ``NetnsGone`` when the container is not
    running, or its PID no longer belongs to it.
    """
    state = attrs.get("State") or {}
    pid = state.get("Pid")
    if not state.get("Running") or not isinstance(pid, int) or pid <= 0:
        raise NetnsGone(f"container {attrs.get('Name', '?')} is not running")
    try:
        pid_fd = os.open(os.path.join(proc_root, str(pid)), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise NetnsGone(f"process {pid} is gone: {exc.strerror}") from None
    try:
        # The cgroup of exactly the process the descriptor holds (not whatever has the PID now).
        owners = ccc_process_owners.container_ids_of_pid(pid_fd, "/proc/self/fd")
        if owners and attrs["Id"] not in owners:
            raise NetnsGone(f"process {pid} is no longer the container's")
        (v4, cut4), (v6, cut6) = peers_at(pid_fd, "net/tcp"), peers_at(pid_fd, "net/tcp6")
        read = {"dev": _read_at(pid_fd, "net/dev"), "route": _read_at(pid_fd, "net/route"),
                "ssh_peers": v4 + v6, "ssh_peers_truncated": cut4 or cut6}
        if not same_run(attrs, reinspect()):
            raise NetnsGone(f"container {attrs.get('Name', '?')} stopped or restarted while being read")
        os.stat("net", dir_fd=pid_fd)  # still alive after the check: it was the container's process
    except OSError as exc:
        raise NetnsGone(f"process {pid} went away while being read: {exc.strerror}") from None
    finally:
        os.close(pid_fd)
    return read


def container_usage(attrs, reinspect, proc_root="/proc"):
    """
    A running container's traffic and SSH sessions:
    ``{"networks": {name: {"interface", "rx_bytes", "tx_bytes", ...}}, "ssh_peers": [...],
    "ssh_peers_truncated": bool}`` (``peers_at``: a lower bound when true).
    A network whose interface cannot be found is left out. Raises ``NetnsGone`` (``read_netns``).
    """
    read = read_netns(attrs, reinspect, proc_root)
    routes, counters = parse_route(read["route"]), parse_dev(read["dev"])
    networks = {}
    for name, network in networks_of(attrs).items():
        interface = interface_of(routes, network["address"], network["prefixlen"])
        if interface in counters:
            networks[name] = dict(counters[interface], interface=interface)
    return {"networks": networks, "ssh_peers": read["ssh_peers"], "ssh_peers_truncated": read["ssh_peers_truncated"]}
