"""The docker cluster role renders for every sample node (masterless salt-call against
sample-pillar/, nothing applied), and ``test=True`` on node1 says what an admin would get: the
packages held only where pinned, daemon.json with the nvidia runtime, the egress rules in order, the registry login
(never its credentials). The Docker endpoint is a socket that does not exist, so engine states
fail with one clean line; the host's packages, iptables and files are only read."""

import json

import pytest

from support.site import SaltNode

DEAD = "unix:///nonexistent/ccc-docker-role.sock"
DOCKER_STATES = ["ccc-cluster-docker-engine-packages", "ccc-cluster-docker-nvidia-toolkit-packages",
                 "ccc-cluster-docker-service", "ccc-cluster-docker-daemon-json",
                 "ccc-cluster-docker-network-lab-unrestricted", "ccc-cluster-docker-network-student-restricted",
                 "ccc-cluster-docker-network-claims", "ccc-cluster-docker-firewall-script",
                 "ccc-cluster-docker-firewall-unit", "ccc-cluster-docker-firewall-chain",
                 "ccc-cluster-docker-firewall-service", "ccc-cluster-docker-registry-registry.example.org",
                 "ccc-cluster-docker-portainer-agent", "ccc-cluster-docker-portainer-ui"]


def args(rendered, state_id):
    return {k: v for item in next(iter(v for k, v in rendered[state_id].items() if not k.startswith("__")))
            if isinstance(item, dict) for k, v in item.items()}


@pytest.mark.parametrize("node", ["node1", "node2", "node3"])
def test_the_docker_role_renders_for_every_sample_node(tmp_path, node):
    rendered, code = SaltNode(tmp_path, node, DEAD, tmp_path / "storage").salt_call("state.show_sls", "cluster.docker")
    assert code == 0 and isinstance(rendered, dict), rendered
    assert sorted(rendered) == sorted(DOCKER_STATES)
    # unpinned (the samples pin nothing): not held, so Debian's security fixes arrive
    assert args(rendered, "ccc-cluster-docker-engine-packages") == {"pkgs": ["docker.io"], "hold": False, "order": 10000}
    assert args(rendered, "ccc-cluster-docker-daemon-json")["nvidia"] is True  # every sample node lists GPUs
    assert "password" not in json.dumps(rendered) and "PGP" not in json.dumps(rendered)


def test_toolkit_off_pinned_versions_and_role_off(tmp_path):
    salt = SaltNode(tmp_path, "node1", DEAD, tmp_path / "storage", extra_ccc={"docker": {
        "nvidia_toolkit": {"enabled": False}, "engine": {"version": "20.10.24+dfsg1-1+deb12u1"}}})
    rendered, _ = salt.salt_call("state.show_sls", "cluster.docker")
    assert "ccc-cluster-docker-nvidia-toolkit-packages" not in rendered
    engine = args(rendered, "ccc-cluster-docker-engine-packages")
    assert engine["pkgs"] == [{"docker.io": "20.10.24+dfsg1-1+deb12u1"}]
    assert (engine["hold"], engine["update_holds"]) == (True, True)  # pinned: held, a new pin installs through it
    assert args(rendered, "ccc-cluster-docker-daemon-json")["nvidia"] is False
    salt.write_pillar({"roles": {"docker": False}})
    rendered, _ = salt.salt_call("state.show_sls", "cluster.docker")
    assert list(rendered) == ["ccc-cluster-docker-off"]


def test_dry_run_on_node1_reports_what_would_change(tmp_path):
    salt = SaltNode(tmp_path, "node1", DEAD, tmp_path / "storage")
    output, _ = salt.salt_call("state.apply", "cluster.docker", "test=True", check=False)
    results = {key.split("_|-")[1]: value for key, value in output.items()}
    assert sorted(results) == sorted(DOCKER_STATES)
    daemon = results["ccc-cluster-docker-daemon-json"]
    assert daemon["comment"].endswith("would be written (dockerd restarted)") or daemon["changes"] == {}
    chain = results["ccc-cluster-docker-firewall-chain"]
    assert chain["result"] in (None, True)
    if chain["result"] is None:
        assert chain["changes"]["ipv4 CCC-EGRESS"]["added"][0] == "-A CCC-EGRESS -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN"
        assert chain["changes"]["ipv4 CCC-EGRESS"]["added"][-1].endswith("-d 10.0.0.0/8 -i ccc1-stude -j DROP")
    login = results["ccc-cluster-docker-registry-registry.example.org"]
    assert (login["result"], login["comment"]) in ((None, "would log in to registry.example.org"),
                                                    (True, "logged in to registry.example.org"))
    for state_id in ("ccc-cluster-docker-network-claims", "ccc-cluster-docker-portainer-agent",
                     "ccc-cluster-docker-portainer-ui"):
        assert results[state_id]["result"] is False
        assert results[state_id]["comment"] == f"the Docker engine of this node does not answer ({DEAD})"
    assert "PGP" not in json.dumps(output) and "secret" not in json.dumps(output).lower()
