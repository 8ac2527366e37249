"""Private dockerds for simulated nodes, with the fake NVIDIA hook and the test images."""

import os
import pathlib
import shutil
import subprocess

import pytest

from support import site
from support.dockerd import start_dockerd

REPO = pathlib.Path(__file__).resolve().parents[2]
TEST_BASE = pathlib.Path(os.environ.get("CCC_TEST_DOCKER_BASE", "/var/tmp/ccc-test-docker"))
SAMPLE_IMAGES = (
    "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1",
    "vicoslab/ccc:jupyter-latest-ubuntu22.04-cuda12.6.1",
)


# The private test dockerds by name, each with its own default bridge ``10.231.<index>.1/24``
# (``bridge_cidr``; one table, so no two share a subnet): the sample's nodes (site.NODE_INDEX);
# "render" for modules that only read from an engine, away from node1's and node2's, which the
# cluster tests drive and restart meanwhile; "agents" for the GPU agents' tests (no NVIDIA hook).
DAEMON_INDEX = {**site.NODE_INDEX, "render": 8, "agents": 9}


def bridge_cidr(name):
    """The default bridge (address/prefix) of test dockerd ``name``."""
    return f"10.231.{DAEMON_INDEX[name]}.1/24"


def node_dockerd(name):
    """The private dockerd ``name`` (``DAEMON_INDEX``), with the fake NVIDIA hook and the test
    images.

    The sample images cannot be pulled here, so the tiny test image is tagged with their names
    (the quickstart does the same with its demo image)."""
    if os.geteuid() != 0 or not shutil.which("dockerd"):
        pytest.skip("integration tests need root and dockerd (run .ci/run)")
    daemon = start_dockerd(name, TEST_BASE, bridge_cidr(name), fake_nvidia=True)
    subprocess.run(["bash", str(REPO / "tests" / "images" / "build.sh"), daemon.url], check=True, capture_output=True)
    tiny = daemon.client().images.get("ccc-test/tiny:1")
    for ref in SAMPLE_IMAGES + ("vicoslab/ccc:other-latest",):
        repository, tag = ref.rsplit(":", 1)
        tiny.tag(repository, tag)
    return daemon


def remove_managed_containers(daemon):
    """Remove every ccc-salt container from a test dockerd."""
    client = daemon.client()
    for container in client.containers.list(all=True, filters={"label": "ccc.managed-by=ccc-salt"}):
        container.remove(force=True)
