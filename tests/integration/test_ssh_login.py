"""SSH end to end: a CCC-like image (Debian minbase + sshd, tests/images/sshd, honouring USER_NAME,
USER_ID and USER_PUBKEY as CCC images do) is deployed by `state.apply containers`; the test logs
in over SSH with the user's key and checks the identity and that the home is the shared user
directory on the (stand-in) NFS storage, and that a live session shows in the node's active
sessions (read from the host's connection tables, as ``salt-run ccc.active_users`` does)."""

import pathlib
import subprocess
import time

import pytest

from support.site import SaltNode, sample_ccc

pytestmark = pytest.mark.docker


def ssh(key, user, address, command):
    return subprocess.run(
        ["ssh", "-i", str(key), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
         "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", f"{user}@{address}", command],
        capture_output=True, text=True, timeout=30,
    )


def test_user_logs_in_with_their_key_into_the_shared_home(tmp_path, clean_node1, storage):
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    pubkey = key.with_suffix(".pub").read_text().strip()
    containers = [dict(c) for c in sample_ccc("node1")["containers"] if c["STACK_NAME"] == "ana-main"]
    containers[0].update(CONTAINER_IMAGE="ccc-test/sshd:1", USER_PUBKEY=pubkey)
    node = SaltNode(tmp_path / "salt", "node1", clean_node1.url, storage, extra_ccc={"containers": containers})

    results, code = node.apply()
    assert code == 0, results
    client = clean_node1.client()
    attrs = client.api.inspect_container("ana-main")
    address = attrs["NetworkSettings"]["Networks"]["lab-unrestricted"]["IPAddress"]

    deadline = time.monotonic() + 60
    while True:
        result = ssh(key, "ana", address, "id; pwd; echo from-the-container > ~/hello.txt")
        if result.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert result.returncode == 0, result.stderr
    identity, home = result.stdout.splitlines()[:2]
    assert identity.startswith("uid=1000(ana)")
    assert home == "/home/ana"
    shared_home = pathlib.Path(storage) / "shared" / "user_data" / "ana.novak@example.org" / "ana-main"
    assert (shared_home / "hello.txt").read_text() == "from-the-container\n"

    # A key the user did not configure is refused.
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    assert ssh(other, "ana", address, "true").returncode != 0
    # The host keys come from the node (read-only mount of this stack's own set), and sshd serves them.
    keys_dir = pathlib.Path(storage) / "local" / "sshd_data" / "stacks" / "ana-main" / "keys"
    assert (keys_dir / "ssh_host_ed25519_key").stat().st_mode & 0o077 == 0
    scan = subprocess.run(["ssh-keyscan", "-t", "ed25519", address], capture_output=True, text=True, timeout=30)
    assert (keys_dir / "ssh_host_ed25519_key.pub").read_text().split()[1] in scan.stdout

    # A live SSH session is seen from the host's connection tables (ccc_usage.active_sessions,
    # what salt-run ccc.active_users asks every node), without docker exec; gone once it ends.
    session = subprocess.Popen(
        ["ssh", "-i", str(key), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
         "-o", "BatchMode=yes", f"ana@{address}", "echo in; sleep 60"], stdout=subprocess.PIPE, text=True)
    try:
        assert session.stdout.readline() == "in\n"
        sessions, code = node.salt_call("ccc_usage.active_sessions")
        assert code == 0
        assert sessions["ana-main"]["user"] == "ana.novak@example.org" and sessions["ana-main"]["sessions"] == 1
    finally:
        session.kill()
        session.wait()
    deadline = time.monotonic() + 20
    while node.salt_call("ccc_usage.active_sessions")[0]["ana-main"]["sessions"] and time.monotonic() < deadline:
        time.sleep(1)
    assert node.salt_call("ccc_usage.active_sessions")[0]["ana-main"]["sessions"] == 0
