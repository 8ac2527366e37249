"""The attack on a role container's Docker API, made for real on a test node: what the deployed
container (frpc, Patroller, the Portainer agent) has at ``/var/run/docker.sock`` is reached through
``/proc/<its pid>/root`` (its own mount namespace: the very socket inode the container was given),
and raw API calls are made on it by ``tests/support/docker_api_probe.py`` with the checkout's venv
Python (the stand-in images are busybox, which speaks no HTTP over unix sockets). What the node's
engine holds before and after is read through the node's own socket."""

import json

from support.sysnode import REPO, VENV

PROBE = REPO / "tests" / "support" / "docker_api_probe.py"
PYTHON = VENV / "bin" / "python"
DENIED = {"message": "ccc-salt: this Docker API call is not allowed for this role container"}


def container_socket(node, name):
    """``/var/run/docker.sock`` as container ``name`` sees it, from the node."""
    pid = node.exec(["docker", "inspect", "-f", "{{.State.Pid}}", name]).stdout.strip()
    assert pid and pid != "0", f"{name} is not running"
    return f"/proc/{pid}/root/var/run/docker.sock"


def probe(node, name, calls):
    """``[{method, path, status, body}]`` of each ``(method, path, body)`` made on ``name``'s socket."""
    argv = [str(PYTHON), str(PROBE), container_socket(node, name), json.dumps([list(c) for c in calls])]
    return json.loads(node.exec(argv).stdout)


def attacks(target):
    """Writes and leaking reads a compromised role container would try; ``target``: a container id."""
    return [
        ("POST", "/v1.41/containers/create?name=ccc-evil",
         {"Image": "ccc-test/tiny:1", "HostConfig": {"Binds": ["/:/host"], "Privileged": True}}),
        ("POST", "/containers/create?name=ccc-evil2", {"Image": "ccc-test/tiny:1"}),
        ("POST", f"/v1.41/containers/{target}/exec", {"Cmd": ["/bin/sh", "-c", "id"], "AttachStdout": True}),
        ("DELETE", f"/v1.41/containers/{target}?force=1", None),
        ("POST", f"/v1.41/containers/{target}/stop", None),
        ("GET", f"/v1.41/containers/{target}/archive?path=/etc", None),
        ("GET", f"/v1.41/containers/{target}/logs?stdout=1", None),
        ("GET", "/v1.41/secrets", None),
        ("GET", "/v1.41/swarm", None),
        ("POST", "/v1.41/swarm/init", {"ListenAddr": "127.0.0.1:2377"}),
        ("POST", "/v1.41/images/create?fromImage=ccc-test%2Fnever-pulled&tag=1", None),
        ("POST", "/v1.41/build?t=ccc-evil", None),
        ("POST", "/v1.41/volumes/create", {"Name": "ccc-evil"}),
    ]


def engine_state(node, target):
    """What the attacks would change: containers, volumes, the target's exec ids, swarm, images."""
    names = node.exec(["docker", "ps", "-a", "--format", "{{.Names}}"]).stdout.split()
    volumes = node.exec(["docker", "volume", "ls", "-q"]).stdout.split()
    execs = node.exec(["docker", "inspect", "-f", "{{json .ExecIDs}}", target]).stdout.strip()
    swarm = node.exec(["docker", "info", "-f", "{{.Swarm.LocalNodeState}}"]).stdout.strip()
    images = node.exec(["docker", "images", "-q", "--no-trunc"]).stdout.split()
    running = node.exec(["docker", "inspect", "-f", "{{.State.Running}}", target]).stdout.strip()
    return {"containers": sorted(names), "volumes": sorted(volumes), "execs": execs, "swarm": swarm,
            "images": sorted(images), "target running": running}


def assert_attacks_refused(node, name, target):
    """Every attack from ``name`` answered 403 with ccc-salt's message, and the engine unchanged."""
    before = engine_state(node, target)
    answers = probe(node, name, attacks(target))
    refused = [a for a in answers if a["status"] == 403 and json.loads(a["body"]) == DENIED]
    assert refused == answers, [a for a in answers if a not in refused]
    assert engine_state(node, target) == before
    return answers


def assert_needs_pass(node, name, calls):
    """Each call ``name``'s program needs answers 200 from the real engine (``[(method, path)]``)."""
    answers = probe(node, name, [(method, path, None) for method, path in calls])
    assert [(a["method"], a["path"], a["status"]) for a in answers] == [(m, p, 200) for m, p in calls], answers
    return answers


EVENTS_SCRIPT = """
import json, sys
sys.path.insert(0, {support!r})
from docker_api_probe import call, events
stream = events({socket!r}, timeout=60)  # GET /events answered 200: subscribed
made = call("/var/run/docker.sock", "POST", "/containers/create?name=ccc-events-probe", {{"Image": "ccc-test/tiny:1"}})
assert made["status"] == 201, made
for event in stream:
    if event.get("Actor", {{}}).get("Attributes", {{}}).get("name") == "ccc-events-probe":
        print(json.dumps(event))
        break
call("/var/run/docker.sock", "DELETE", "/containers/ccc-events-probe?force=1")
"""


def event_through_proxy(node, name):
    """The event of a container the node creates, as ``name`` receives it through its proxy."""
    script = EVENTS_SCRIPT.format(support=str(PROBE.parent), socket=container_socket(node, name))
    return json.loads(node.exec([str(PYTHON), "-c", script], timeout=90).stdout)


def assert_no_engine_socket(node, name):
    """``name``'s mounts: no engine socket; ``/var/run/docker.sock`` is its proxy socket, another inode."""
    mounts = json.loads(node.exec(["docker", "inspect", "-f", "{{json .Mounts}}", name]).stdout)
    sources = {m["Source"] for m in mounts}
    assert not sources & {"/var/run/docker.sock", "/run/docker.sock"}, mounts
    docker_sock = [m for m in mounts if m["Destination"] == "/var/run/docker.sock"]
    assert [m["Source"] for m in docker_sock] == [f"/run/ccc-docker-api/{name}.sock"]
    inside, engine = (node.exec(["stat", "-L", "-c", "%d:%i", path]).stdout.strip()
                      for path in (container_socket(node, name), "/run/docker.sock"))
    assert inside != engine
    assert node.exec(["stat", "-c", "%a %U %F", f"/run/ccc-docker-api/{name}.sock"]).stdout.strip() == "600 root socket"
    assert node.exec(["stat", "-c", "%a %U", "/run/ccc-docker-api"]).stdout.strip() == "700 root"
