"""The Portainer agent's swarm mode (``ccc:docker:portainer_agent:swarm``) on two systemd test nodes
in a swarm made as tests/nodes/test_swarm.py makes it (``state.apply cluster``: the leader inits,
the worker joins with the token from its GPG secrets), each with a salt-minion of a real master
configured by scripts/master_config.py (reactor, the ``ccc_agent_overlay`` runner). With swarm
mode on, the worker applying first finds no agents' overlay, keeps its agent running, says
pending (it makes none) and reports it; the master records it as waiting. The leader's apply
creates the overlay (attachable, internal, labelled, encrypted where the kernel has ESP), attaches
its agent as ``<node>_agent`` and reports it: the master applies the agent's state on the worker,
whose agent joins the overlay by itself (the test waits for that job's return, nobody applies by
hand). A ``created`` report from the worker, which is not the leader, makes no apply. A container
on the overlay resolves both agents by those names (``getent hosts``). Second applies change
nothing. Switched off, each agent leaves the overlay and the leader removes it.

The agent image cannot be pulled here: ``ccc-test/tiny:1`` (busybox that sleeps) is tagged under
the configured name, as in tests/nodes/test_portainer_agent.py, so what is checked is the
container's networks, aliases and environment, not the agent program."""

import json
import subprocess
import time

import pytest

import master_config
import minion_config
from support import secrets
from support.sysnode import HOST_IP, REPO, VENV, accept_minion, failed as _failed, changed as _changed

from .test_swarm import ESP

pytestmark = pytest.mark.docker

LEADER, WORKER = "pswarm-a", "pswarm-b"
AGENT = "portainer-agent"
IMAGE = "portainer/agent:2.21-ccc-test"
OVERLAY = "portainer-agent-network"
STATE = "ccc-cluster-swarm-portainer-agent"
# How long the worker's agent may take to join after the leader's apply returned: the reactor, the
# runner and one queued state run on the worker (seconds; it takes a few).
WAKE_TIMEOUT = 120


def _site(leader_ip, agent=False, swarm_mode=False):
    return {"ccc": {
        "only_roles": "docker,swarm",
        "roles": {"swarm": True},
        "cluster": {"networks": {"lab-unrestricted": {"subnet": "172.31.0.0/24", "gateway": "172.31.0.1",
                                                      "bridge_name": "ccc-lab"}}},
        "docker": {"registries": [], "nvidia_toolkit": {"enabled": False},
                   "portainer_agent": {"enabled": agent, "image": IMAGE, "swarm": swarm_mode}},
        "containers": [],
        "swarm": {"leader": LEADER, "leader_addr": leader_ip, "encrypted": ESP},
    }}


def _salt_call(node, *args):
    """``salt-call`` in the node through its minion (pillar and files from the master; events reach
    it)."""
    call = node.exec([str(VENV / "bin" / "salt-call"), "--config-dir", "/etc/salt", "--out", "json", *args],
                     check=False, timeout=900)
    assert call.stdout.strip(), call.stderr[-3000:]
    return json.loads(call.stdout)["local"]


def _apply(node):
    """``state.apply cluster``, after a state run already going there (the minion's start-up
    reconcile, the master's pillar watch): ``queue`` as a number waits for it and returns this
    run's states (``queue=True`` would hand the run to the minion's queue and return at once)."""
    ran = _salt_call(node, "state.apply", "cluster", "queue=100")
    assert isinstance(ran, dict) and all("_|-" in key for key in ran), ran
    return {key.split("_|-")[1]: value for key, value in ran.items()}


def _write(master, relpath, text):
    path = master.site / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _write_site(master, **options):
    _write(master, "site/init.sls", json.dumps(_site(master.leader_ip, **options)))


@pytest.fixture(scope="module")
def keyring(tmp_path_factory):
    path = tmp_path_factory.mktemp("pswarm-gpg") / "gpgkeys"
    secrets.make_keyring(path)
    yield path
    secrets.stop_agent(path)


@pytest.fixture(scope="module")
def nodes(sysnodes):
    made = {name: sysnodes(name) for name in (LEADER, WORKER)}
    for node in made.values():
        node.add_apt_source()
    return made


@pytest.fixture(scope="module")
def master(salt_factories, tmp_path_factory, keyring, nodes):
    """README "Master setup": scripts/master_config.py's config serving this test's site, on the
    test network; the GPG key that decrypts the worker's join token is the master's."""
    site = tmp_path_factory.mktemp("pswarm-site")
    config = master_config.master_config(REPO, site, gpg_keydir=keyring)
    config["interface"] = HOST_IP
    factory = salt_factories.salt_master_daemon("ccc-pswarm-master", overrides=config)
    factory.site, factory.leader_ip = site, nodes[LEADER].ip()
    _write_site(factory)
    for name, node in nodes.items():
        _write(factory, f"site/nodes/{name}.sls", json.dumps({"ccc": {"swarm": {"advertise_addr": node.ip()}}}))
    _write(factory, "site/secrets.sls", "{}\n")
    with factory.started():
        yield factory


@pytest.fixture(scope="module")
def swarm(master, nodes, keyring):
    """The minions started and accepted, the swarm formed (leader, then the worker with its token)."""
    for name, node in nodes.items():
        settings = minion_config.minion_config(publish_port=master.config["publish_port"])
        node.start_minion(HOST_IP, master.config["ret_port"], master.config["publish_port"], settings=settings)
        accept_minion(master, name, timeout=120)
        assert master.salt_cli(timeout=300).run("saltutil.sync_all", minion_tgt=name).returncode == 0
    leader, worker = nodes[LEADER], nodes[WORKER]
    assert _failed(_apply(leader)) == {}
    token = leader.exec("docker swarm join-token -q worker").stdout.strip()
    _write(master, "site/secrets.sls", secrets.secrets_sls(keyring, {"swarm": {"worker_token": token}}))
    assert _failed(_apply(worker)) == {}
    for image in ("ccc-test/tiny:1", "ccc-test/sshd:1"):
        saved = subprocess.run(["docker", "save", image], capture_output=True, check=True).stdout
        for node in nodes.values():
            subprocess.run(["docker", "exec", "-i", node.container, "docker", "load"], input=saved,
                           capture_output=True, check=True)
    for node in nodes.values():
        node.exec(["docker", "tag", "ccc-test/tiny:1", IMAGE])
    return nodes


def _runner_return(event_listener, master, function, after, timeout=60):
    """The return of the reactor's ``runner.<function>`` published after ``after`` (epoch s):
    waits for that event, failing after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for event in sorted(event_listener.get_events([(master.id, "salt/run/*/ret")], after_time=after),
                            key=lambda e: e.stamp):
            if event.data.get("fun") == f"runner.{function}":
                return event.data.get("return")
        time.sleep(0.2)
    pytest.fail(f"no return of runner.{function} within {timeout} s")


def _job_returns(event_listener, master, node, fun, after):
    """Returns of ``fun`` jobs on ``node`` that came after ``after`` (epoch s), oldest first."""
    events = event_listener.get_events([(master.id, f"salt/job/*/ret/{node}")], after_time=after)
    return [e for e in sorted(events, key=lambda e: e.stamp) if e.data.get("fun") == fun]


def _overlay(node):
    found = node.exec(["docker", "network", "inspect", OVERLAY], check=False)
    return json.loads(found.stdout)[0] if found.returncode == 0 else None


def _agent(node):
    return json.loads(node.exec(["docker", "inspect", AGENT]).stdout)[0]


@pytest.fixture(scope="module")
def swarm_mode(master, swarm, event_listener):
    """Agents with swarm mode on: the worker applies first (its report reaches the master), then
    the leader; the worker's agent state is applied by the master, then both apply again."""
    nodes = swarm
    _write_site(master, agent=True, swarm_mode=True)
    runs, started = {}, time.time()
    runs["worker first"] = _apply(nodes[WORKER])
    runs["worker waiting"] = _runner_return(event_listener, master, "ccc_agent_overlay.pending", started)
    runs["leader overlay after worker"] = _overlay(nodes[LEADER])
    leader_started = time.time()
    runs["leader"] = _apply(nodes[LEADER])
    leader_done = time.time()
    deadline = time.monotonic() + WAKE_TIMEOUT
    while not _job_returns(event_listener, master, WORKER, "state.sls_id", leader_started):
        assert time.monotonic() < deadline, f"the worker's agent state was not applied within {WAKE_TIMEOUT} s"
        time.sleep(0.2)
    woken = _job_returns(event_listener, master, WORKER, "state.sls_id", leader_started)[0]
    runs["worker woken"] = {key.split("_|-")[1]: value for key, value in woken.data["return"].items()}
    runs["created"] = _runner_return(event_listener, master, "ccc_agent_overlay.created", leader_started)
    joined = woken.stamp.timestamp()
    print(f"worker's agent on {OVERLAY}: {joined - leader_done:.1f} s after the leader's apply returned, "
          f"{joined - leader_started:.1f} s after it started")
    for label, name in (("leader again", LEADER), ("worker again", WORKER)):
        runs[label] = _apply(nodes[name])
    return runs


def test_the_worker_makes_no_overlay_says_pending_and_waits(swarm, swarm_mode):
    first = swarm_mode["worker first"]
    assert _failed(first) == {}, first
    assert "pending" in first[STATE]["comment"] and first[STATE]["changes"] == {}, first[STATE]
    assert swarm_mode["worker waiting"] == {"node": WORKER, "action": "waiting"}
    assert swarm_mode["leader overlay after worker"] is None
    assert _agent(swarm[WORKER])["State"]["Running"]  # the agent runs meanwhile, on its bridge


def test_the_leader_creates_the_overlay_and_the_workers_agent_joins_by_itself(swarm, swarm_mode):
    leader_run = swarm_mode["leader"]
    assert _failed(leader_run) == {}, leader_run
    assert leader_run[STATE]["changes"] == {"attached": AGENT, "aliases": [f"{LEADER}_agent", "ccc-portainer-agents"],
                                            "network_created": OVERLAY}
    created = swarm_mode["created"]
    assert created["node"] == LEADER and created["action"] == "applied" and list(created["jids"]) == [WORKER]
    woken = swarm_mode["worker woken"]
    assert _failed(woken) == {}, woken
    assert woken[STATE]["changes"] == {"attached": AGENT, "aliases": [f"{WORKER}_agent", "ccc-portainer-agents"]}
    net = _overlay(swarm[LEADER])
    assert (net["Driver"], net["Scope"], net["Attachable"], net["Internal"]) == ("overlay", "swarm", True, True)
    assert net["Labels"] == {"ccc.swarm-agent-overlay": "portainer"}
    assert ("encrypted" in net["Options"]) is ESP, net["Options"]
    for name, node in swarm.items():
        attrs = _agent(node)
        assert f"{name}_agent" in attrs["NetworkSettings"]["Networks"][OVERLAY]["Aliases"]
        assert "bridge" in attrs["NetworkSettings"]["Networks"]  # still published on its address
        assert "AGENT_CLUSTER_ADDR=ccc-portainer-agents" in attrs["Config"]["Env"]
    for label in ("leader again", "worker again"):
        assert _failed(swarm_mode[label]) == {} and _changed(swarm_mode[label]) == {}, swarm_mode[label]


def test_a_created_report_from_a_node_that_is_not_the_leader_applies_nothing(master, swarm, swarm_mode,
                                                                           event_listener):
    sent = time.time()
    assert _salt_call(swarm[WORKER], "event.send", "ccc/swarm/agent_overlay/created") is True
    assert _runner_return(event_listener, master, "ccc_agent_overlay.created", sent) == {
        "node": WORKER, "action": None, "error": "not the swarm leader"}
    published = event_listener.get_events([(master.id, "salt/job/*/new")], after_time=sent)
    assert [e.data for e in published if e.data.get("fun") == "state.sls_id"] == []


def test_a_container_on_the_overlay_resolves_each_agent_by_its_node_agent_name(swarm, swarm_mode):
    nodes = swarm
    for here in nodes.values():
        addresses = {}
        for name in (LEADER, WORKER):
            found = here.exec(["docker", "run", "--rm", "--network", OVERLAY, "--entrypoint", "getent",
                               "ccc-test/sshd:1", "hosts", f"{name}_agent"], check=False)
            assert found.returncode == 0, found.stdout + found.stderr
            addresses[name] = found.stdout.split()[0]
        assert addresses[LEADER] != addresses[WORKER]
        own = _agent(here)["NetworkSettings"]["Networks"][OVERLAY]["IPAddress"]
        assert own in addresses.values()


def test_switched_off_the_agents_leave_and_the_leader_removes_the_overlay(master, swarm, swarm_mode):
    nodes = swarm
    _write_site(master, agent=True, swarm_mode=False)
    worker_run = _apply(nodes[WORKER])
    assert _failed(worker_run) == {}, worker_run
    leader_run = _apply(nodes[LEADER])
    assert _failed(leader_run) == {}, leader_run
    assert leader_run[STATE]["changes"].get("overlay") == "removed", leader_run[STATE]
    assert _overlay(nodes[LEADER]) is None
    for node in nodes.values():
        attrs = _agent(node)
        assert OVERLAY not in attrs["NetworkSettings"]["Networks"]
        assert not any(env.startswith("AGENT_CLUSTER_ADDR=") for env in attrs["Config"]["Env"] or [])
    again = _apply(nodes[LEADER])
    assert _changed(again) == {} and _failed(again) == {}, again
