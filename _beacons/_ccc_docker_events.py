"""
The ``ccc_docker`` beacon's event stream: one non-blocking ``GET /events`` on the Docker engine,
filtered to ``die``/``oom`` events of ccc-salt's containers, and which of those are a crash.

Not a beacon itself (Salt never loads ``_``-prefixed files as beacons). What tells a crash from a
stop is the deployment's own rules (``ccc_rules``' labels and STACK_NAME pattern,
``ccc_problems.STOP_EXIT_CODES``), which the beacon asks from ``RULES`` (beacons are loaded
without ``_utils``) and hands over as ``CrashRules``.
"""

import errno
import json
import re
import select
import socket
import urllib.parse

RULES = "ccc_containers.crash_rules"
MAX_HEAD = 16384
MAX_EVENT_BYTES = 65536  # an event line longer than this is dropped (events are a few hundred bytes)


class CrashRules:
    """
    The deployment's rules for telling a crash from a stop (``RULES``: ``ccc_rules``'s managed-by
    and stack labels and STACK_NAME pattern, ``ccc_problems.STOP_EXIT_CODES``), and the events
    request built from them: compute containers that die (ccc-salt's label) or are killed for
    memory; the stream is silent while they run. ``ValueError`` for an answer of another shape.
    """

    def __init__(self, data):
        try:
            self.managed_by = "=".join(data["managed_by"])
            self.stack_label = data["stack_label"]
            self.stack = re.compile(data["stack_pattern"])
            self.stops = frozenset(int(code) for code in data["stop_exit_codes"])
        except (KeyError, TypeError, ValueError, re.error) as exc:
            raise ValueError(f"{RULES} answered {data!r} ({exc})") from None
        self.filter = json.dumps({"type": ["container"], "event": ["die", "oom"], "label": [self.managed_by]},
                                 separators=(",", ":"))
        self.request = (
            "GET /events?filters=" + urllib.parse.quote(self.filter, safe="") + " HTTP/1.1\r\n"
            "Host: docker\r\nUser-Agent: ccc-salt-beacon\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
        ).encode()


def endpoint(url):
    """``(family, address)`` for a Docker URL; ``ValueError`` for one the beacon cannot watch."""
    parsed = urllib.parse.urlsplit(url) if isinstance(url, str) else None
    if parsed is None or parsed.scheme not in ("unix", "tcp", "http"):
        raise ValueError(f"unsupported docker_url {url!r} (unix://, tcp:// or http:// without TLS)")
    if parsed.scheme == "unix":
        if not parsed.path.startswith("/"):
            raise ValueError(f"docker_url {url!r} must name an absolute socket path")
        return socket.AF_UNIX, parsed.path
    if not parsed.hostname or not parsed.port:
        raise ValueError(f"docker_url {url!r} must name a host and a port")
    return socket.AF_INET6 if ":" in parsed.hostname else socket.AF_INET, (parsed.hostname, parsed.port)


class EventStream:
    """
    One ``GET /events`` on the engine, never blocking. ``check()`` returns ``"waiting"`` (no
    answer yet), ``"open"`` (the engine answered 200 and keeps the stream), ``"refused"`` (it
    answered something else) or ``"closed"`` (the connection failed or ended). ``rules`` (a
    ``CrashRules``) make the request and tell a crash from a stop.
    """

    def __init__(self, family, address, rules):
        self.rules = rules
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setblocking(False)
        self.status = "waiting"
        self.head = b""
        self.sent = False
        self.pending = b""  # an event line not complete yet
        self.died = []      # stacks whose container crashed, seen since the last ``take_died``
        code = self.sock.connect_ex(address)
        if code not in (0, errno.EINPROGRESS):
            self.sock.close()
            raise OSError(code, errno.errorcode.get(code, "connect failed"))

    def _send(self):
        """Send the request once the (TCP) connection is up; False while it is still connecting."""
        writable = select.poll()  # not select.select: the minion may hold descriptors above 1024
        writable.register(self.sock, select.POLLOUT)
        if not writable.poll(0):
            return False
        code = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            raise OSError(code, errno.errorcode.get(code, "connect failed"))
        if self.sock.send(self.rules.request) != len(self.rules.request):
            raise OSError(errno.EMSGSIZE, "request not sent whole")
        self.sent = True
        return True

    def _read(self):
        """Everything readable now: bytes, ``b""`` at the end of the stream, ``None`` for nothing."""
        chunks = []
        while True:
            try:
                data = self.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                return b"".join(chunks) or None
            if not data:
                return b""  # the end, even after some data: nothing follows it
            chunks.append(data)

    def check(self):
        if self.status not in ("waiting", "open"):
            return self.status
        try:
            if not self.sent and not self._send():
                return self.status
            data = self._read()
        except OSError:
            data = b""
        if data == b"":
            self.status = "closed"
        elif data and self.status == "waiting":
            self.head += data
            if b"\r\n\r\n" in self.head:
                head, _, rest = self.head.partition(b"\r\n\r\n")
                status_line = head.split(b"\r\n", 1)[0].split()
                self.status = "open" if status_line[1:2] == [b"200"] else "refused"
                self.head = b""
                if self.status == "open":
                    self._events(rest)
            elif len(self.head) > MAX_HEAD:
                self.status = "refused"
        elif data:
            self._events(data)
        return self.status

    def _events(self, data):
        """Container events of the (chunked) stream: each event is one JSON line, so the chunk
        framing (hex sizes, CRLFs) is skipped as lines that are not JSON objects."""
        lines = (self.pending + data).split(b"\n")
        self.pending = lines.pop()
        if len(self.pending) > MAX_EVENT_BYTES:
            self.pending = b""
        for line in lines:
            line = line.strip()
            if line.startswith(b"{"):
                stack = died_stack(line, self.rules)
                if stack and stack not in self.died:
                    self.died.append(stack)

    def take_died(self):
        """The stacks seen crashing since the last call."""
        died, self.died = self.died, []
        return died

    def close(self):
        self.status = "closed"
        self.sock.close()


def died_stack(line, rules):
    """The STACK_NAME of a ``die`` event with an exit code other than a stop's, or an ``oom``
    event, of a ccc-salt container (``rules``: a ``CrashRules``); None for anything else. The
    stack becomes a tag part only when it is a STACK_NAME (the runner checks it again)."""
    try:
        event = json.loads(line)
        attributes = (event.get("Actor") or {}).get("Attributes") or {}
        action = event.get("Action") or event.get("status")
    except (ValueError, AttributeError):
        return None
    stack = attributes.get(rules.stack_label)
    if not isinstance(stack, str) or not rules.stack.fullmatch(stack):
        return None
    if action == "oom" or (action == "die" and _exit_code(attributes.get("exitCode")) not in rules.stops):
        return stack
    return None


def _exit_code(text):
    """A ``die`` event's exit code (Docker sends it as text) as a number; None when it is not one
    (which counts as a crash: only a stop's codes do not)."""
    try:
        return int(text)
    except (TypeError, ValueError):
        return None
