"""A fake dockerd events endpoint on a unix socket, for the Docker beacon's stream: the real
engine's HTTP framing (200, chunked), without an engine."""

import os
import socket
import threading
import time


class SocketEngine:
    """Answers ``GET /events`` on a unix socket like dockerd (200, chunked, silent) and
    records the request lines; ``answer=False`` accepts without answering (a starting dockerd)."""

    def __init__(self, path, answer=True):
        self.path, self.answer, self.requests, self.conns = str(path), answer, [], []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.conns.append(conn)
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(4096)
            self.requests.append(request.split(b"\r\n")[0].decode())
            if self.answer:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n")

    def send(self, payload):
        """One event on every open stream, as one chunk written in two pieces (a reader must
        join them)."""
        chunk = b"%x\r\n" % (len(payload) + 1) + payload + b"\n\r\n"
        for conn in self.conns:
            conn.sendall(chunk[:7])
            time.sleep(0.05)
            conn.sendall(chunk[7:])

    def kill(self):
        """Like SIGKILL: every connection closes at once; the socket file is removed too, so that
        a restarted engine can bind the same path."""
        self.server.close()
        for conn in self.conns:
            conn.close()
        os.unlink(self.path)
