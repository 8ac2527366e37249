"""Shared fixtures: a private dockerd per simulated node (with the fake NVIDIA hook), test images,
and storage roots. Integration tests need root and the dockerd binary; .ci/run provides both."""

import os
import pathlib
import shutil
import subprocess

import pytest

from support import site
from support.dockerd import start_dockerd

REPO = pathlib.Path(__file__).resolve().parent.parent
TEST_BASE = pathlib.Path(os.environ.get("CCC_TEST_DOCKER_BASE", "/var/tmp/ccc-test-docker"))
SAMPLE_IMAGES = (
    "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1",
    "vicoslab/ccc:jupyter-latest-ubuntu22.04-cuda12.6.1",
)


def pytest_configure(config):
    config.addinivalue_line("markers", "docker: needs a private dockerd (root)")


@pytest.fixture(scope="session")
def node1_dockerd():
    """A private dockerd for simulated node1, with the fake NVIDIA hook and the test images.

    The sample images cannot be pulled here, so the tiny test image is tagged with their names
    (the quickstart does the same with its demo image)."""
    if os.geteuid() != 0 or not shutil.which("dockerd"):
        pytest.skip("integration tests need root and dockerd (run .ci/run)")
    daemon = start_dockerd("node1", TEST_BASE, "10.231.1.1/24", fake_nvidia=True)
    subprocess.run(["bash", str(REPO / "tests" / "images" / "build.sh"), daemon.url], check=True, capture_output=True)
    client = daemon.client()
    tiny = client.images.get("ccc-test/tiny:1")
    for ref in SAMPLE_IMAGES + ("vicoslab/ccc:other-latest",):
        repository, tag = ref.rsplit(":", 1)
        tiny.tag(repository, tag)
    yield daemon


@pytest.fixture
def storage(tmp_path):
    """Storage roots (NFS and local stand-ins) under a fresh temporary directory."""
    root = tmp_path / "storage"
    site.storage_overrides(root)
    yield root
    # Live private data mounts made by a test must not outlive it.
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        points = [line.split()[4] for line in handle if line.split()[4].startswith(str(root) + "/")]
    for point in sorted(points, reverse=True):
        subprocess.run(["umount", "-l", point], check=False)


@pytest.fixture
def clean_node1(node1_dockerd):
    """node1's dockerd with no ccc-salt containers left from an earlier test."""
    client = node1_dockerd.client()
    for container in client.containers.list(all=True, filters={"label": "ccc.managed-by=ccc-salt"}):
        container.remove(force=True)
    yield node1_dockerd
    for container in client.containers.list(all=True, filters={"label": "ccc.managed-by=ccc-salt"}):
        container.remove(force=True)
