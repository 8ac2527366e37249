"""Fixtures for tests on systemd test nodes (``support/sysnode.py``): the node image, the signed
test apt repository, a node factory, and an opt-in salt-master the nodes' minions can reach.

The tests here are marked ``docker`` (they need root and the host's system dockerd) and are
collected by plain ``pytest``, so CI runs them. The first run builds the node root filesystem
(debootstrap, about a minute) and the apt repository (a download from the Debian mirror); later
runs reuse both from ``${CCC_CACHE_DIR:-~/.cache/ccc-salt}`` in seconds."""

import os
import shutil
import subprocess

import pytest

from support import aptrepo
from support.sysnode import HOST_IP, REPO, SysNode, ensure_network


@pytest.fixture(scope="session")
def salt_factories_config():
    return {"start_timeout": 120}


@pytest.fixture(scope="session")
def node_repo():
    """Node image, tiny test image and the test apt repository, built (or found current) once."""
    if os.geteuid() != 0 or not shutil.which("docker"):
        pytest.skip("test nodes need root and Docker (run .ci/run)")
    if subprocess.run(["docker", "info"], capture_output=True).returncode:
        pytest.skip("test nodes need the host's dockerd (bash scripts/setup.sh --test starts it)")
    for script in ("build-node.sh", "build.sh"):
        built = subprocess.run(["bash", str(REPO / "tests" / "images" / script)], capture_output=True, text=True)
        assert built.returncode == 0, f"{script} failed:\n{built.stderr[-3000:]}"
    ensure_network()
    return aptrepo.build_repo()


@pytest.fixture(scope="module")
def sysnodes(node_repo):
    """Factory: ``sysnodes("n1")`` boots a fresh node (replacing a leftover of that name) and
    returns it running; every node made is removed when its test module ends. Each node's systemd
    holds inotify instances counted against root on the host (``fs.inotify.max_user_instances``,
    128 by default), so nodes do not outlive their module."""
    made = []

    def make(name, **options):
        node = SysNode(name, node_repo, **options)
        made.append(node)
        return node.start()

    yield make
    for node in made:
        node.remove()


@pytest.fixture(scope="package")
def node_master(salt_factories, tmp_path_factory):
    """A salt-master listening on the host's address on the test network (opt-in: only tests
    that ask for it start it). Serves this checkout's ``salt/`` and an empty pillar root
    (``node_master.config["pillar_roots"]``)."""
    pillar = tmp_path_factory.mktemp("node-master-pillar")
    overrides = {"interface": HOST_IP, "file_roots": {"base": [str(REPO / "salt")]},
                 "pillar_roots": {"base": [str(pillar)]}}
    factory = salt_factories.salt_master_daemon("ccc-nodes-master", overrides=overrides)
    with factory.started():
        yield factory
