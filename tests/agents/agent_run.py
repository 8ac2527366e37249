"""Helpers for the tests that run the agents for real: a free port, waiting, reading the state file."""

import json
import pathlib
import socket
import time


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate, timeout=15.0, proc=None):
    """The first true value of ``predicate()``; fails after ``timeout`` s or once ``proc`` has exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None:
            assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    raise AssertionError("timed out waiting")


def read_state(path):
    """A JSON file (the fan controller's state), or None while it is missing or half written."""
    try:
        return json.loads(pathlib.Path(path).read_text())
    except (OSError, ValueError):
        return None
