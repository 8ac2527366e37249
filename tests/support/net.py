"""Small network helpers shared by tests."""

import socket
import time


def connect(address, port, deadline=10.0):
    """A TCP connection to ``address:port``, retried until ``deadline`` s pass (a listener a test
    has just started in a container may not be up yet)."""
    end = time.monotonic() + deadline
    while True:
        try:
            return socket.create_connection((address, port), timeout=5)
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.1)
