"""The swarm role and the overlay per STACK on two systemd test nodes (tests/support/sysnode.py),
as an admin runs them: ``state.apply cluster`` (docker + swarm) initialises the swarm on the
leader; the admin copies the worker token into the GPG secrets pillar of the second node, whose
next apply joins it. One stack placed on both nodes is deployed by ``state.apply containers`` on
each (``ccc-test/sshd:1`` loaded into each node's dockerd, nothing is pulled): its containers
resolve and reach each other by node name over ``overlay-<STACK>`` (``getent hosts`` and a TCP
connect to sshd's port 22). With the overlay gone, a worker's deploy still runs the container on
its other networks and tells its user and admin the overlay is pending; the leader's deploy makes
it again and the worker's next apply (the master's redeploy, here by hand) attaches it. Overlays
are encrypted; an older unencrypted one is reported while in use and made again encrypted once
unused. Removing the stack from pillar removes the overlay on the leader, as soon as the worker's
endpoint has left it (whichever node applies first); ``absent`` makes the worker leave and
refuses to force the manager out. Second applies change nothing. No real GPU or NFS is needed: the
storage roots are plain folders in each node (the stack's home is per node here)."""

import json
import os
import subprocess
import time

import pytest

from support import secrets
from support.sysnode import failed as _failed, changed as _changed

pytestmark = pytest.mark.docker

LEADER, WORKER = "swarm-a", "swarm-b"
STACK = "ana-dist"
EMAIL = "ana.novak@example.org"
STORAGE = {"nfs": {key: f"/srv/ccc/shared/{key}" for key in
                   ("user_data", "group_data", "apps_data", "dataset_data", "private_data")},
           "local": {key: f"/srv/ccc/local/{key}" for key in ("hdd_data", "ssd_data", "sshd_data")}}


def _kernel_has_esp():
    """Whether this kernel (the test nodes share the host's) carries IPsec ESP with AES-GCM, which
    Docker's encrypted overlays need. Without it (some CI kernels) the overlays of the traffic
    tests are made unencrypted (``ccc:swarm:encrypted: false``) and the encryption test checks the
    networks Docker makes, not traffic through them."""
    name = f"ccc-esp-probe-{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", name], capture_output=True).returncode != 0:
        return False
    try:
        return subprocess.run(["ip", "netns", "exec", name, "ip", "xfrm", "state", "add", "src", "10.0.0.1", "dst",
                               "10.0.0.2", "proto", "esp", "spi", "0x100", "mode", "transport", "aead",
                               "rfc4106(gcm(aes))", "0x" + "01" * 20, "128"], capture_output=True).returncode == 0
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


ESP = _kernel_has_esp()


def _site(leader_ip, containers, swarm_role=True, encrypted=ESP):
    return {"ccc": {
        "only_roles": "docker,swarm",
        "roles": {"swarm": swarm_role},
        "cluster": {
            "mount_points": STORAGE,
            "access_networks": {"unrestricted": ["lab-unrestricted"]},
            "networks": {"lab-unrestricted": {"subnet": "172.31.0.0/24", "gateway": "172.31.0.1", "bridge_name": "ccc-lab"},
                         "claims": {"subnet": "172.31.2.0/24", "gateway": "172.31.2.1", "bridge_name": "ccc-claims"}},
            "image_policy": {"allowed_prefixes": ["ccc-test/"], "pull": "missing"},
            "apps": [],
            "orphans": {"max_share": 1.0},  # the test's one container may go as an orphan
        },
        "docker": {"registries": [], "nvidia_toolkit": {"enabled": False}},
        "user_types": {"researcher": {"access": "unrestricted", "default_nodes": [LEADER, WORKER],
                                      "allowed_nodes": [LEADER, WORKER]}},
        "users": {EMAIL: {"USER_NAME": "ana", "USER_TYPE": "researcher", "USER_FULLNAME": "Ana Novak",
                          "USER_PUBKEY": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeSwarmTestKey000000000000000000000000 ana"}},
        "containers": containers,
        "swarm": {"leader": LEADER, "leader_addr": leader_ip, "encrypted": encrypted},
    }}


CONTAINERS = [{"STACK_NAME": STACK, "USER_EMAIL": EMAIL, "CONTAINER_IMAGE": "ccc-test/sshd:1"}]


def _apply(node, sls):
    return node.salt_call("state.apply", sls, check=False).states()


def _write_site(node, containers, swarm_role=True, encrypted=ESP):
    node.write_pillar("site/init.sls", json.dumps(_site(node.leader_ip, containers, swarm_role, encrypted)))


@pytest.fixture(scope="module")
def nodes(sysnodes, tmp_path_factory):
    made = {name: sysnodes(name) for name in (LEADER, WORKER)}
    leader_ip = made[LEADER].ip()
    saved = subprocess.run(["docker", "save", "ccc-test/sshd:1"], capture_output=True, check=True).stdout
    for name, node in made.items():
        node.leader_ip = leader_ip
        node.add_apt_source()  # the site's Debian mirror (docker.io), as every node has one
        node.exec("mkdir -p " + " ".join(list(STORAGE["nfs"].values()) + list(STORAGE["local"].values())))
        _write_site(node, CONTAINERS)
        node.write_pillar(f"site/nodes/{name}.sls", json.dumps({"ccc": {"swarm": {"advertise_addr": node.ip()}}}))
        node.write_pillar("site/secrets.sls", "{}\n")  # no secrets yet (the sample's would not decrypt here)
        node.salt_call("saltutil.sync_all")
    made[WORKER].keyring = tmp_path_factory.mktemp("swarm-gpg") / "gpgkeys"
    secrets.make_keyring(made[WORKER].keyring)
    made[WORKER].import_pillar_key(made[WORKER].keyring, tmp_path_factory.mktemp("swarm-key"))
    made["saved_image"] = saved
    return made


def _load_image(node, saved):
    """The stand-in image into the node's own dockerd (nothing can be pulled)."""
    subprocess.run(["docker", "exec", "-i", node.container, "docker", "load"], input=saved, capture_output=True, check=True)


@pytest.fixture(scope="module")
def swarm(nodes):
    """Leader apply (engine + swarm init), the admin copies the worker token into the worker's
    secrets, worker apply (engine + join); the second applies of both."""
    leader, worker = nodes[LEADER], nodes[WORKER]
    runs = {"leader first": _apply(leader, "cluster")}
    assert _failed(runs["leader first"]) == {}, runs["leader first"]
    runs["worker without token"] = _apply(worker, "cluster")
    token = leader.exec("docker swarm join-token -q worker").stdout.strip()
    worker.write_pillar("site/secrets.sls", secrets.secrets_sls(worker.keyring, {"swarm": {"worker_token": token}}))
    secrets.stop_agent(worker.keyring)
    runs["worker"] = _apply(worker, "cluster")
    runs["leader again"] = _apply(leader, "cluster")
    runs["worker again"] = _apply(worker, "cluster")
    for node in (leader, worker):
        _load_image(node, nodes["saved_image"])
    runs["token"] = token
    return runs


def test_the_leader_initialises_and_the_worker_joins_with_the_token_from_secrets(nodes, swarm):
    member = "ccc-cluster-swarm-member"
    assert swarm["leader first"][member]["changes"] == {"swarm": "swarm initialised"}
    without = swarm["worker without token"][member]
    assert without["result"] is False and "ccc:secrets:swarm:worker_token" in without["comment"], without
    assert _failed(swarm["worker"]) == {}, swarm["worker"]
    assert swarm["worker"][member]["changes"] == {"swarm": "joined the swarm"}
    info = json.loads(nodes[WORKER].exec("docker info --format '{{json .Swarm}}'").stdout)
    assert info["LocalNodeState"] == "active" and not info["ControlAvailable"]
    listed = nodes[LEADER].exec("docker node ls --format '{{.Hostname}} {{.Status}}'").stdout.split("\n")
    assert sorted(line for line in listed if line) == [f"{LEADER} Ready", f"{WORKER} Ready"]
    # the token never reaches a state return, the worker's files or its journal
    texts = {"worker run": swarm["worker"], "without token": swarm["worker without token"]}
    texts["files"] = nodes[WORKER].exec(f"grep -rIa --exclude-dir=gpgkeys -l -e {swarm['token']} /etc /var/log /root /srv "
                                        "2>/dev/null", check=False).stdout
    secrets.assert_no_secret({k: json.dumps(v) for k, v in texts.items()}, [swarm["token"]])


def test_the_leader_made_the_stacks_overlay_and_second_applies_change_nothing(nodes, swarm):
    assert swarm["leader first"]["ccc-cluster-swarm-overlays"]["changes"] == {"created": [f"overlay-{STACK}"]}
    net = json.loads(nodes[LEADER].exec(["docker", "network", "inspect", f"overlay-{STACK}"]).stdout)[0]
    assert (net["Driver"], net["Scope"], net["Attachable"], net["Internal"]) == ("overlay", "swarm", True, True)
    assert net["Labels"] == {"ccc.swarm-overlay": STACK}
    assert ("encrypted" in net["Options"]) is ESP, net["Options"]  # IPsec between the nodes where the kernel has it
    assert _changed(swarm["leader again"]) == {} and _failed(swarm["leader again"]) == {}
    assert _changed(swarm["worker again"]) == {} and _failed(swarm["worker again"]) == {}


@pytest.fixture(scope="module")
def deployed(nodes, swarm):
    """The stack deployed on both nodes: the worker first, then the leader; then both again."""
    return {label: _apply(nodes[name], "containers")
            for label, name in (("worker", WORKER), ("leader", LEADER), ("worker again", WORKER),
                                ("leader again", LEADER))}


def _in_container(node, command):
    return node.exec(["docker", "exec", STACK, "bash", "-c", command], check=False)


def test_each_instance_reaches_the_other_by_node_name_over_the_overlay(nodes, deployed):
    for label in ("worker", "leader"):
        assert _failed(deployed[label]) == {}, deployed[label]
    for here, there in ((LEADER, WORKER), (WORKER, LEADER)):
        node = nodes[here]
        attrs = json.loads(node.exec(["docker", "inspect", STACK]).stdout)[0]
        endpoint = attrs["NetworkSettings"]["Networks"][f"overlay-{STACK}"]
        assert here in endpoint["Aliases"]
        assert {"lab-unrestricted", "claims"} <= set(attrs["NetworkSettings"]["Networks"])
        resolved = _in_container(node, f"getent hosts {there}")
        assert resolved.returncode == 0 and resolved.stdout.split()[0].startswith("10."), resolved.stdout + resolved.stderr
        connected = _in_container(node, f"timeout 5 bash -c 'exec 3<>/dev/tcp/{there}/22 && head -c 7 <&3'")
        assert connected.stdout == "SSH-2.0", f"{here} -> {there}: {connected.stdout!r} {connected.stderr!r}"


def test_the_worker_was_told_the_overlay_was_pending_only_until_it_existed(nodes, deployed):
    """The leader's cluster run made the overlay before any deploy, so the worker attached it at
    once: its report says nothing of a pending overlay; both second applies change nothing."""
    state = f"ccc-container-{STACK}"
    assert deployed["worker"][state]["changes"]["overlay"] == {"network": f"overlay-{STACK}", "alias": WORKER}
    report = nodes[WORKER].exec(f"cat /srv/ccc/shared/user_data/{EMAIL}/container-settings/{STACK}.deploy").stdout
    assert "being created" not in report and WORKER in report
    for label in ("worker again", "leader again"):
        assert _failed(deployed[label]) == {} and _changed(deployed[label]) == {}, deployed[label]


def test_a_missing_overlay_is_pending_on_the_worker_and_made_by_the_leaders_deploy(nodes, deployed):
    """The overlay removed (the stack's containers stopped using it): the worker's deploy finds
    none, runs the container on its other networks and says so; the leader's deploy makes it."""
    leader, worker = nodes[LEADER], nodes[WORKER]
    for node in (worker, leader):
        node.exec(["docker", "network", "disconnect", "-f", f"overlay-{STACK}", STACK])
    leader.exec(["docker", "network", "rm", f"overlay-{STACK}"])
    worker_run = _apply(worker, "containers")
    state = worker_run[f"ccc-container-{STACK}"]
    assert state["result"] is True and f"overlay-{STACK} pending" in state["comment"], state
    attrs = json.loads(worker.exec(["docker", "inspect", STACK]).stdout)[0]
    assert attrs["State"]["Running"] and set(attrs["NetworkSettings"]["Networks"]) == {"lab-unrestricted", "claims"}
    report = worker.exec(f"cat /srv/ccc/shared/user_data/{EMAIL}/container-settings/{STACK}.deploy").stdout
    assert f"overlay-{STACK}" in report and "being created" in report
    leader_run = _apply(leader, "containers")
    assert leader_run[f"ccc-container-{STACK}"]["changes"]["overlay"]["network_created"] is True
    worker_again = _apply(worker, "containers")  # the master's redeploy, in a masterless test
    assert worker_again[f"ccc-container-{STACK}"]["changes"]["overlay"]["alias"] == WORKER
    connected = _in_container(worker, f"timeout 5 bash -c 'exec 3<>/dev/tcp/{LEADER}/22 && head -c 7 <&3'")
    assert connected.stdout == "SSH-2.0"


def _overlay(node):
    found = node.exec(["docker", "network", "inspect", f"overlay-{STACK}"], check=False)
    return json.loads(found.stdout)[0] if found.returncode == 0 else None


def test_an_unencrypted_overlay_is_reported_while_used_and_made_again_encrypted_once_unused(nodes, deployed):
    """An overlay of the stack made without encryption (by an older ccc-salt, or while
    ``encrypted`` was false): with ``encrypted: true`` the leader's cluster run keeps it while a
    container uses it and says so; once unused, the next run makes it again, encrypted; the
    containers' next deploys attach it."""
    leader, worker = nodes[LEADER], nodes[WORKER]
    for node in (worker, leader):
        node.exec(["docker", "network", "disconnect", "-f", f"overlay-{STACK}", STACK])
    leader.exec(["docker", "network", "rm", f"overlay-{STACK}"])
    # The swarm frees the name a moment after `rm` returns ("already exists" until then): wait for
    # that, not for a fixed time.
    create = ["docker", "network", "create", "-d", "overlay", "--attachable", "--internal",
              "--label", f"ccc.swarm-overlay={STACK}", f"overlay-{STACK}"]
    deadline = time.monotonic() + 60
    while (made := leader.exec(create, check=False)).returncode and "already exists" in made.stderr:
        assert time.monotonic() < deadline, "the removed overlay's name was not free again within 60 s"
        time.sleep(0.2)
    assert made.returncode == 0, made.stderr
    leader.exec(["docker", "network", "connect", f"overlay-{STACK}", STACK])
    for node in (worker, leader):
        _write_site(node, CONTAINERS, encrypted=True)
    kept = _apply(leader, "cluster")["ccc-cluster-swarm-overlays"]
    assert kept["result"] is True and kept["changes"] == {}, kept
    assert f"not encrypted (made before ccc-salt encrypted overlays), made again encrypted once no container uses " \
           f"them: overlay-{STACK}" in kept["comment"]
    assert "encrypted" not in _overlay(leader)["Options"]
    leader.exec(["docker", "network", "disconnect", f"overlay-{STACK}", STACK])
    remade = _apply(leader, "cluster")["ccc-cluster-swarm-overlays"]
    assert remade["changes"] == {"encrypted": [f"overlay-{STACK}"]}, remade
    assert "encrypted" in _overlay(leader)["Options"]
    again = _apply(leader, "cluster")["ccc-cluster-swarm-overlays"]
    assert again["changes"] == {} and "not encrypted" not in again["comment"], again
    for node in (leader, worker):
        run = _apply(node, "containers")
        assert run[f"ccc-container-{STACK}"]["changes"]["overlay"]["network"] == f"overlay-{STACK}", run
    if ESP:
        connected = _in_container(worker, f"timeout 5 bash -c 'exec 3<>/dev/tcp/{LEADER}/22 && head -c 7 <&3'")
        assert connected.stdout == "SSH-2.0", "no traffic over the encrypted overlay"


def test_removing_the_stack_removes_its_overlay_on_the_leader(nodes, deployed):
    """Runs last: the stack leaves pillar. The leader applies first: its container goes, the
    overlay stays while the worker's container is on it (the leader waits its bounded time for
    endpoints that are leaving, then says so). The worker's apply removes its container and tells
    the master, whose reactor has the leader prune (``ccc.swarm_overlay_released``, which runs
    ``ccc_swarm.overlays`` there: called here by hand, the test has no master); that run finds the
    worker's endpoint leaving and removes the overlay as soon as it has left, within the run."""
    leader, worker = nodes[LEADER], nodes[WORKER]
    for node in (worker, leader):
        _write_site(node, [])
    leader_run = _apply(leader, "containers")
    assert _failed(leader_run) == {}, leader_run
    assert _overlay(leader) is not None, "the overlay went while the worker's container was on it"
    worker_run = _apply(worker, "containers")
    assert _failed(worker_run) == {}, worker_run
    assert worker.exec(["docker", "inspect", STACK], check=False).returncode != 0
    pruned = leader.salt_call("ccc_swarm.overlays", check=False)
    assert pruned.data["removed"] == [f"overlay-{STACK}"], pruned.stdout[-2000:] + pruned.stderr[-2000:]
    assert _overlay(leader) is None
    cluster_run = _apply(leader, "cluster")
    assert _changed(cluster_run) == {} and _failed(cluster_run) == {}, cluster_run


def test_clean_leaves_the_swarm_on_the_worker_and_never_forces_the_manager_out(nodes, deployed):
    """``ccc:roles:swarm: absent`` (after the removal test): the worker leaves with a plain
    ``docker swarm leave``; the leader, the swarm's only manager, is not forced out (that would
    end the swarm): its clean fails and says what to do."""
    leader, worker = nodes[LEADER], nodes[WORKER]
    for node in (worker, leader):
        _write_site(node, [], swarm_role="absent")
    left = _apply(worker, "cluster")["ccc-cluster-swarm-clean-leave"]
    assert (left["result"], left["changes"]) == (True, {"swarm": "left"}), left
    assert worker.exec("docker info --format '{{.Swarm.LocalNodeState}}'").stdout.strip() == "inactive"
    refused = _apply(leader, "cluster")["ccc-cluster-swarm-clean-leave"]
    assert refused["result"] is False and "not made to leave" in refused["comment"]
    assert f"docker node demote {LEADER}" in refused["comment"]
    assert leader.exec("docker info --format '{{.Swarm.LocalNodeState}}'").stdout.strip() == "active"

