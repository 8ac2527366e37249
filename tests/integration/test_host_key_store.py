"""The containers' SSH host keys live in a shared key store under no container's bind, for real:
two simulated nodes (their own dockerds, their own sshd_data, one shared storage) deploy through
``state.apply containers``. A container with ``ADMIN_USER_ACCESS`` (every user's data mounted,
root inside) finds another stack's private host key nowhere; a key set the older ccc-salt kept
below the user-data root is moved into the store with its keys unchanged (users' known_hosts
keep working); a stack that moves to the other node keeps its host key."""

import pathlib

import pytest

import ccc_hostkeys
from support.nodes import remove_managed_containers
from support.site import SaltNode

pytestmark = pytest.mark.docker

ANA, BOR = "ana.novak@example.org", "bor.kralj@example.org"


def containers(bor_nodes):
    return [{"STACK_NAME": "ana-main", "USER_EMAIL": ANA, "CONTAINER_IMAGE": "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1",
             "ADMIN_USER_ACCESS": True, "DEPLOYMENT_NODES": ["node1"]},
            {"STACK_NAME": "bor-main", "USER_EMAIL": BOR, "CONTAINER_IMAGE": "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1",
             "DEPLOYMENT_NODES": bor_nodes}]


def extra(storage, node, bor_nodes):
    """Each node its own local sshd_data (the integration nodes share one host), one shared store."""
    return {"containers": containers(bor_nodes),
            "cluster": {"mount_points": {"local": {"sshd_data": str(pathlib.Path(storage) / "local" / f"sshd-{node}")}}}}


@pytest.fixture
def nodes(tmp_path, clean_node1, node2_dockerd, storage):
    remove_managed_containers(node2_dockerd)
    for node in ("node1", "node2"):
        (pathlib.Path(storage) / "local" / f"sshd-{node}").mkdir()
    made = {}
    for node, daemon in (("node1", clean_node1), ("node2", node2_dockerd)):
        made[node] = SaltNode(tmp_path / node, node, daemon.url, storage, extra_ccc=extra(storage, node, ["node1"]))
        made[node].client = daemon.client()
    yield made
    remove_managed_containers(node2_dockerd)


def in_container(node, stack, *command):
    result = node.client.containers.get(stack).exec_run(list(command), user="root")
    return result.exit_code, result.output.decode(errors="replace")


def legacy_set(storage, stack):
    """A key set where the older ccc-salt kept it: ``<user_data>/.ccc-salt/host-keys/<STACK>``."""
    legacy = pathlib.Path(storage) / "shared" / "user_data" / ".ccc-salt"
    scratch = pathlib.Path(storage) / "local" / "older-ccc-salt"
    scratch.mkdir()
    ccc_hostkeys.ensure(str(scratch), str(legacy), stack, rsa_bits=1024)
    return legacy / "host-keys" / stack


def served_public_key(node, stack):
    code, output = in_container(node, stack, "cat", "/home/.sshd/keys/ssh_host_ed25519_key.pub")
    assert code == 0, output
    return output


def test_an_admin_container_reads_no_other_host_key_and_a_moved_stack_keeps_its_own(nodes, storage):
    node1, node2 = nodes["node1"], nodes["node2"]
    old = legacy_set(storage, "bor-main")
    old_public = (old / "ssh_host_ed25519_key.pub").read_text()
    bor_private = (old / "ssh_host_ed25519_key").read_text()
    results, code = node1.apply()
    assert code == 0, {k: v["comment"] for k, v in results.items() if v["result"] is not True}

    # The older set moved into the store, keys unchanged: bor's container serves the same key.
    store = pathlib.Path(storage) / "shared" / ".ccc-host-keys"
    assert served_public_key(node1, "bor-main") == old_public
    assert (store / "host-keys" / "bor-main" / "ssh_host_ed25519_key.pub").read_text() == old_public
    assert not old.exists() and not (old.parent).exists()

    # Root in the admin container, every user's data mounted: bor's private key is nowhere.
    code, mounted = in_container(node1, "ana-main", "ls", "-a", "/storage/admin/users", "/storage/admin/users/.ccc-salt")
    assert code in (0, 1) and "host-keys" not in mounted, mounted
    body = bor_private.splitlines()[2]  # a line of the key's base64 body, nothing of its armour
    code, found = in_container(node1, "ana-main", "/bin/busybox", "grep", "-rlF", body, "/storage", "/home", "/opt")
    assert code == 1 and found == "", f"bor-main's private host key is readable in ana-main: {found}"
    code, own = in_container(node1, "ana-main", "ls", "/home/.sshd/keys")
    assert code == 0 and "ssh_host_ed25519_key" in own.split()  # its own keys, and only those, are there
    assert served_public_key(node1, "ana-main") != old_public

    # bor-main moves to node2 (its own sshd_data: no copy there yet): the same host key.
    for node in (node1, node2):
        node.write_pillar(extra(storage, node.node, ["node2"]))
    results, code = node2.apply()
    assert code == 0, {k: v["comment"] for k, v in results.items() if v["result"] is not True}
    assert served_public_key(node2, "bor-main") == old_public
