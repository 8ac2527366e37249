"""Private Docker daemons, one per simulated node, for integration tests.

``start_dockerd()`` runs a dockerd that shares nothing mutable with the host's
own daemon or with other test daemons:

* API socket ``<base_dir>/<name>/docker.sock``, ``--data-root
  <base_dir>/<name>/data``, log ``<base_dir>/<name>/dockerd.log`` and an empty
  ``--config-file`` (so ``/etc/docker/daemon.json`` is ignored).
* ``--exec-root /run/ccc-test-<name>`` (short, because containerd and the shims
  put unix sockets below it) holding ``--pidfile`` as ``dockerd.pid``.  The
  daemon therefore starts its own containerd, and the pidfile makes a second
  daemon for the same name refuse to start.  dockerd runs in its own session,
  so it outlives the test process unless ``stop()`` is called.
* Networking: ``--bridge cccbr-<name> --iptables=false``.  dockerd 20.10
  rejects ``--bridge`` together with ``--bip`` ("mutually exclusive"), and
  ``--bip`` alone reconfigures the shared ``docker0``; so the bridge is created
  here with ``ip link add cccbr-<name> type bridge`` and given ``bridge_cidr``
  (gateway address plus prefix), and dockerd derives the default network's
  subnet from it.  ``--iptables=true`` is not usable side by side: every
  daemon flushes the shared DOCKER / DOCKER-ISOLATION chains when it starts,
  deleting the port mappings and isolation rules of every other daemon,
  including the system one.  Because the host's FORWARD policy is DROP and
  br_netfilter is loaded, two ``ACCEPT`` rules (``-i``/``-o cccbr-<name>``,
  tagged with the comment ``ccc-test-<name>``) are inserted instead, so
  containers can reach each other and other test bridges; there is no NAT to
  the outside.  Published ports still work through docker-proxy.  Bridges of
  user-defined networks need ``Dockerd.allow_forwarding(iface)`` for the
  same reason.  ``--bridge=none`` must not be used: such a daemon deletes
  ``docker0``.

Everything network-related is shared by all daemons on the host: a node name
names the bridge and the exec root, so it is limited to 9 characters of
``[a-z0-9-]`` (interface names have 15), and user-defined networks of
different nodes need distinct subnets and bridge names.

Fake NVIDIA support: dockerd registers its built-in ``nvidia`` device driver
(used for ``device_requests``) only when an executable called
``nvidia-container-runtime-hook`` is on its PATH at start-up.  For such a
request it adds ``NVIDIA_VISIBLE_DEVICES=<comma-joined device_ids>`` to the
container's environment and the OCI prestart hook ``[<hook>, "prestart"]``.
With ``fake_nvidia=True`` a fake hook, standing in for the real one from the
NVIDIA container toolkit, is written to
``<base_dir>/<name>/fake-nvidia/bin/nvidia-container-runtime-hook`` and that
directory is put first on dockerd's PATH.  The fake reads the OCI state JSON
from stdin, appends ``argv=<argv> bundle=<bundle path>`` to
``<base_dir>/<name>/fake-nvidia/calls.log`` and exits 0; no device nodes or
driver libraries are injected.

Needs root, ``dockerd``, ``ip`` and ``iptables``.  Plain Python (docker SDK
and ``support.locks``), so it can be imported from a pytest conftest.  Starts
of one node are serialized by a file lock next to its folder, so two
pytest-xdist workers asking for it at once share one daemon.
"""

from __future__ import annotations

import ipaddress
import json
import os
import pathlib
import re
import shlex
import signal
import subprocess
import time
from typing import List, Optional, Sequence

import docker
import requests

from support import locks

HOOK_NAME = "nvidia-container-runtime-hook"
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,8}$")
_MAX_SOCKET_PATH = 107  # sizeof(sockaddr_un.sun_path) - 1 on Linux


class Dockerd:
    """Handle on a private dockerd (started here or found running).

    Attributes: ``name``, ``url`` (``unix://...``), ``node_dir``
    (``<base_dir>/<name>``), ``log_path``, ``bridge`` (interface name),
    ``bridge_cidr``, ``gateway`` (bridge address), ``exec_root``, ``pidfile``,
    ``calls_log`` (fake hook log, ``None`` without fake NVIDIA) and
    ``reused`` (True when an already running daemon was adopted instead of
    started).
    """

    def __init__(self, name: str, node_dir: pathlib.Path, bridge_cidr: str,
                 fake_nvidia: bool, reused: bool,
                 proc: Optional[subprocess.Popen] = None) -> None:
        self.name = name
        self.node_dir = node_dir
        self.url = "unix://%s" % (node_dir / "docker.sock")
        self.log_path = node_dir / "dockerd.log"
        self.bridge = "cccbr-" + name
        self.bridge_cidr = bridge_cidr
        self.gateway = str(ipaddress.ip_interface(bridge_cidr).ip)
        self.exec_root = pathlib.Path("/run/ccc-test-" + name)
        self.pidfile = self.exec_root / "dockerd.pid"
        self.calls_log = (node_dir / "fake-nvidia" / "calls.log"
                          if fake_nvidia else None)
        self.reused = reused
        self._proc = proc

    def __repr__(self) -> str:
        return "Dockerd(name=%r, url=%r, reused=%r)" % (
            self.name, self.url, self.reused)

    def __enter__(self) -> "Dockerd":
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def client(self, timeout: int = 120) -> docker.DockerClient:
        """Return a new docker SDK client for this daemon (caller closes it)."""
        return docker.DockerClient(base_url=self.url, timeout=timeout)

    def pid(self) -> Optional[int]:
        """PID of the node's running dockerd, or None if none runs.

        A handle whose own process has died (a test killed it and another handle started the
        node's daemon again) answers for the daemon running now: its pidfile names it. Else
        ``stop()`` on the old handle would skip the kill yet delete the running daemon's
        bridges, leaving a daemon whose containers cannot start."""
        if self._proc is not None and self._proc.poll() is None:
            return self._proc.pid
        return _owner_of(self.pidfile, str(self.pidfile))

    def containerd_pid(self) -> Optional[int]:
        """PID of the containerd the node's dockerd started, or None if none lives."""
        return _owner_of(self.exec_root / "containerd" / "containerd.pid",
                         str(self.exec_root / "containerd" / "containerd.toml"))

    def allow_forwarding(self, iface: str) -> None:
        """Let the host forward traffic from and to ``iface``.

        Needed for the bridge of every user-defined network of this daemon
        whose containers must talk to each other or to other nodes: dockerd
        runs with ``--iptables=false`` and the host's FORWARD policy is DROP.
        ``stop()`` removes these rules again.
        """
        _allow_forwarding(self.name, iface)

    def stop(self, timeout: float = 30) -> None:
        """Stop the daemon and remove its bridge and firewall rules.

        Sends SIGTERM (dockerd then stops its containers and its containerd)
        and waits up to ``timeout`` seconds; after that SIGKILLs dockerd, its
        containerd, and the shims and container processes left behind.  Then
        unmounts whatever is still mounted below the data and exec roots.
        The bridges of user-defined networks are deleted too (dockerd
        recreates them on its next start).  Data root and logs are kept.
        Safe to call more than once.
        """
        bridges = [self.bridge] + _network_bridges(self.url)
        pid = self.pid()
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            if not self._wait_exit(pid, timeout):
                self._kill_leftovers(pid)
        # A killed daemon leaves mounts behind (container rootfs, netns, and
        # the self bind mount of the data root, which the next daemon would
        # then keep for good).
        for top in (self.node_dir / "data", self.exec_root):
            _unmount_below(top)
        _remove_forwarding(self.name)
        for bridge in bridges:
            if _link_exists(bridge):
                _run(["ip", "link", "del", bridge])

    def _wait_exit(self, pid: int, timeout: float) -> bool:
        if self._proc is not None and self._proc.pid == pid:
            try:
                self._proc.wait(timeout)
                return True
            except subprocess.TimeoutExpired:
                return False
        return _gone(pid, timeout)

    def _kill_leftovers(self, pid: int) -> None:
        """SIGKILL dockerd, its containerd, its shims and their children."""
        _kill(pid)
        if self._proc is not None:
            self._proc.wait()
        containerd = self.containerd_pid()
        if containerd is not None:
            _kill(containerd)
        address = str(self.exec_root / "containerd" / "containerd.sock")
        for shim in _pids_with_arg(address):
            for child in _children(shim):
                _kill(child)
            _kill(shim)


def start_dockerd(name: str, base_dir: pathlib.Path, bridge_cidr: str,
                  fake_nvidia: bool = True, timeout: float = 30,
                  extra_args: Sequence[str] = ()) -> Dockerd:
    """Start (or adopt) the private dockerd of node ``name``.

    ``bridge_cidr`` is the bridge's own address with prefix, e.g.
    ``"10.231.1.1/24"``; containers get addresses from that subnet.
    ``extra_args`` are appended to the dockerd command line (for instance
    ``--default-address-pool`` to keep user-defined networks of different
    nodes apart).  If a daemon already answers on
    ``<base_dir>/<name>/docker.sock`` it is returned with ``reused=True``
    (its bridge address and fake-NVIDIA setting must match), so a developer
    can keep daemons running between test runs.  Raises ``ValueError`` for
    bad arguments and ``RuntimeError`` when the daemon cannot be started
    within ``timeout`` seconds (the message ends with the log tail).
    """
    if not _NAME_RE.match(name):
        raise ValueError("node name %r must match %s (bridge names are "
                         "limited to 15 characters)" % (name, _NAME_RE.pattern))
    iface = ipaddress.ip_interface(bridge_cidr)
    if (iface.version != 4 or iface.network.prefixlen > 30
            or iface.ip in (iface.network.network_address,
                            iface.network.broadcast_address)):
        raise ValueError("bridge_cidr %r must be an IPv4 host address with "
                         "prefix, e.g. 10.231.1.1/24" % bridge_cidr)
    node_dir = pathlib.Path(base_dir).resolve() / name
    if len(str(node_dir / "docker.sock")) > _MAX_SOCKET_PATH:
        raise ValueError("socket path under %s is too long for a unix socket"
                         % node_dir)
    node_dir.mkdir(parents=True, exist_ok=True)
    # Two pytest-xdist workers (or sessions) asking for the same node: one starts it, the other
    # then finds it answering and adopts it.
    with locks.exclusive(node_dir.parent / (name + ".start.lock")):
        return _start_or_adopt(name, node_dir, bridge_cidr, fake_nvidia, timeout, extra_args)


def _start_or_adopt(name: str, node_dir: pathlib.Path, bridge_cidr: str, fake_nvidia: bool,
                    timeout: float, extra_args: Sequence[str]) -> Dockerd:
    """The body of ``start_dockerd``, run while holding the node's start lock."""
    if fake_nvidia:
        _write_fake_hook(node_dir / "fake-nvidia")
    handle = Dockerd(name, node_dir, bridge_cidr, fake_nvidia, reused=True)
    if _ping(handle.url):
        _check_reusable(handle, fake_nvidia)
        _allow_forwarding(name, handle.bridge)
        return handle

    running = handle.pid()
    if running is not None:
        raise RuntimeError(
            "a dockerd for node %r is already running (pid %d: %s) but does "
            "not answer at %s" % (name, running, _cmdline(running), handle.url))
    _await_orphan_containerd(handle)
    # Neither pidfile names a live daemon now, but dockerd and its containerd
    # supervisor take any existing pid (zombies included, e.g. under a PID 1
    # that does not reap, or a pid the kernel has since given to another
    # process) for a live daemon.
    for stale in (handle.pidfile, handle.exec_root / "containerd" / "containerd.pid"):
        stale.unlink(missing_ok=True)

    _setup_bridge(handle.bridge, bridge_cidr)
    _allow_forwarding(name, handle.bridge)
    config_file = node_dir / "daemon.json"
    config_file.write_text("{}\n")
    cmd = [
        "dockerd",
        "--host", handle.url,
        "--data-root", str(node_dir / "data"),
        "--exec-root", str(handle.exec_root),
        "--pidfile", str(handle.pidfile),
        "--config-file", str(config_file),
        "--bridge", handle.bridge,
        "--iptables=false",
        *extra_args,
    ]
    env = dict(os.environ)
    if fake_nvidia:
        env["PATH"] = "%s:%s" % (node_dir / "fake-nvidia" / "bin",
                                 env.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"))
    with open(handle.log_path, "ab") as log:
        log.write(("--- %s %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%S"),
                                    shlex.join(cmd))).encode())
        log.flush()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    handle = Dockerd(name, node_dir, bridge_cidr, fake_nvidia, reused=False,
                     proc=proc)
    deadline = time.monotonic() + timeout
    while not _ping(handle.url):
        if proc.poll() is not None or time.monotonic() > deadline:
            reason = ("exited with status %s" % proc.returncode
                      if proc.poll() is not None
                      else "did not answer within %ss" % timeout)
            handle.stop(timeout=10)
            raise RuntimeError("dockerd for node %r %s; log %s:\n%s" % (
                name, reason, handle.log_path, _tail(handle.log_path)))
        time.sleep(0.2)
    return handle


# Seconds a dead dockerd's containerd gets to finish dying before it is killed.
ORPHAN_WAIT = 10.0


def _await_orphan_containerd(handle: Dockerd) -> None:
    """Until the containerd of the node's dead dockerd is gone.

    dockerd starts its containerd with a parent-death signal, so a SIGKILLed
    dockerd takes it along, but not at once: under load it was still alive
    when the next dockerd started, which adopted it, could not connect and
    exited ("timeout waiting for containerd to start"; a CI failure of
    tests/integration/test_node_dockerd_handles.py). One still alive after
    ``ORPHAN_WAIT`` seconds is killed: the containers keep running in their
    shims, and the new daemon's containerd takes them over."""
    pid = handle.containerd_pid()
    if pid is None or _gone(pid, ORPHAN_WAIT):
        return
    _kill(pid)
    if _gone(pid, ORPHAN_WAIT):
        return
    raise RuntimeError("the containerd (pid %d) of node %r's dead dockerd did "
                       "not exit" % (pid, handle.name))


def _write_fake_hook(fake_dir: pathlib.Path) -> None:
    """Write the fake nvidia-container-runtime-hook (see module docstring)."""
    bin_dir = fake_dir / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    hook = bin_dir / HOOK_NAME
    hook.write_text(
        "#!/bin/sh\n"
        "# Fake nvidia-container-runtime-hook from tests/support/dockerd.py.\n"
        "# Stands in for the NVIDIA container toolkit hook: it only records\n"
        "# the call; no devices or driver libraries are injected.\n"
        "PATH=/usr/sbin:/usr/bin:/sbin:/bin\n"
        "state=$(cat)\n"
        "bundle=$(printf '%%s\\n' \"$state\" |"
        " sed -n 's/.*\"bundle\" *: *\"\\([^\"]*\\)\".*/\\1/p')\n"
        "printf 'argv=%%s bundle=%%s\\n' \"$0 $*\" \"$bundle\" >> %s\n"
        "exit 0\n" % shlex.quote(str(fake_dir / "calls.log")))
    hook.chmod(0o755)


def _check_reusable(handle: Dockerd, fake_nvidia: bool) -> None:
    """Raise RuntimeError if a running daemon differs from what was asked."""
    client = docker.DockerClient(base_url=handle.url, timeout=10)
    try:
        net = client.api.inspect_network("bridge")
    finally:
        client.close()
    configs = (net.get("IPAM") or {}).get("Config") or [{}]
    gateway = configs[0].get("Gateway")
    bridge = (net.get("Options") or {}).get("com.docker.network.bridge.name")
    if (gateway, bridge) != (handle.gateway, handle.bridge):
        raise RuntimeError(
            "dockerd at %s uses bridge %s/%s, not %s/%s; stop it first" % (
                handle.url, bridge, gateway, handle.bridge, handle.gateway))
    pid = handle.pid()
    if pid is not None:
        hook_dir = str(handle.node_dir / "fake-nvidia" / "bin")
        path = _environ(pid).get("PATH", "").split(":")
        if (hook_dir in path) != fake_nvidia:
            raise RuntimeError("dockerd at %s was started with fake_nvidia=%s;"
                               " stop it first" % (handle.url, not fake_nvidia))


def _setup_bridge(bridge: str, cidr: str) -> None:
    """Create ``bridge`` if needed and make ``cidr`` its only IPv4 address."""
    if not _link_exists(bridge):
        _run(["ip", "link", "add", "name", bridge, "type", "bridge"])
    info = json.loads(_run(["ip", "-j", "-4", "addr", "show", "dev", bridge]))
    have = ["%s/%s" % (a["local"], a["prefixlen"])
            for entry in info for a in entry.get("addr_info", [])]
    if have != [str(ipaddress.ip_interface(cidr))]:
        _run(["ip", "-4", "addr", "flush", "dev", bridge])
        _run(["ip", "addr", "add", cidr, "dev", bridge])
    _run(["ip", "link", "set", bridge, "up"])


def _allow_forwarding(name: str, iface: str) -> None:
    """Insert FORWARD ACCEPT rules for ``iface`` tagged ``ccc-test-<name>``."""
    for direction in ("-i", "-o"):
        rule = ["FORWARD", direction, iface, "-m", "comment", "--comment",
                "ccc-test-" + name, "-j", "ACCEPT"]
        if subprocess.run(["iptables", "-w", "-C", *rule],
                          stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode != 0:
            _run(["iptables", "-w", "-I", *rule])


def _remove_forwarding(name: str) -> None:
    """Delete every FORWARD rule tagged ``ccc-test-<name>``."""
    for line in _run(["iptables", "-w", "-S", "FORWARD"]).splitlines():
        args = shlex.split(line)
        if args[:1] == ["-A"] and "ccc-test-" + name in args:
            _run(["iptables", "-w", "-D", *args[1:]])


def _network_bridges(url: str) -> List[str]:
    """Bridge interfaces of the user-defined bridge networks at ``url``."""
    if not _ping(url):
        return []
    client = docker.DockerClient(base_url=url, timeout=10)
    try:
        networks = client.api.networks(filters={"driver": "bridge"})
    finally:
        client.close()
    names = []
    for net in networks:
        options = net.get("Options") or {}
        if options.get("com.docker.network.bridge.default_bridge") == "true":
            continue
        names.append(options.get("com.docker.network.bridge.name")
                     or "br-" + net["Id"][:12])
    return names


def _ping(url: str) -> bool:
    """True if a Docker API answers at ``url``."""
    try:
        client = docker.DockerClient(base_url=url, timeout=5)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (docker.errors.DockerException,
            requests.exceptions.RequestException, OSError):
        return False


def _run(cmd: List[str]) -> str:
    """Run ``cmd``; return stdout, raise RuntimeError with stderr on failure."""
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    if res.returncode != 0:
        raise RuntimeError("%s failed: %s" % (shlex.join(cmd),
                                              res.stderr.strip()))
    return res.stdout


def _link_exists(ifname: str) -> bool:
    return os.path.exists("/sys/class/net/" + ifname)


def _read_pid(path: pathlib.Path) -> Optional[int]:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _owner_of(pidfile: pathlib.Path, own_arg: str) -> Optional[int]:
    """The live process ``pidfile`` names, if it is still the daemon that wrote it.

    A daemon killed without cleanup leaves its pidfile, and the kernel reuses
    pids: a stale file may name a shim of another daemon. Only a process whose
    command line holds ``own_arg`` (the node's own pidfile or containerd config
    path) counts, so nothing else is adopted, reported or killed."""
    pid = _read_pid(pidfile)
    if pid is None or not _alive(pid) or own_arg not in _argv(pid):
        return None
    return pid


def _argv(pid: int) -> List[str]:
    try:
        raw = pathlib.Path("/proc/%d/cmdline" % pid).read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _gone(pid: int, timeout: float) -> bool:
    """Whether ``pid`` exits (or is a zombie) within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        stat = pathlib.Path("/proc/%d/stat" % pid).read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _cmdline(pid: int) -> str:
    return shlex.join(_argv(pid)) or "?"


def _environ(pid: int) -> dict:
    try:
        raw = pathlib.Path("/proc/%d/environ" % pid).read_bytes()
    except OSError:
        return {}
    pairs = (item.decode(errors="replace").partition("=")
             for item in raw.split(b"\0") if item)
    return {key: value for key, _, value in pairs}


def _pids_with_arg(arg: str) -> List[int]:
    """PIDs whose command line contains the exact argument ``arg``."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                args = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if arg.encode() in args:
                found.append(int(entry.name))
    return found


def _children(ppid: int) -> List[int]:
    """Direct children of ``ppid``."""
    kids = []
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == ppid:
                kids.append(int(entry.name))
    return kids


def _unmount_below(top: pathlib.Path) -> None:
    """Lazily unmount every mount point at or below ``top``, deepest first."""
    prefix = str(top).rstrip("/")
    points = []
    with open("/proc/self/mountinfo") as mountinfo:
        for line in mountinfo:
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)),
                           line.split()[4])
            if point == prefix or point.startswith(prefix + "/"):
                points.append(point)
    for point in sorted(set(points), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)


def _tail(path: pathlib.Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
