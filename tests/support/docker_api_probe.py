"""Raw Docker API calls over a unix socket, as a compromised role container would make them (stdlib
only: test nodes run it with the checkout's venv Python, ``python docker_api_probe.py SOCKET
CALLS_JSON``, and print the answers as JSON).

``CALLS_JSON`` is a list of ``[method, path, body or null]``; each answer is ``{method, path,
status, body}`` (the body's first 300 characters). ``events(socket, seconds)`` opens
``GET /events`` and yields each event line as it arrives."""

import http.client
import json
import socket
import sys
import time


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=30):
        super().__init__("docker", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


def call(path, method, url, body=None):
    conn = UnixConnection(path)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, url, body=data, headers={"Content-Type": "application/json"} if data else {})
        answer = conn.getresponse()
        text = answer.read().decode(errors="replace")
        return {"method": method, "path": url, "status": answer.status, "body": text[:300]}
    finally:
        conn.close()


def events(path, timeout):
    """Event objects from ``GET /events`` as they arrive (``socket.timeout`` when none comes in time).
    ``since`` one second back: dockerd answers before it subscribes, so an event made right after
    the answer comes from its buffer instead of being missed."""
    conn = UnixConnection(path, timeout=timeout)
    conn.request("GET", f"/events?since={int(time.time()) - 1}")
    answer = conn.getresponse()
    if answer.status != 200:
        raise AssertionError(f"GET /events answered {answer.status}")
    try:
        while True:
            line = answer.readline()
            if not line:
                return
            line = line.strip()
            if line.startswith(b"{"):
                yield json.loads(line)
    finally:
        conn.close()


if __name__ == "__main__":
    calls = json.loads(sys.argv[2])
    print(json.dumps([call(sys.argv[1], method, url, body) for method, url, body in calls]))
