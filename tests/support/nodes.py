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


def node_dockerd(node):
    """A private dockerd for a simulated node, with the fake NVIDIA hook and the test images.

    The sample images cannot be pulled here, so the tiny test image is tagged with their names
    (the quickstart does the same with its demo image)."""
    return private_dockerd(node, site.NODE_INDEX[node])


# Daemons that stand in for no node of the cluster tests (subnet 10.231.<index>.0/24): a module
# that only reads from its engine runs on one of these, away from node1's and node2's, which the
# cluster tests drive (and restart) meanwhile.
RENDER_DAEMON = ("render", 8)


def private_dockerd(name, index):
    """``node_dockerd`` for a daemon ``name`` whose default bridge is ``10.231.<index>.1/24``."""
    if os.geteuid() != 0 or not shutil.which("dockerd"):
        pytest.skip("integration tests need root and dockerd (run .ci/run)")
    daemon = start_dockerd(name, TEST_BASE, f"10.231.{index}.1/24", fake_nvidia=True)
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
