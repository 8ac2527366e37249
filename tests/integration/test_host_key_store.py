"""The containers' SSH host keys and the cluster state dir stay root's where a container mounts
the folder above them, for real: two simulated nodes (their own dockerds, their own sshd_data, one
shared storage) deploy through ``state.apply containers``. The key sets live in the state dir on
the user-data share (``<user_data>/.ccc-salt/host-keys``, where the older ccc-salt kept them: users'
known_hosts keep working), which a container with ``ADMIN_USER_ACCESS`` (every user's data
mounted read-write, root inside) sees as an empty read-only tmpfs (``ccc_covers``): it reads no
other stack's private key, writes no move marker or deploy record, and cannot unmount the cover,
even after a restart, while the host's files stay as they were. A stack that moves to the other
node keeps its host key."""

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


def state_dir(storage):
    return pathlib.Path(storage) / "shared" / "user_data" / ".ccc-salt"


def older_set(storage, stack):
    """A key set where the older ccc-salt kept it, the default store: ``<state_dir>/host-keys/<STACK>``."""
    scratch = pathlib.Path(storage) / "local" / "older-ccc-salt"
    scratch.mkdir()
    ccc_hostkeys.ensure(str(scratch), str(state_dir(storage)), stack, rsa_bits=1024)
    return state_dir(storage) / "host-keys" / stack


def served_public_key(node, stack):
    code, output = in_container(node, stack, "cat", "/home/.sshd/keys/ssh_host_ed25519_key.pub")
    assert code == 0, output
    return output


def snapshot(folder):
    """Every path below ``folder`` with its mode and content (folders: None)."""
    return {str(path.relative_to(folder)): (path.stat().st_mode, None if path.is_dir() else path.read_bytes())
            for path in sorted(folder.rglob("*"))}


COVER = "/storage/admin/users/.ccc-salt"
ATTACKS = {  # root in the admin container, every user's data mounted read-write
    "read a key": ["cat", f"{COVER}/host-keys/bor-main/ssh_host_ed25519_key"],
    "write a move marker": ["sh", "-c", f"mkdir -p {COVER}/running/bor-main && echo {{}} > {COVER}/running/bor-main/node2.json"],
    "write a deploy record": ["sh", "-c", f"mkdir -p {COVER}/last-deploy/bor-main && echo {{}} > {COVER}/last-deploy/bor-main/node1.json"],
    "write a file": ["touch", f"{COVER}/x"],
    "unmount the cover": ["/bin/busybox", "umount", COVER],
    "detach the cover": ["/bin/busybox", "umount", "-l", COVER],
    "remount it writable": ["/bin/busybox", "mount", "-o", "remount,rw", COVER],
    "move the cover away": ["mv", COVER, "/storage/admin/users/elsewhere"],
}


def assert_covered(node, host_before, storage):
    code, listing = in_container(node, "ana-main", "ls", "-a", COVER)
    assert code == 0 and sorted(listing.split()) == [".", ".."], listing  # an empty folder
    code, mounts = in_container(node, "ana-main", "cat", "/proc/self/mountinfo")
    cover = [line for line in mounts.splitlines() if line.split()[4] == COVER]
    assert len(cover) == 1 and " tmpfs " in cover[0] and cover[0].split()[5].startswith("ro"), cover
    for what, command in ATTACKS.items():
        code, output = in_container(node, "ana-main", *command)
        assert code != 0, f"{what} worked in the admin container: {output}"
    code, listing = in_container(node, "ana-main", "ls", "-a", COVER)
    assert sorted(listing.split()) == [".", ".."], listing
    assert snapshot(state_dir(storage)) == host_before  # the host's markers, records and keys as they were


def test_an_admin_container_reads_and_writes_nothing_of_root_and_a_moved_stack_keeps_its_key(nodes, storage):
    node1, node2 = nodes["node1"], nodes["node2"]
    old = older_set(storage, "bor-main")
    old_public = (old / "ssh_host_ed25519_key.pub").read_text()
    bor_private = (old / "ssh_host_ed25519_key").read_text()
    results, code = node1.apply()
    assert code == 0, {k: v["comment"] for k, v in results.items() if v["result"] is not True}

    # The set the older ccc-salt made is the one served, at its place, root-only.
    assert served_public_key(node1, "bor-main") == old_public
    assert (old / "ssh_host_ed25519_key.pub").read_text() == old_public
    assert state_dir(storage).stat().st_mode & 0o777 == 0o700 and old.parent.stat().st_mode & 0o777 == 0o700
    assert (state_dir(storage) / "running" / "bor-main").is_dir()  # root's move markers are there on the host

    # Root in the admin container: the state dir is an empty read-only tmpfs it cannot remove.
    host_before = snapshot(state_dir(storage))
    assert_covered(node1, host_before, storage)
    body = bor_private.splitlines()[2]  # a line of the key's base64 body, nothing of its armour
    code, found = in_container(node1, "ana-main", "/bin/busybox", "grep", "-rlF", body, "/storage", "/home", "/opt")
    assert code == 1 and found == "", f"bor-main's private host key is readable in ana-main: {found}"
    code, own = in_container(node1, "ana-main", "ls", "/home/.sshd/keys")
    assert code == 0 and "ssh_host_ed25519_key" in own.split()  # its own keys, and only those, are there
    assert served_public_key(node1, "ana-main") != old_public
    node1.client.containers.get("ana-main").restart()  # the cover comes back with the container
    assert_covered(node1, host_before, storage)

    # Only the admin container has a cover: bor's container mounts no folder above the state dir.
    assert not [m for m in node1.client.api.inspect_container("bor-main")["HostConfig"]["Mounts"] if m["Type"] == "tmpfs"]

    # bor-main moves to node2 (its own sshd_data: no copy there yet): the same host key.
    for node in (node1, node2):
        node.write_pillar(extra(storage, node.node, ["node2"]))
    results, code = node2.apply()
    assert code == 0, {k: v["comment"] for k, v in results.items() if v["result"] is not True}
    assert served_public_key(node2, "bor-main") == old_public
