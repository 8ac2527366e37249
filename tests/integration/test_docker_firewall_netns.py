"""The egress firewall state (``_states/ccc_docker_firewall.py``) with its execution module
(``_modules/ccc_docker_firewall.py``, through ``__salt__`` as Salt wires it) and the restore script the boot
unit runs (``salt/cluster/docker/files/ccc-docker-firewall``) against a real iptables, inside a
throwaway network namespace of the host (the host's own rules are never touched).

Boundary: ``iptables``/``iptables-restore`` on PATH are two-line wrappers that run the real
binaries in the namespace (``ip netns exec``); nothing else is faked. What an admin sees: the
chain in order, the jump first in DOCKER-USER, a second run with no changes, drift repaired, the
script alone restoring everything after dockerd's chains were rebuilt (as after a restart or a
reboot), and ``absent`` removing chains, jumps and files, for IPv4 and IPv6.

Real traffic: inside the namespace (the "node") a bridge ``ccc-student`` carries a "container"
(a second namespace on a veth enslaved to the bridge, IPv4 and IPv6 addresses, as Docker wires a
container); the node serves TCP on its gateway address, on another address of its own, on IPv6,
and an "exporter" port on the gateway that the metrics forwarder must reach. Boundary: the
monitoring_agent role's plan (``ccc_monitoring.plan``) is given as the data it returns."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest
from support.salt_modules import functions
from support.scripts import load_module

import ccc_docker_firewall as fw

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "salt" / "cluster" / "docker" / "files" / "ccc-docker-firewall"
NETWORKS = {
    "lab-unrestricted": {"subnet": "172.30.0.0/24", "bridge_name": "ccc-lab"},
    "student-restricted": {"subnet": "172.30.1.0/24", "bridge_name": "ccc-student",
                           "restricted_access": ["anywhere"], "allowed_access": ["172.30.2.0/24"]},
}


@pytest.fixture
def netns(tmp_path, monkeypatch):
    """A network namespace and iptables wrappers on PATH that act inside it."""
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("iptables"):
        pytest.skip("needs root, ip and iptables")
    name = f"ccc-fw-test-{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", name], capture_output=True).returncode != 0:
        pytest.skip("cannot create a network namespace here")
    wrappers = tmp_path / "bin"
    wrappers.mkdir()
    for tool in ("iptables", "iptables-restore", "ip6tables", "ip6tables-restore"):
        real = shutil.which(tool)
        (wrappers / tool).write_text(f'#!/bin/sh\nexec ip netns exec {name} {real} "$@"\n')
        (wrappers / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrappers}:{os.environ['PATH']}")
    yield name
    subprocess.run(["ip", "netns", "del", name], check=False)


def iptables(*args, tool="iptables"):
    return subprocess.run([tool, "-w", *args], capture_output=True, text=True, check=True).stdout


def ip6tables(*args):
    return iptables(*args, tool="ip6tables")


# What the monitoring_agent role's plan says when its forwarder runs on the restricted network.
MONITORING = {"problem": None, "forwarder": True, "network": "student-restricted", "address": "172.30.1.1",
              "node_exporter": "package", "node_port": 9100, "gpu": True, "gpu_port": 9445}


def state(test=False, networks=NETWORKS, monitoring=None):
    plan = {"ccc_monitoring.plan": lambda: dict(monitoring or {"problem": None, "forwarder": False})}
    return load_module("_states/ccc_docker_firewall.py", "ccc_docker_firewall_state",
                       pillar={"ccc": {"cluster": {"networks": networks}}}, opts={"test": test},
                       salt=functions("_modules/ccc_docker_firewall.py", salt=plan))


def apply(rules_file, test=False, networks=NETWORKS, monitoring=None):
    return state(test, networks, monitoring).managed("chain", rules_file=str(rules_file), script=str(SCRIPT))


WANTED_INPUT = ["-A CCC-EGRESS-INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN",
                "-A CCC-EGRESS-INPUT -d 172.30.2.0/24 -i ccc-student -j RETURN",
                "-A CCC-EGRESS-INPUT -i ccc-student -j DROP"]
WANTED_V6 = {"CCC-EGRESS": ["-A CCC-EGRESS -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN",
                            "-A CCC-EGRESS -i ccc-student -o ccc-student -j RETURN",
                            "-A CCC-EGRESS -i ccc-student -j DROP"],
             "CCC-EGRESS-INPUT": ["-A CCC-EGRESS-INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN",
                                  "-A CCC-EGRESS-INPUT -i ccc-student -j DROP"]}


def user_chain():
    return [line for line in iptables("-S", "DOCKER-USER").splitlines() if line.startswith("-A ")]


def test_apply_then_nothing_to_do_then_drift_repaired(netns, tmp_path):
    rules_file = tmp_path / "etc" / "docker-firewall.rules"
    wanted = fw.chain_rules(NETWORKS)
    preview = apply(rules_file, test=True)
    assert preview["result"] is None and preview["changes"]["ipv4 CCC-EGRESS"] == {"added": wanted}
    assert preview["changes"]["ipv4 jump"] == ["-I DOCKER-USER 1 -j CCC-EGRESS", "-I INPUT 1 -j CCC-EGRESS-INPUT"]
    assert preview["changes"]["ipv6 jump"] == ["-I FORWARD 1 -j CCC-EGRESS", "-I INPUT 1 -j CCC-EGRESS-INPUT"]
    assert not rules_file.exists()

    first = apply(rules_file)
    assert first["result"] is True, first
    assert first["comment"] == "12 rule(s) in CCC-EGRESS and CCC-EGRESS-INPUT for restricted networks applied"
    assert iptables("-S", "CCC-EGRESS").splitlines()[1:] == [
        "-A CCC-EGRESS -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN",
        "-A CCC-EGRESS -i ccc-student -o ccc-student -j RETURN",
        "-A CCC-EGRESS -s 172.30.1.0/24 -d 172.30.2.0/24 -i ccc-student -j ACCEPT",
        "-A CCC-EGRESS -s 172.30.1.0/24 -i ccc-student -j DROP",
    ] == wanted
    assert user_chain() == ["-A DOCKER-USER -j CCC-EGRESS"]
    assert iptables("-S", "CCC-EGRESS-INPUT").splitlines()[1:] == WANTED_INPUT
    assert iptables("-S", "INPUT").splitlines()[1] == "-A INPUT -j CCC-EGRESS-INPUT"
    for chain, rules in WANTED_V6.items():
        assert ip6tables("-S", chain).splitlines()[1:] == rules
    assert ip6tables("-S", "FORWARD").splitlines()[1] == "-A FORWARD -j CCC-EGRESS"
    assert rules_file.read_text() == fw.restore_text({"CCC-EGRESS": wanted, "CCC-EGRESS-INPUT": WANTED_INPUT})
    assert oct(rules_file.stat().st_mode & 0o777) == "0o644"
    assert pathlib.Path(fw.v6_file(rules_file)).read_text() == fw.restore_text(WANTED_V6)

    again = apply(rules_file)
    assert (again["result"], again["changes"]) == (True, {})
    assert again["comment"] == "12 rule(s) in CCC-EGRESS and CCC-EGRESS-INPUT for restricted networks in place"

    iptables("-D", "CCC-EGRESS", "4")  # someone deleted the DROP by hand
    iptables("-I", "DOCKER-USER", "1", "-j", "RETURN")
    ip6tables("-D", "CCC-EGRESS-INPUT", "2")
    ip6tables("-I", "INPUT", "1", "-j", "ACCEPT")  # an ACCEPT above ours would let everything in
    repaired = apply(rules_file)
    assert repaired["result"] is True
    assert repaired["changes"]["ipv4 CCC-EGRESS"] == {"added": [wanted[-1]]} and "ipv4 jump" in repaired["changes"]
    assert repaired["changes"]["ipv6 CCC-EGRESS-INPUT"] == {"added": [WANTED_V6["CCC-EGRESS-INPUT"][1]]}
    assert repaired["changes"]["ipv6 jump"] == ["-I INPUT 1 -j CCC-EGRESS-INPUT"]
    assert iptables("-S", "CCC-EGRESS").splitlines()[1:] == wanted
    assert user_chain()[0] == "-A DOCKER-USER -j CCC-EGRESS"
    assert ip6tables("-S", "INPUT").splitlines()[1] == "-A INPUT -j CCC-EGRESS-INPUT"


def test_the_boot_script_restores_rules_after_dockerd_rebuilt_its_chains(netns, tmp_path):
    rules_file = tmp_path / "docker-firewall.rules"
    assert apply(rules_file)["result"] is True
    # What a reboot leaves: no chain of ours; dockerd then creates DOCKER-USER with its RETURN.
    iptables("-D", "DOCKER-USER", "-j", "CCC-EGRESS")
    iptables("-F", "CCC-EGRESS")
    iptables("-X", "CCC-EGRESS")
    iptables("-A", "DOCKER-USER", "-j", "RETURN")
    for tool in (iptables, ip6tables):
        tool("-F", "INPUT")
        tool("-F", "CCC-EGRESS-INPUT")
        tool("-X", "CCC-EGRESS-INPUT")
    ip6tables("-F", "FORWARD")
    for _ in range(2):  # run twice (as the unit does): the second run adds no second jump
        proc = subprocess.run([str(SCRIPT), str(rules_file), fw.v6_file(rules_file)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    assert iptables("-S", "CCC-EGRESS").splitlines()[1:] == fw.chain_rules(NETWORKS)
    assert user_chain() == ["-A DOCKER-USER -j CCC-EGRESS", "-A DOCKER-USER -j RETURN"]
    assert iptables("-S", "CCC-EGRESS-INPUT").splitlines()[1:] == WANTED_INPUT
    assert iptables("-S", "INPUT").splitlines()[1:] == ["-A INPUT -j CCC-EGRESS-INPUT"]
    assert ip6tables("-S", "CCC-EGRESS-INPUT").splitlines()[1:] == WANTED_V6["CCC-EGRESS-INPUT"]
    assert ip6tables("-S", "FORWARD").splitlines()[1:] == ["-A FORWARD -j CCC-EGRESS"]


def test_before_dockerd_ever_started_the_script_creates_docker_user(netns, tmp_path):
    rules_file = tmp_path / "docker-firewall.rules"
    rules_file.write_text(fw.restore_text(fw.chain_rules(NETWORKS)))  # a file of the IPv4-forward-only days
    proc = subprocess.run([str(SCRIPT), str(rules_file)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert user_chain() == ["-A DOCKER-USER -j CCC-EGRESS"]
    rules_file.write_text(fw.restore_text(fw.rule_sets(NETWORKS)["ipv4"]))
    proc = subprocess.run([str(SCRIPT), str(rules_file)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert user_chain() == ["-A DOCKER-USER -j CCC-EGRESS"]
    assert iptables("-S", "INPUT").splitlines()[1:] == ["-A INPUT -j CCC-EGRESS-INPUT"]
    missing = subprocess.run([str(SCRIPT), str(tmp_path / "none.rules")], capture_output=True, text=True)
    assert missing.returncode == 0 and "no egress rules to apply" in missing.stderr


def test_absent_and_no_restricted_network_remove_chain_jump_and_file(netns, tmp_path):
    rules_file = tmp_path / "docker-firewall.rules"
    assert apply(rules_file)["result"] is True
    unrestricted = {"lab-unrestricted": NETWORKS["lab-unrestricted"]}
    preview = apply(rules_file, test=True, networks=unrestricted)
    assert preview["result"] is None and preview["changes"] == {
        "ipv4 jump": "removed", "ipv4 chain": "removed", "ipv6 jump": "removed", "ipv6 chain": "removed",
        "rules file": "removed"}
    gone = apply(rules_file, networks=unrestricted)
    assert gone["result"] is True and gone["comment"] == "egress chain CCC-EGRESS removed"
    assert user_chain() == [] and not rules_file.exists() and not os.path.exists(fw.v6_file(rules_file))
    for tool in ("iptables", "ip6tables"):
        for chain in ("CCC-EGRESS", "CCC-EGRESS-INPUT"):
            assert subprocess.run([tool, "-w", "-S", chain], capture_output=True).returncode != 0, (tool, chain)
        assert "CCC-EGRESS" not in iptables("-S", "INPUT", tool=tool)
    assert state().absent("x", rules_file=str(rules_file)) == {
        "name": "x", "result": True, "changes": {}, "comment": "no egress chain CCC-EGRESS"}


def test_a_bad_definition_fails_and_changes_nothing(netns, tmp_path):
    bad = {"student": dict(NETWORKS["student-restricted"], restricted_access=["300.1.1.1"])}
    result = apply(tmp_path / "r.rules", networks=bad)
    assert result["result"] is False and result["changes"] == {}
    assert result["comment"].startswith("egress rules not applied: ccc:cluster:networks:student:restricted_access[0]")
    assert subprocess.run(["iptables", "-w", "-S", "CCC-EGRESS"], capture_output=True).returncode != 0


NODE_SETUP = """
set -e
ip link add ccc-student type bridge; ip link set ccc-student up
ip addr add 172.30.1.1/24 dev ccc-student; ip addr add fd00:30:1::1/64 dev ccc-student nodad
ip link add ccc-other type veth peer name ccc-other-p; ip link set ccc-other up; ip link set ccc-other-p up
ip addr add 10.99.0.1/24 dev ccc-other
ip link set lo up
ip link add vstu type veth peer name vstu-p; ip link set vstu-p netns {box}
ip link set vstu master ccc-student; ip link set vstu up
"""
BOX_SETUP = """
set -e
ip link set lo up; ip addr add 172.30.1.50/24 dev vstu-p; ip addr add fd00:30:1::50/64 dev vstu-p nodad
ip link set vstu-p up; ip route add default via 172.30.1.1
"""
# A TCP listener per address family in the node: what any service of the node looks like.
SERVE = """
import socket, sys, threading
def serve(family, address, port):
    s = socket.socket(family); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((address, port)); s.listen(16)
    while True:
        c, _ = s.accept(); c.sendall(b"node"); c.close()
for family, address, port in ((socket.AF_INET, "0.0.0.0", 8080), (socket.AF_INET6, "::", 8080),
                              (socket.AF_INET, "172.30.1.1", 9100)):
    threading.Thread(target=serve, args=(family, address, port), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""


LISTEN_ONCE = ("import socket; s = socket.socket(); s.bind(('0.0.0.0', 7000)); s.listen(1); print('ready', flush=True); "
               "c, _ = s.accept(); c.sendall(b'node')")


def _reaches(netns_name, address, port):
    """A TCP connection from inside ``netns_name`` to ``address:port`` that gets the banner."""
    probe = (f"import socket; s = socket.create_connection(({address!r}, {port}), timeout=2); "
             "print(s.recv(4).decode())")
    proc = subprocess.run(["ip", "netns", "exec", netns_name, sys.executable, "-c", probe],
                          capture_output=True, text=True)
    return proc.returncode == 0 and proc.stdout.strip() == "node"


@pytest.fixture
def node_with_container(netns):
    """The namespace as a node with a restricted bridge and a container on it, serving TCP."""
    box = f"{netns}-box"
    subprocess.run(["ip", "netns", "add", box], check=True)
    subprocess.run(["ip", "netns", "exec", netns, "sh", "-c", NODE_SETUP.format(box=box)], check=True)
    subprocess.run(["ip", "netns", "exec", box, "sh", "-c", BOX_SETUP], check=True)
    server = subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-c", SERVE],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "ready"
        yield netns, box
    finally:
        server.kill()
        server.wait()
        subprocess.run(["ip", "netns", "del", box], check=False)


def test_a_restricted_container_cannot_reach_the_node_but_its_exporters_over_ipv4_or_ipv6(node_with_container, tmp_path):
    node, box = node_with_container
    targets = {"gateway": ("172.30.1.1", 8080), "other node address": ("10.99.0.1", 8080),
               "IPv6": ("fd00:30:1::1", 8080), "exporter": ("172.30.1.1", 9100)}
    assert {name: _reaches(box, *where) for name, where in targets.items()} == dict.fromkeys(targets, True)
    applied = apply(tmp_path / "docker-firewall.rules", monitoring=MONITORING)
    assert applied["result"] is True, applied
    assert {name: _reaches(box, *where) for name, where in targets.items()} == {
        "gateway": False, "other node address": False, "IPv6": False, "exporter": True}
    assert "-A CCC-EGRESS-INPUT -d 172.30.1.1/32 -i ccc-student -p tcp -m tcp --dport 9445 -j RETURN" in \
        iptables("-S", "CCC-EGRESS-INPUT").splitlines()
    # the node itself still talks to the container: the replies come back through INPUT
    listener = subprocess.Popen(["ip", "netns", "exec", box, sys.executable, "-c", LISTEN_ONCE],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert listener.stdout.readline().strip() == "ready"
        assert _reaches(node, "172.30.1.50", 7000)
    finally:
        listener.kill()
        listener.wait()


def test_fail2ban_chains_above_ours_are_left_there(netns, tmp_path):
    """fail2ban (a role on the same nodes) puts its jumps at the top of INPUT whenever a jail
    starts: they only reject banned addresses, so neither the state nor the boot script fights them."""
    rules_file = tmp_path / "docker-firewall.rules"
    assert apply(rules_file)["result"] is True
    iptables("-N", "f2b-sshd")
    iptables("-I", "INPUT", "1", "-p", "tcp", "-m", "multiport", "--dports", "22", "-j", "f2b-sshd")
    assert apply(rules_file)["changes"] == {}
    proc = subprocess.run([str(SCRIPT), str(rules_file), fw.v6_file(rules_file)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert iptables("-S", "INPUT").splitlines()[1:] == ["-A INPUT -p tcp -m multiport --dports 22 -j f2b-sshd",
                                                        "-A INPUT -j CCC-EGRESS-INPUT"]
