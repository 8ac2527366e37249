"""Test nodes that boot systemd: containers of ``ccc-test/node:1`` on the host's system dockerd.

Tests of the cluster roles need nodes where ``apt-get``, ``systemctl``, ``sysctl``, ``iptables``
and a Docker engine restarted by ``daemon.json`` changes are real. A ``SysNode`` is such a node:

* **systemd is PID 1** (``tests/images/node/ccc-node-init`` prepares the mounts, then becomes
  systemd; ``SIGRTMIN+3`` shuts it down cleanly). ``restart()`` is a reboot: ``/run`` and
  ``/run/lock`` are tmpfs, so they start empty, and enabled units start as at boot.
* **Privileged, nearly**: the host's capability bounding set may lack ``CAP_SYS_RESOURCE`` (it does
  on the CI machines), and then Docker cannot start any ``--privileged`` container ("unable to
  apply caps"). A node gets instead every capability except that one and ``CAP_SYS_TIME`` (the
  clock is the host's: systemd-timedated setting a timezone in a node once moved the host's clock
  by the zone's offset), no seccomp filter, unmasked
  ``/proc``, all devices and its own cgroup namespace; ``ccc-node-init`` remounts ``/sys`` and the
  cgroup v1 hierarchies read-write. ``/proc/sys`` outside ``net`` stays read-only: ``vm.*``,
  ``fs.*`` and most ``kernel.*`` sysctls are the host kernel's (``host_sysctl=True`` lifts this;
  the test then changes the host and must undo it).
* **A nested dockerd works** once a role installs ``docker.io``: ``/var/lib/docker`` is the Docker
  volume ``ccc-node-<name>-docker`` (ext4 below, so overlay2 works), kept across restarts.
* **Network**: its own namespace on the internal bridge network ``ccc-test-nodes``
  (``10.234.0.0/24``, the host is ``10.234.0.1``): nodes reach each other and the host, nothing
  outside this machine. Hostname = node name.
* **Mounts, read-only**: this checkout and its ``.venv`` at their own paths, the venv's base Python
  (pyenv) at its own path, so ``<repo>/.venv/bin/salt-call`` runs in the node; the test apt
  repository (``tests/support/aptrepo.py``) at ``aptrepo.NODE_PATH``. The node has no apt sources
  of its own: a test or a role adds ``aptrepo.SOURCE_LINE`` (key: ``aptrepo.NODE_KEY``, or the
  repository's armored key from pillar).
* **Salt**: ``salt_call()`` runs masterless with a config made by ``scripts/make-local-config.py``
  in the node (file roots ``<repo>/salt``; pillar roots ``PILLAR_ROOT`` first, filled with
  ``write_pillar()``, then ``pillar/`` and ``sample-pillar/``: a ``top.sls`` written there replaces
  the generic one). ``start_minion()`` runs a salt-minion as an enabled systemd unit instead.

Nodes are containers named ``ccc-node-<name>`` with the label ``ccc-test.sysnode``; they outlive
the test process unless ``remove()`` is called (the fixtures in ``tests/nodes/conftest.py`` do).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import shlex
import subprocess
import sys
import time

import yaml

from support import aptrepo, secrets

REPO = pathlib.Path(__file__).resolve().parents[2]
VENV = pathlib.Path(sys.prefix)
BASE_PYTHON = pathlib.Path(sys.base_prefix)
IMAGE = "ccc-test/node:1"
NETWORK = "ccc-test-nodes"
SUBNET = "10.234.0.0/24"
HOST_IP = "10.234.0.1"
LABEL = "ccc-test.sysnode"
PILLAR_ROOT = "/srv/ccc-test-pillar"
LOCAL_CONFIG = "/etc/ccc-test/salt-local"
MINION_UNIT = "ccc-test-salt-minion.service"


class NodeCommandError(AssertionError):
    """A command in a node failed; the message carries its output."""


@dataclasses.dataclass
class SaltCall:
    """A ``salt-call`` in a node: exit status, the returned data (``--out json``), raw output."""

    returncode: int
    data: object
    stdout: str
    stderr: str

    def states(self):
        """A state run's results by state ID; the output is the failure message when there are none."""
        assert isinstance(self.data, dict), self.stdout[-3000:] + self.stderr[-3000:]
        return {key.split("_|-")[1]: value for key, value in self.data.items()}


def failed(states):
    """``{state ID: comment}`` of the states of a run that did not succeed."""
    return {key: value["comment"] for key, value in states.items() if value["result"] is not True}


def changed(states):
    """``{state ID: changes}`` of the states of a run that changed something."""
    return {key: value["changes"] for key, value in states.items() if value["changes"]}


def ensure_network():
    """The test bridge network (internal: no route out of this machine); created once."""
    found = subprocess.run(["docker", "network", "inspect", NETWORK], capture_output=True, text=True)
    if found.returncode == 0:
        return
    created = subprocess.run(
        ["docker", "network", "create", "--internal", "--subnet", SUBNET, "--gateway", HOST_IP,
         "-o", "com.docker.network.bridge.name=ccc-testnodes", "--label", LABEL, NETWORK],
        capture_output=True, text=True)
    if created.returncode and "already exists" not in created.stderr:  # another session won
        raise RuntimeError(f"cannot create the test network {NETWORK}: {created.stderr.strip()}")


class SysNode:
    """One test node (see the module docstring); ``start()`` makes a fresh one."""

    def __init__(self, name, repo: aptrepo.AptRepo, host_sysctl=False, volumes=()):
        """``volumes``: ``(host path, node path)`` pairs bound read-write (storage several nodes
        share, standing in for NFS)."""
        self.name = name
        self.container = f"ccc-node-{name}"
        self.volume = f"{self.container}-docker"
        self.repo = repo
        self.host_sysctl = host_sysctl
        self.volumes = tuple(volumes)

    def start(self, timeout=120):
        """Replace any node of this name, boot a fresh one and wait until systemd is running."""
        self.remove()
        ensure_network()
        argv = ["docker", "run", "--detach", "--name", self.container, "--hostname", self.name,
                "--label", LABEL, "--network", NETWORK,
                "--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE", "--cap-drop", "SYS_TIME",
                "--security-opt", "seccomp=unconfined", "--security-opt", "systempaths=unconfined",
                "--device-cgroup-rule", "a *:* rwm", "--cgroupns", "private",
                "--tmpfs", "/run:exec,mode=755", "--tmpfs", "/run/lock",
                "--volume", f"{self.volume}:/var/lib/docker"]
        for path in self._host_paths():
            argv += ["--volume", f"{path}:{path}:ro"]
        argv += ["--volume", f"{self.repo.path}:{aptrepo.NODE_PATH}:ro"]
        for source, target in self.volumes:
            argv += ["--volume", f"{source}:{target}"]
        if self.host_sysctl:
            argv += ["--env", "CCC_NODE_SYSCTL=host"]
        _docker(argv + [IMAGE])
        self.wait_ready(timeout)
        return self

    @staticmethod
    def _host_paths():
        """The checkout, the venv and its base Python; nested paths only once."""
        paths = []
        for path in sorted({REPO, VENV.resolve(), BASE_PYTHON.resolve()}):
            if not any(path.is_relative_to(p) for p in paths):
                paths.append(path)
        return paths

    def exec(self, cmd, check=True, timeout=120, input=None):
        """Run ``cmd`` (argv list, or a string for ``bash -c``) as root in the node."""
        argv = ["bash", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        docker = ["docker", "exec"] + (["-i"] if input is not None else []) + [self.container]
        try:
            result = subprocess.run(docker + argv, input=input, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise NodeCommandError(f"{self.name}: {shlex.join(argv)} still running after {timeout} s") from exc
        if check and result.returncode:
            raise NodeCommandError(f"{self.name}: {shlex.join(argv)} exited {result.returncode}\n"
                                   f"stdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-4000:]}")
        return result

    def wait_ready(self, timeout=120, allow_degraded=False):
        """Wait until systemd has finished booting; a failed unit fails this (unless allowed)."""
        deadline = time.monotonic() + timeout
        state = "not started"
        while time.monotonic() < deadline:
            if not self.running():
                logs = subprocess.run(["docker", "logs", "--tail", "30", self.container],
                                      capture_output=True, text=True)
                raise NodeCommandError(f"{self.name} stopped while booting:\n{logs.stdout}{logs.stderr}")
            left = max(1, int(deadline - time.monotonic()))
            result = self.exec(["timeout", str(left), "systemctl", "is-system-running", "--wait"],
                               check=False, timeout=left + 10)
            state = result.stdout.strip() or result.stderr.strip()
            if state == "running" or (state == "degraded" and allow_degraded):
                return state
            if state == "degraded":
                raise NodeCommandError(f"{self.name} booted with failed units:\n{self.failed_units()}")
            time.sleep(0.5)  # systemd not up yet ("offline", no bus)
        raise NodeCommandError(f"{self.name}: systemd not running after {timeout} s (state: {state})\n"
                               f"{self.failed_units()}")

    def failed_units(self):
        """``systemctl --failed`` and the journal of each failed unit, for error messages."""
        listing = self.exec("systemctl --failed --no-legend --plain | awk '{print $1}'", check=False).stdout
        parts = []
        for unit in listing.split():
            journal = self.exec(["journalctl", "-u", unit, "-n", "15", "--no-pager"], check=False).stdout
            parts.append(f"--- {unit}\n{journal}")
        return "\n".join(parts) or "(no failed units)"

    def running(self):
        """Whether the node's container runs."""
        found = subprocess.run(["docker", "inspect", "--format", "{{.State.Running}}", self.container],
                               capture_output=True, text=True)
        return found.stdout.strip() == "true"

    def restart(self, timeout=120):
        """A reboot: systemd shuts down, the container restarts, wait until it is running again."""
        _docker(["docker", "restart", "--time", "60", self.container])
        return self.wait_ready(timeout)

    def remove(self):
        """Remove the node's container and its Docker volume (no error when absent)."""
        subprocess.run(["docker", "rm", "--force", "--volumes", self.container], capture_output=True)
        subprocess.run(["docker", "volume", "rm", "--force", self.volume], capture_output=True)

    def ip(self):
        """The node's address on the test network."""
        return _docker(["docker", "inspect", "--format",
                        f'{{{{(index .NetworkSettings.Networks "{NETWORK}").IPAddress}}}}', self.container]).strip()

    def write_file(self, path, text, mode="0644"):
        """Write ``text`` to the absolute ``path`` in the node (parents created)."""
        script = 'mkdir -p "$(dirname "$1")" && cat >"$1" && chmod "$2" "$1"'
        self.exec(["sh", "-c", script, "sh", path, mode], input=text)

    def write_pillar(self, relpath, text):
        """Write a pillar file below PILLAR_ROOT, searched before pillar/ and sample-pillar/."""
        rel = pathlib.PurePosixPath(relpath)
        if rel.is_absolute() or ".." in rel.parts:
            raise ValueError(f"pillar path must stay below {PILLAR_ROOT}: {relpath}")
        self.write_file(f"{PILLAR_ROOT}/{rel}", text)

    def import_pillar_key(self, keyring, workdir):
        """Give the node's masterless Salt the private key of ``keyring`` (``support.secrets``), so
        a pillar encrypted to it (``secrets.secrets_sls``, written with ``write_pillar``) decrypts."""
        exported = secrets.export_secret_key(keyring, pathlib.Path(workdir) / "key.asc")
        self.salt_call("test.true")  # writes the local config (and its gpg_keydir)
        self.write_file("/tmp/ccc-test-key.asc", pathlib.Path(exported).read_text(), mode="0600")
        self.exec(f"gpg --batch --quiet --homedir {LOCAL_CONFIG}/gpgkeys --import /tmp/ccc-test-key.asc"
                  " && rm /tmp/ccc-test-key.asc")

    def add_apt_source(self):
        """Point the node's apt at the test repository (as a role would) and update its lists."""
        self.write_file("/etc/apt/sources.list.d/ccc-test.list", aptrepo.SOURCE_LINE + "\n")
        self.exec("apt-get -q update", timeout=120)

    def salt_call(self, *args, check=True, timeout=600):
        """``salt-call --local`` in the node with the project's states and modules (module docstring)."""
        config = shlex.join([str(VENV / "bin" / "python"), str(REPO / "scripts" / "make-local-config.py"),
                             "--config-dir", LOCAL_CONFIG, "--id", self.name, "--pillar-root", PILLAR_ROOT])
        call = shlex.join([str(VENV / "bin" / "salt-call"), "--config-dir", LOCAL_CONFIG, "--local",
                           "--out", "json", "--retcode-passthrough", *map(str, args)])
        script = f"mkdir -p {PILLAR_ROOT} && {{ [ -f {LOCAL_CONFIG}/minion ] || {config} >/dev/null; }} && {call}"
        result = self.exec(script, check=False, timeout=timeout)
        try:
            data = json.loads(result.stdout)["local"] if result.stdout.strip() else None
        except (ValueError, KeyError, TypeError):
            data = None
        if check and (result.returncode or data is None):
            raise NodeCommandError(f"{self.name}: salt-call {shlex.join(map(str, args))} exited {result.returncode}\n"
                                   f"stdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-4000:]}")
        return SaltCall(result.returncode, data, result.stdout, result.stderr)

    def start_minion(self, master_ip, master_port, publish_port, settings=None):
        """Run a salt-minion (id = node name) for the master at ``master_ip`` as an enabled unit.

        ``/etc/salt/minion`` gets the master's address and ports plus ``settings``; the master must
        still accept the key (``tests/nodes/conftest.py``: ``accept_minion``)."""
        config = {"id": self.name, "master": master_ip, "master_port": int(master_port),
                  "publish_port": int(publish_port), "acceptance_wait_time": 1, **(settings or {})}
        self.write_file("/etc/salt/minion", yaml.safe_dump(config, sort_keys=False))
        self.write_file(f"/etc/systemd/system/{MINION_UNIT}", _MINION_UNIT.format(venv=VENV))
        self.exec(["systemctl", "daemon-reload"])
        self.exec(["systemctl", "enable", "--now", MINION_UNIT])


def accept_minion(master, minion_id, timeout=60):
    """Accept ``minion_id``'s key once it is pending, then wait until it answers ``test.ping``."""
    keys = master.salt_key_cli()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listed = keys.run("--list", "all").data or {}
        if minion_id in listed.get("minions", []):
            break  # salt-factories' masters accept a pending key by themselves (their auth event handler)
        if minion_id in listed.get("minions_pre", []):
            keys.run("--accept", minion_id, "--yes")
            break
        time.sleep(0.5)
    else:
        raise NodeCommandError(f"{minion_id}'s key never reached the master: {keys.run('--list', 'all').data}")
    client = master.salt_cli(timeout=10)
    while time.monotonic() < deadline:
        if client.run("test.ping", minion_tgt=minion_id).data is True:
            return
        time.sleep(1)
    raise NodeCommandError(f"{minion_id} accepted but does not answer test.ping within {timeout} s")


# Like Salt's own unit: KillMode=process, so a minion restarting itself keeps its running jobs.
_MINION_UNIT = """\
[Unit]
Description=salt-minion of a ccc-salt test node (the host's .venv, read-only)
After=network.target

[Service]
ExecStart={venv}/bin/salt-minion --config-dir /etc/salt
KillMode=process
Restart=on-failure

[Install]
WantedBy=multi-user.target
"""


def _docker(argv):
    """Run a docker CLI command; its stderr is the error."""
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"{shlex.join(argv)} failed: {result.stderr.strip()}")
    return result.stdout
