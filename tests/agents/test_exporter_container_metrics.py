"""Container metrics and the network reading on a REAL container of a private dockerd (the
``agents`` node of tests/agents/test_gpu.py) and this machine's real /proc: traffic the host
fetches from the container shows up in the exporter's counters, equal to what the container's
own /sys/class/net says (the original CCC's ``docker exec`` reading, done here only by the
test), and a TCP connection held open to its port 22 counts as an SSH session. The exporter is
the real one (``build``) with the FAKE NVML of tests/agents/fake_nvml.py (no GPU here)."""

import os
import pathlib
import shutil
import subprocess
import time
import urllib.request
import uuid

import ccc_exporter_config
import ccc_netstats
import ccc_nvml
import pytest
from fake_nvml import FakeNvml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from support import net
from support.scripts import load_agent

REPO = pathlib.Path(__file__).resolve().parents[2]

exporter = load_agent("ccc_gpu_exporter.py")
BLOB_MB = 3


@pytest.fixture(scope="module")
def probe():
    """A running container named as its stack, with the labels ccc-salt sets, serving a 3 MB
    file over HTTP and listening on port 22 (busybox ``nc -l``), both started by the test."""
    if os.geteuid() != 0 or not shutil.which("dockerd"):
        pytest.skip("needs root and dockerd (run .ci/run)")
    from support.dockerd import start_dockerd
    from support.nodes import TEST_BASE, bridge_cidr

    daemon = start_dockerd("agents", TEST_BASE, bridge_cidr("agents"), fake_nvidia=False)
    subprocess.run(["bash", str(REPO / "tests" / "images" / "build.sh"), daemon.url], check=True, capture_output=True)
    client = daemon.client()
    stack = "usage-" + uuid.uuid4().hex[:8]
    container = client.containers.run("ccc-test/tiny:1", detach=True, name=stack, labels={
        "ccc.managed-by": "ccc-salt", "ccc.stack": stack, "ccc-user.email": "ana.novak@example.org"})
    try:
        container.exec_run(["/bin/busybox", "dd", "if=/dev/zero", "of=/tmp/blob", "bs=1M", f"count={BLOB_MB}"])
        container.exec_run(["/bin/busybox", "httpd", "-p", "8080", "-h", "/tmp"])
        container.exec_run(["/bin/busybox", "nc", "-l", "-p", "22", "-e", "/bin/cat"], detach=True)
        container.reload()
        yield client, container, container.attrs["NetworkSettings"]["Networks"]["bridge"]["IPAddress"]
    finally:
        container.remove(force=True)
        client.close()


def _scrape(registry):
    found = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            found.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def _sys_bytes(container, which):
    out = container.exec_run(["/bin/busybox", "cat", f"/sys/class/net/eth0/statistics/{which}_bytes"]).output
    return int(out.decode().strip())


@pytest.mark.docker
def test_real_traffic_and_ssh_session_in_the_exporters_container_metrics(probe, tmp_path):
    client, container, address = probe
    with urllib.request.urlopen(f"http://{address}:8080/blob", timeout=30) as response:
        assert len(response.read()) == BLOB_MB << 20
    session = net.connect(address, 22)
    try:
        time.sleep(0.2)
        config = ccc_exporter_config.check(dict(ccc_exporter_config.DEFAULTS, fan_state_file=None))
        registry, _ = exporter.build(config, nvml_loader=lambda: ccc_nvml.load_nvml(FakeNvml(gpus=[])),
                                     docker_factory=lambda: client)
        metrics = _scrape(registry)
        labels = (("network", "bridge"), ("stack", container.name))
        tx_seen, rx_seen = _sys_bytes(container, "tx"), _sys_bytes(container, "rx")
        assert metrics["ccc_container_running"][(("stack", container.name),)] == 1
        assert metrics["ccc_container_restarts_total"][(("stack", container.name),)] == 0
        assert metrics["ccc_container_ssh_sessions"][(("stack", container.name),)] == 1
        transmitted = metrics["ccc_container_network_transmit_bytes_total"][labels]
        received = metrics["ccc_container_network_receive_bytes_total"][labels]
        assert transmitted >= BLOB_MB << 20
        # The container's own view (read after the scrape: at most a few packets more since).
        assert transmitted <= tx_seen < transmitted + 64 * 1024 and received <= rx_seen < received + 64 * 1024
        assert metrics["ccc_container_collection_success"] == {(): 1}
        assert "ana.novak@example.org" not in generate_latest(registry).decode()
    finally:
        session.close()


@pytest.mark.docker
def test_netstats_on_the_real_proc_of_the_container(probe):
    client, container, address = probe
    container.reload()
    attrs = client.api.inspect_container(container.id)
    usage = ccc_netstats.container_usage(attrs, lambda: client.api.inspect_container(container.id))
    assert usage["networks"]["bridge"]["interface"] == "eth0"
    assert usage["networks"]["bridge"]["rx_bytes"] <= _sys_bytes(container, "rx")
    # Another run of the same container (restarted): the first run's data is refused.
    container.restart(timeout=1)
    with pytest.raises(ccc_netstats.NetnsGone):
        ccc_netstats.container_usage(attrs, lambda: client.api.inspect_container(container.id))
