"""The test harness's node daemons (tests/support/dockerd.py) survive a test that kills one.

A handle whose own dockerd was killed and started again through another handle (the engine
restart and hostile-path tests do this) must stop the daemon that runs now when asked to stop,
never delete that daemon's bridges under it: a node1 left running without its bridges failed
every later test of the node1 group in CI (containers could not start: "could not find bridge")."""

import os
import signal
import subprocess
import sys

import pytest

from support import dockerd
from support.dockerd import _network_bridges, _read_pid
from support.nodes import node_dockerd

pytestmark = pytest.mark.docker


def links():
    return subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout


def test_an_old_handle_stops_the_running_daemon_and_the_next_one_has_its_bridges(node1_dockerd):
    node1_dockerd.stop()
    first = node_dockerd("node1")  # started by this handle: it holds the daemon's process
    assert not first.reused
    bridges = _network_bridges(first.url)
    assert first.bridge in links()

    # Someone kills the node's daemon the hard way and another handle starts it again.
    os.kill(_read_pid(first.pidfile), signal.SIGKILL)
    second = node_dockerd("node1")
    running = _read_pid(second.pidfile)
    assert first.pid() == running  # the old handle answers for the daemon running now

    first.stop()
    assert second.pid() is None  # stopped, not left running without its bridges

    third = node_dockerd("node1")
    assert third.client().ping()
    for bridge in [third.bridge] + bridges:
        assert f" {bridge}:" in links(), bridge


def test_a_stale_pidfile_naming_another_process_is_neither_adopted_nor_killed(node1_dockerd):
    """A daemon killed without cleanup leaves its pidfile, and the kernel hands its pid to some
    other process (in CI: a container shim of the host's dockerd). The harness then refused to
    start the node ("already running ... but does not answer"), and stop() would have killed
    that stranger."""
    node1_dockerd.stop()
    stranger = subprocess.Popen(["sleep", "300"])
    try:
        node1_dockerd.pidfile.write_text("%d\n" % stranger.pid)
        assert node1_dockerd.pid() is None  # the file names a process that is not the daemon

        daemon = node_dockerd("node1")  # starts, where it raised before
        assert not daemon.reused and daemon.client().ping()
        assert stranger.poll() is None

        daemon.stop()
        node1_dockerd.pidfile.write_text("%d\n" % stranger.pid)
        node1_dockerd.stop()
        assert stranger.poll() is None  # stop() left the stranger alone
    finally:
        stranger.kill()
        stranger.wait()
    assert node_dockerd("node1").client().ping()


def test_a_dead_daemons_containerd_still_alive_is_awaited_then_killed(node1_dockerd, monkeypatch):
    """A SIGKILLed dockerd's containerd dies with it, but not at once: in CI the next dockerd
    found it alive, adopted it, could not connect and exited ("timeout waiting for containerd to
    start"). Here a process that keeps living stands in for that containerd (its command line
    names the node's containerd config, as the real one's does)."""
    node1_dockerd.stop()
    toml = node1_dockerd.exec_root / "containerd" / "containerd.toml"
    lingering = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "--config", str(toml)])
    try:
        (node1_dockerd.exec_root / "containerd").mkdir(parents=True, exist_ok=True)
        (node1_dockerd.exec_root / "containerd" / "containerd.pid").write_text("%d" % lingering.pid)
        monkeypatch.setattr(dockerd, "ORPHAN_WAIT", 0.5)
        daemon = node_dockerd("node1")
        assert lingering.wait(timeout=5) == -signal.SIGKILL  # waited for, then killed
        assert not daemon.reused and daemon.client().ping()
    finally:
        if lingering.poll() is None:
            lingering.kill()
            lingering.wait()
