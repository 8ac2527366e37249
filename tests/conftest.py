"""Shared fixtures: a private dockerd per simulated node (with the fake NVIDIA hook), test images,
and storage roots. Integration tests need root and the dockerd binary; .ci/run provides both."""


import pytest

from support import site
from support.nodes import node_dockerd, remove_managed_containers


def pytest_configure(config):
    config.addinivalue_line("markers", "docker: needs a private dockerd (root)")


@pytest.fixture(scope="session")
def node1_dockerd():
    """node1's private dockerd (see ``node_dockerd``)."""
    return node_dockerd("node1")


@pytest.fixture(scope="session")
def node2_dockerd():
    """node2's private dockerd (see ``node_dockerd``)."""
    return node_dockerd("node2")


@pytest.fixture
def storage(tmp_path):
    """Storage roots (NFS and local stand-ins) under a fresh temporary directory."""
    root = tmp_path / "storage"
    site.storage_overrides(root)
    yield root
    site.unmount_below(root)  # live private data mounts made by a test must not outlive it


@pytest.fixture
def clean_node1(node1_dockerd):
    """node1's dockerd with no ccc-salt containers left from an earlier test."""
    remove_managed_containers(node1_dockerd)
    yield node1_dockerd
    remove_managed_containers(node1_dockerd)
