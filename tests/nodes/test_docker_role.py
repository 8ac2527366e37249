"""The docker cluster role applied for real on a systemd test node (tests/support/sysnode.py): the
engine from the node's local apt repo (unpinned: not held), the NVIDIA toolkit pinned (held; the
hold released when the pin goes), daemon.json written once (dockerd restarted only
then), the networks, and the egress firewall of a restricted network, checked by traffic and
after ``systemctl restart docker`` and a reboot; a second apply changes nothing.

The engine comes from the test apt repository (tests/support/aptrepo.py) configured through the
role's own ``ccc:docker:repositories`` (source line + armored key from pillar), so the repository
path of install.sls is exercised too.

Traffic: a "container" of the restricted network is a network namespace inside the node whose
veth is enslaved to the network's bridge (what Docker does for a container), so its packets
cross FORWARD exactly as a container's do, without an image in the node. Its destinations are
two addresses of a second namespace inside the node (routed through the node, as the outside
world is): 10.99.0.2 is denied, 10.99.0.3 allowed. Nothing leaves the machine."""

import json
import subprocess

import pytest

from support import aptrepo

pytestmark = pytest.mark.docker

STUDENT = {"subnet": "172.31.1.0/24", "gateway": "172.31.1.1", "bridge_name": "ccc-student",
           "restricted_access": ["10.99.0.0/24"], "allowed_access": ["10.99.0.3"]}
PILLAR = {"ccc": {
    "roles": {"docker": True},
    "only_roles": "docker",
    "cluster": {"networks": {"lab-unrestricted": {"subnet": "172.31.0.0/24", "gateway": "172.31.0.1", "bridge_name": "ccc-lab"},
                             "student-restricted": STUDENT}},
    "docker": {"nvidia_toolkit": {"enabled": True, "version": "1.17.8-1"}, "daemon": {"log-driver": "json-file"}, "registries": []},
}}
EXPECTED_CHAIN = [
    "-A CCC-EGRESS -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN",
    "-A CCC-EGRESS -i ccc-student -o ccc-student -j RETURN",
    "-A CCC-EGRESS -s 172.31.1.0/24 -d 10.99.0.3/32 -i ccc-student -j ACCEPT",
    "-A CCC-EGRESS -s 172.31.1.0/24 -d 10.99.0.0/24 -i ccc-student -j DROP",
]
SETUP_NAMESPACES = """
set -e
ip netns add far; ip link add vfar type veth peer name vfar-p; ip link set vfar-p netns far
ip addr add 10.99.0.1/24 dev vfar; ip link set vfar up
ip -n far addr add 10.99.0.2/24 dev vfar-p; ip -n far addr add 10.99.0.3/24 dev vfar-p
ip -n far link set vfar-p up; ip -n far link set lo up; ip -n far route add default via 10.99.0.1
ip netns exec far setsid python3 -m http.server 8080 --bind 0.0.0.0 >/dev/null 2>&1 < /dev/null &
ip netns add student; ip link add vstu type veth peer name vstu-p; ip link set vstu-p netns student
ip link set vstu master ccc-student; ip link set vstu up
ip -n student addr add 172.31.1.50/24 dev vstu-p; ip -n student link set vstu-p up
ip -n student route add default via 172.31.1.1
sysctl -qw net.ipv4.ip_forward=1
"""
FETCH = ("ip netns exec student python3 -c \"import urllib.request,sys; "
         "urllib.request.urlopen('http://{ip}:8080/', timeout=3); print('reached')\"")


def sh(node, command):
    """Run a shell command in the node: (returncode, stdout + stderr)."""
    result = node.exec(command, check=False)
    return result.returncode, (result.stdout or "") + (result.stderr or "")


def apply(node):
    call = node.salt_call("state.apply", "cluster.docker", check=False)
    return call.states()


@pytest.fixture(scope="module")
def node(sysnodes, node_repo):
    made = sysnodes("docker-role")
    made.repositories = {"ccc-test": {
        "source": f"deb [signed-by=/etc/apt/keyrings/ccc-test.asc] file:{aptrepo.NODE_PATH} ./",
        "key": node_repo.armored_key_path.read_text()}}
    _write_pillar(made, PILLAR)
    made.salt_call("saltutil.sync_all")
    return made


@pytest.fixture(scope="module")
def first_apply(node):
    return apply(node)


def test_engine_installed_pinned_toolkit_held_and_daemon_json_written(node, first_apply):
    failed = {k: v["comment"] for k, v in first_apply.items() if v["result"] is not True}
    assert not failed, failed
    # only the pinned set is held: the unpinned engine gets Debian's fixes with the node's upgrades
    assert sh(node, "apt-mark showhold")[1].split() == ["nvidia-container-toolkit"]
    assert sh(node, "dpkg-query -W -f '${Version}' nvidia-container-toolkit")[1] == "1.17.8-1"
    daemon = json.loads(sh(node, "cat /etc/docker/daemon.json")[1])
    assert daemon["default-runtime"] == "nvidia" and daemon["log-driver"] == "json-file"
    assert sh(node, "systemctl is-active docker")[1].strip() == "active"
    assert sh(node, "docker network inspect student-restricted --format '{{(index .IPAM.Config 0).Subnet}}'")[1].strip() \
        == "172.31.1.0/24"


EXPECTED_INPUT = [
    "-A CCC-EGRESS-INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN",
    "-A CCC-EGRESS-INPUT -d 10.99.0.3/32 -i ccc-student -j RETURN",
    "-A CCC-EGRESS-INPUT -i ccc-student -j DROP",
]
EXPECTED_V6_INPUT = [
    "-A CCC-EGRESS-INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN",
    "-A CCC-EGRESS-INPUT -i ccc-student -j DROP",
]


def _chains_in_place(node):
    """Every chain of the egress firewall holds its rules, each jumped to first from its parent."""
    assert sh(node, "iptables -S DOCKER-USER")[1].splitlines()[1] == "-A DOCKER-USER -j CCC-EGRESS"
    assert sh(node, "iptables -S CCC-EGRESS")[1].splitlines()[1:] == EXPECTED_CHAIN
    assert sh(node, "iptables -S INPUT")[1].splitlines()[1] == "-A INPUT -j CCC-EGRESS-INPUT"
    assert sh(node, "iptables -S CCC-EGRESS-INPUT")[1].splitlines()[1:] == EXPECTED_INPUT
    assert sh(node, "ip6tables -S INPUT")[1].splitlines()[1] == "-A INPUT -j CCC-EGRESS-INPUT"
    assert sh(node, "ip6tables -S CCC-EGRESS-INPUT")[1].splitlines()[1:] == EXPECTED_V6_INPUT
    assert sh(node, "ip6tables -S FORWARD")[1].splitlines()[1] == "-A FORWARD -j CCC-EGRESS"


def test_the_chains_are_jumped_to_first_and_hold_the_rules_in_order(node, first_apply):
    _chains_in_place(node)


def test_a_second_apply_changes_nothing_and_does_not_restart_dockerd(node, first_apply):
    started = sh(node, "systemctl show docker -p ActiveEnterTimestampMonotonic")[1]
    second = apply(node)
    changed = {k: v["changes"] for k, v in second.items() if v["changes"]}
    assert not changed, changed
    assert sh(node, "systemctl show docker -p ActiveEnterTimestampMonotonic")[1] == started


def _write_pillar(node, pillar):
    pillar = json.loads(json.dumps(pillar))
    pillar["ccc"]["docker"]["repositories"] = node.repositories
    node.write_pillar("site/nodes/docker-role.sls", json.dumps(pillar))


def test_a_hold_is_released_when_the_pin_goes(node, first_apply):
    """The admin drops the toolkit's pin; the engine carries a hold an older role set while it was
    unpinned. One apply releases both; the next changes nothing."""
    sh(node, "apt-mark hold docker.io")
    unpinned = json.loads(json.dumps(PILLAR))
    unpinned["ccc"]["docker"]["nvidia_toolkit"]["version"] = None
    _write_pillar(node, unpinned)
    try:
        released = apply(node)
        assert {k: v["comment"] for k, v in released.items() if v["result"] is not True} == {}
        assert sh(node, "apt-mark showhold")[1].split() == []
        again = apply(node)
        assert {k: v["changes"] for k, v in again.items() if v["changes"]} == {}
    finally:
        _write_pillar(node, PILLAR)


def test_restricted_traffic_is_dropped_and_the_exception_passes(node, first_apply):
    code, output = sh(node, SETUP_NAMESPACES)
    assert code == 0, output
    assert sh(node, FETCH.format(ip="10.99.0.3"))[0] == 0
    assert sh(node, FETCH.format(ip="10.99.0.2"))[0] != 0


def _container_fetch(node, ip):
    """A real container on the restricted network opens a TCP connection (the tiny test image's busybox nc)."""
    return sh(node, f"docker run --rm --network student-restricted --entrypoint /bin/busybox ccc-test/tiny:1 "
                    f"nc -w 3 {ip} 8080 </dev/null")[0]


def test_a_container_on_the_restricted_network_is_held_to_the_rules(node, first_apply):
    """Follows the namespaces test (the far side serves 10.99.0.2 and .3); also after dockerd restarts."""
    saved = subprocess.run(["docker", "save", "ccc-test/tiny:1"], capture_output=True, check=True).stdout
    subprocess.run(["docker", "exec", "-i", node.container, "docker", "load"], input=saved, capture_output=True, check=True)
    assert _container_fetch(node, "10.99.0.3") == 0, "the allowed address is not reachable from a container"
    assert _container_fetch(node, "10.99.0.2") != 0, "a container reached a denied address"
    sh(node, "systemctl restart docker")
    assert _container_fetch(node, "10.99.0.3") == 0
    assert _container_fetch(node, "10.99.0.2") != 0, "a container reached a denied address after a dockerd restart"


def test_a_restricted_container_cannot_reach_the_node_itself(node, first_apply):
    """The node serves on every address (a service of the node); from the restricted network
    neither its gateway nor its other address answers, while the unrestricted network's container
    reaches it and the restricted container still resolves a peer by name (Docker's DNS)."""
    sh(node, "setsid python3 -m http.server 8080 --bind 0.0.0.0 >/dev/null 2>&1 < /dev/null &")
    assert sh(node, "for i in $(seq 50); do python3 -c \"import socket; socket.create_connection(('127.0.0.1', 8080), 1)\" "
                    "&& exit 0; sleep 0.1; done; exit 1")[0] == 0
    lab = sh(node, "docker run --rm --network lab-unrestricted --entrypoint /bin/busybox ccc-test/tiny:1 "
                   "nc -w 3 172.31.0.1 8080 </dev/null")[0]
    assert lab == 0, "the unrestricted container does not reach the node: the test proves nothing"
    assert _container_fetch(node, "172.31.1.1") != 0, "a restricted container reached the node on its gateway"
    assert _container_fetch(node, node.ip()) != 0, "a restricted container reached the node on its LAN address"
    sh(node, "docker run -d --name peer --network student-restricted --entrypoint /bin/busybox ccc-test/tiny:1 sleep 300")
    try:
        resolved = sh(node, "docker run --rm --network student-restricted --entrypoint /bin/busybox ccc-test/tiny:1 "
                            "nslookup peer 127.0.0.11")
        assert resolved[0] == 0 and "172.31.1." in resolved[1], resolved[1]
    finally:
        sh(node, "docker rm -f peer")


def test_rules_come_back_after_a_dockerd_restart_and_a_reboot(node, first_apply):
    sh(node, "systemctl restart docker")
    _chains_in_place(node)
    node.restart()
    assert sh(node, "systemctl is-active docker ccc-docker-firewall")[1].split() == ["active", "active"]
    _chains_in_place(node)


def test_clean_removes_the_firewall_and_keeps_engine_networks_and_containers(node, first_apply):
    """``ccc:roles:docker: absent`` applies cluster.docker.clean: runs last in this module."""
    sh(node, "docker run -d --name keep-me --network student-restricted --entrypoint /bin/busybox ccc-test/tiny:1 "
             "sleep 600")
    call = node.salt_call("state.apply", "cluster.docker.clean", check=False)
    assert isinstance(call.data, dict), call.stdout[-3000:] + call.stderr[-3000:]
    assert {k: v["comment"] for k, v in call.data.items() if v["result"] is not True} == {}
    assert sh(node, "iptables -S CCC-EGRESS")[0] != 0, "the chain is still there"
    assert "CCC-EGRESS" not in sh(node, "iptables -S DOCKER-USER")[1]
    for tool in ("iptables", "ip6tables"):
        assert sh(node, f"{tool} -S CCC-EGRESS-INPUT")[0] != 0 and "CCC-EGRESS" not in sh(node, f"{tool} -S INPUT")[1]
    assert sh(node, "ip6tables -S CCC-EGRESS")[0] != 0
    assert sh(node, "test -e /etc/systemd/system/ccc-docker-firewall.service")[0] != 0
    assert sh(node, "systemctl is-active docker")[1].strip() == "active"
    assert "student-restricted" in sh(node, "docker network ls --format '{{.Name}}'")[1].split()
    assert sh(node, "docker inspect -f '{{.State.Running}}' keep-me")[1].strip() == "true"
    again = node.salt_call("state.apply", "cluster.docker.clean", check=False)
    assert {k: v["changes"] for k, v in again.data.items() if v["changes"]} == {}
