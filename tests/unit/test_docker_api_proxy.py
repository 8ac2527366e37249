"""The Docker API allowlists of role containers (``ccc_docker_api``): the real haproxy (Debian's,
as on the nodes) runs the configuration ccc-salt writes, listening on an inherited fd 3 as under
its systemd socket unit, in front of a recording stand-in engine (a unix-socket HTTP server that
answers 200 and notes each call). What reaches the engine is what the proxy let through: the
calls frpc's docker-gen, Patroller and the Portainer agent make pass, every write and every read
that leaks files, logs or swarm join tokens is answered 403 and never reaches it, and events
stream as they happen. The same attack against a real dockerd, from inside the deployed role
containers, is in tests/nodes/test_frp_client.py, test_patroller.py and test_portainer_agent.py."""

import json
import os
import shutil
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import support.site  # noqa: F401  (puts _utils on the path)
from support.docker_api_probe import call, events

import ccc_docker_api as api  # noqa: E402
import ccc_service_containers as svc  # noqa: E402

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
DENIED = 403

# Writes and dangerous reads, each with what it would do to the host or to users.
ATTACKS = [
    ("POST", "/v1.41/containers/create", {"Image": "x", "HostConfig": {"Binds": ["/:/host"], "Privileged": True}}),
    ("POST", "/containers/create?name=evil", {"Image": "x"}),
    ("POST", "/v1.41/containers/claims/exec", {"Cmd": ["sh"]}),
    ("POST", "/v1.41/exec/abc/start", {}),
    ("DELETE", "/v1.41/containers/claims?force=1", None),
    ("POST", "/v1.41/containers/claims/kill", None),
    ("POST", "/images/create?fromImage=evil", None),
    ("POST", "/v1.41/build", None),
    ("POST", "/v1.41/swarm/init", {}),
    ("GET", "/v1.41/swarm", None),  # join tokens
    ("GET", "/v1.41/secrets", None),
    ("GET", "/v1.41/configs", None),
    ("GET", "/v1.41/containers/claims/archive?path=/", None),  # files of any container
    ("GET", "/v1.41/containers/claims/export", None),
    ("GET", "/v1.41/containers/claims/logs?stdout=1", None),
    ("GET", "/v1.41/containers/claims/attach/ws?stdin=1", None),
    ("GET", "/v1.41/images/get?names=x", None),
    ("PUT", "/v1.41/containers/claims/archive?path=/", None),
    ("POST", "/v1.41/volumes/create", {"Name": "x"}),
    ("POST", "/v1.41/networks/lab/connect", {"Container": "x"}),
    ("GET", "/v1.41/containers/../containers/claims/archive", None),
    ("GET", "/v1.41/containers/..%2Fclaims%2Farchive/json", None),
    ("GET", "/v1.41//containers/claims/archive", None),
    ("GET", "/v1.41/containers/claims/json/../archive", None),
]
WATCH_CALLS = [("HEAD", "/_ping"), ("GET", "/_ping"), ("GET", "/version"), ("GET", "/v1.41/containers/json?all=1"),
               ("GET", "/v1.41/containers/0123abcd/json"), ("GET", "/v1.41/containers/frp-lab_client.1/json")]
NEEDS = {
    "frpc": WATCH_CALLS + [("GET", "/v1.41/info"), ("GET", "/v1.41/networks"), ("GET", "/v1.24/containers/json")],
    "patroller": WATCH_CALLS,
    "portainer-read-only": WATCH_CALLS + [
        ("GET", "/v1.41/info"), ("GET", "/v1.41/system/df"), ("GET", "/v1.41/containers/x/stats?stream=0"),
        ("GET", "/v1.41/containers/x/top"), ("GET", "/v1.41/images/json"),
        ("GET", "/v1.41/images/registry.example.org/vicos/patroller:v1/json"), ("GET", "/v1.41/networks/claims"),
        ("GET", "/v1.41/volumes"), ("GET", "/v1.41/nodes"), ("GET", "/v1.41/services"), ("GET", "/v1.41/tasks")],
}


class Engine(BaseHTTPRequestHandler):
    """Answers 200 to everything and records it; ``/events`` streams what the test pushes."""

    protocol_version = "HTTP/1.1"

    def address_string(self):
        return "engine"

    def log_message(self, *args):
        pass

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.server.seen.append((self.command, self.path))
        if self.path.split("?")[0].endswith("/events"):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            while True:
                item = self.server.pushed.get()
                if item is None:
                    break
                data = json.dumps(item).encode() + b"\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return
        body = b"" if self.command == "HEAD" else b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body) if self.command != "HEAD" else 12))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _answer


class UnixServer(ThreadingHTTPServer):
    address_family = socket.AF_UNIX
    daemon_threads = True

    def server_bind(self):
        self.socket.bind(self.server_address)
        self.server_name, self.server_port = "engine", 0


@pytest.fixture
def engine(tmp_path):
    import queue

    server = UnixServer(str(tmp_path / "engine.sock"), Engine)
    server.seen, server.pushed = [], queue.Queue()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.pushed.put(None)
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(engine, tmp_path):
    """``start(profile)``: haproxy with ccc-salt's configuration, on a socket passed as fd 3."""
    if not os.access(HAPROXY, os.X_OK):
        pytest.fail("haproxy is missing: bash scripts/setup.sh --test installs it")
    started = []

    def start(profile):
        config = tmp_path / f"{profile}.cfg"
        config.write_text(api.config_text("t1", profile, f"unix://{engine.server_address}"))
        path = str(tmp_path / f"{profile}.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(16)
        fd = listener.fileno()
        try:  # the listening socket on haproxy's fd 3, as systemd passes it (only the child's fd 3 changes)
            process = subprocess.Popen([HAPROXY, "-db", "-f", str(config)], pass_fds=(3,),
                                       preexec_fn=lambda: os.dup2(fd, 3),
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        finally:
            listener.close()
        started.append(process)
        # the socket was listening before haproxy ran: a first call waits for it, no sleep needed
        return path

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.parametrize("profile", sorted(NEEDS))
def test_what_the_service_needs_passes_and_every_attack_is_refused_before_the_engine(profile, proxy, engine):
    path = proxy(profile)
    for method, url in NEEDS[profile]:
        assert call(path, method, url)["status"] == 200, (method, url)
    assert [seen for seen in engine.seen] == list(NEEDS[profile])
    engine.seen.clear()
    for method, url, body in ATTACKS:
        answer = call(path, method, url, body)
        assert answer["status"] == DENIED, answer
        assert json.loads(answer["body"]) == json.loads(api.DENIED)
    assert engine.seen == []  # nothing reached the engine


def test_full_portainer_passes_writes_but_still_no_dot_segments(proxy, engine):
    path = proxy("portainer-full")
    assert call(path, "POST", "/v1.41/containers/create", {"Image": "x"})["status"] == 200
    assert call(path, "DELETE", "/v1.41/containers/x")["status"] == 200
    assert call(path, "GET", "/v1.41/containers/../x/archive")["status"] == DENIED
    assert engine.seen == [("POST", "/v1.41/containers/create"), ("DELETE", "/v1.41/containers/x")]


def test_events_stream_through_the_proxy_as_they_happen(proxy, engine):
    path = proxy("frpc")
    stream = events(path, timeout=30)
    engine.pushed.put({"status": "start", "id": "a" * 64})
    assert next(stream)["status"] == "start"
    engine.pushed.put({"status": "die", "id": "a" * 64})  # only after the first was read
    assert next(stream)["status"] == "die"
    stream.close()


def test_a_role_container_never_binds_the_engine_socket():
    for source in ("/var/run/docker.sock", "/run/docker.sock", "/run/ccc-docker-api/other.sock"):
        with pytest.raises(svc.BadSpec, match="ask for docker_api: <profile> instead"):
            svc.normalize({"name": "frp-lab", "image": "i", "role": "frp_client",
                           "binds": [{"source": source, "target": "/var/run/docker.sock", "read_only": True}]})
    with pytest.raises(svc.BadSpec, match="must be one of frpc, patroller, portainer-read-only, portainer-full"):
        svc.normalize({"name": "frp-lab", "image": "i", "role": "frp_client", "docker_api": "everything"})
    made = svc.normalize({"name": "claims", "image": "i", "role": "patroller", "docker_api": "patroller"})
    assert svc.wanted(made, {})["binds"] == [
        {"source": "/run/ccc-docker-api/claims.sock", "target": "/var/run/docker.sock", "read_only": True}]


def test_the_units_keep_the_socket_and_drop_privileges():
    assert "ListenStream=/run/ccc-docker-api/%i.sock" in api.SOCKET_UNIT_TEXT
    assert "SocketMode=0600" in api.SOCKET_UNIT_TEXT and "WantedBy=sockets.target" in api.SOCKET_UNIT_TEXT
    assert "User=haproxy" in api.SERVICE_UNIT_TEXT and "CapabilityBoundingSet=\n" in api.SERVICE_UNIT_TEXT
    assert api.engine_address("unix:///var/run/docker.sock") == "/var/run/docker.sock"
    assert api.engine_address("tcp://10.0.0.5:2375") == "10.0.0.5:2375"
    with pytest.raises(api.BadProfile, match="unix:// or tcp:// only"):
        api.engine_address("ssh://node1")
