"""Usage accounting and active users on the live cluster (master, node1, node2; see conftest.py):
traffic generated inside ana-main shows up in its usage log line and in the exporter's container
counters, a TCP session held open to its port 22 shows up in ``salt-run ccc.active_users``, and
a user who swaps the statistics folder or a log file for a symlink gets nothing written through
it. The test starts httpd and a port-22 listener in the container with ``docker exec`` (the
product never does); the tiny test image has no sshd, so busybox ``nc -l -p 22`` stands in for
it (an SSH session is one established connection to port 22)."""

import pathlib
import re
import urllib.request

import ccc_container_metrics
import pytest
from support import net

from .conftest import REDEPLOY_LIMITS, redeploys_settled
from .test_redeploy import EDIT_TIMEOUT, wait_for

pytestmark = pytest.mark.docker

STACK, EMAIL = "ana-main", "ana.novak@example.org"
BLOB_MB = 3
LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{6})?:\t(\d+)\t(\d+)$")


def stats_dir(storage):
    return pathlib.Path(storage) / "shared" / "user_data" / "container-net-statistics"


def access_address(daemon, stack):
    attrs = daemon.client().api.inspect_container(stack)
    network = attrs["HostConfig"]["NetworkMode"]
    return network, attrs["NetworkSettings"]["Networks"][network]["IPAddress"]


def collect(master):
    ran = master.salt_cli(timeout=120).run("ccc_usage.collect", minion_tgt="node1")
    return ran, ran.data


def traffic_then_collect(master, node1):
    """Sends BLOB_MB from ana-main and collects its usage, once no redeploy is in flight or pending
    (an earlier test's, e.g. the soak's last edits: a recreated container counts from 0). Tried
    again, at most twice, if ana-main was recreated all the same between the traffic and the
    collect (a late settings event): returns ``(ran, data, network)`` of a container that lived
    through both."""
    for _ in range(3):
        assert wait_for(lambda: redeploys_settled(master), timeout=REDEPLOY_LIMITS["window"] + 2 * EDIT_TIMEOUT,
                        interval=1), "redeploys still pending"
        container = node1.client().containers.get(STACK)
        container.exec_run(["/bin/busybox", "dd", "if=/dev/zero", "of=/tmp/blob", "bs=1M", f"count={BLOB_MB}"])
        container.exec_run(["/bin/busybox", "httpd", "-p", "8080", "-h", "/tmp"])
        network, address = access_address(node1, STACK)
        with urllib.request.urlopen(f"http://{address}:8080/blob", timeout=30) as response:
            assert len(response.read()) == BLOB_MB << 20
        ran, data = collect(master)
        if node1.client().containers.get(STACK).id == container.id:
            return ran, data, network
    pytest.fail("ana-main was recreated between the traffic and the collect three times")


def test_traffic_shows_up_in_the_log_line_and_the_exporter_counters(master, minions, dockerds, cluster_storage):
    node1 = dockerds["node1"]
    ran, data, network = traffic_then_collect(master, node1)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert data[STACK]["network"] == network and data[STACK]["tx_bytes"] >= BLOB_MB << 20
    log = stats_dir(cluster_storage) / f"{STACK}-node1.log"
    last = log.read_text().splitlines()[-1]
    match = LINE.match(last)
    assert match, last
    assert int(match.group(3)) >= BLOB_MB << 20 and last == data[STACK]["line"]

    collector = ccc_container_metrics.ContainerCollector(lambda fn: fn(node1.client()))
    counters = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in collector.collect() for s in f.samples}
    sent = counters[("ccc_container_network_transmit_bytes_total", (("network", network), ("stack", STACK)))]
    assert sent >= int(match.group(3)) >= BLOB_MB << 20
    assert counters[("ccc_container_running", (("stack", STACK),))] == 1

    schedule = master.salt_cli(timeout=60).run("schedule.list", "return_yaml=False", minion_tgt="node1").data
    assert schedule["ccc-usage-accounting"]["function"] == "ccc_usage.collect"
    assert schedule["ccc-usage-accounting"]["seconds"] == 12 * 3600


def test_an_ssh_session_shows_up_in_active_users(master, minions, dockerds):
    node1 = dockerds["node1"]
    container = node1.client().containers.get(STACK)
    container.exec_run(["/bin/busybox", "nc", "-l", "-p", "22", "-e", "/bin/cat"], detach=True)
    _network, address = access_address(node1, STACK)
    session = net.connect(address, 22)
    try:
        ran = master.salt_run_cli(timeout=120).run("ccc.active_users", "tgt=node*", "timeout=30")
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert {"user": EMAIL, "stack": STACK, "node": "node1", "sessions": 1} in ran.data["users"]
        assert ran.data["nodes"] == {"node1": "ok", "node2": "ok"}
    finally:
        session.close()


def test_a_symlinked_statistics_folder_or_log_is_never_written_through(master, minions, cluster_storage, tmp_path):
    folder = stats_dir(cluster_storage)
    log = folder / f"{STACK}-node1.log"
    bait = tmp_path / "bait"
    bait.write_text("not a usage log\n")
    log_aside = log.with_name(log.name + ".aside")
    log.rename(log_aside)  # written by the first test
    log.symlink_to(bait)
    try:
        ran, data = collect(master)
        assert ran.returncode != 0
        assert "symbolic link" in data[STACK]["error"] and "nothing written" in data[STACK]["error"]
    finally:
        log.unlink()
    aside = folder.with_name("container-net-statistics.aside")
    folder.rename(aside)
    target = tmp_path / "target"
    target.mkdir()
    folder.symlink_to(target)
    try:
        ran, _ = collect(master)
        assert ran.returncode != 0
        assert "container-net-statistics" in ran.stdout and "symbolic link" in ran.stdout
        assert list(target.iterdir()) == [] and bait.read_text() == "not a usage log\n"
    finally:
        folder.unlink()
        aside.rename(folder)
        log_aside.rename(log)
