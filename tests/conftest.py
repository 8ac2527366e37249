"""Shared fixtures: a private dockerd per simulated node (with the fake NVIDIA hook), test images,
and storage roots. Integration tests need root and the dockerd binary; .ci/run provides both."""

import shutil
import tempfile

import pytest

from support import hypothesis_profiles, site, xdist_groups  # noqa: F401  (registers the Hypothesis profiles)
from support.factories_root import salt_factories_default_root_dir  # noqa: F401  (a fixture, shared with bench/)
from support.nodes import node_dockerd, remove_managed_containers


def pytest_configure(config):
    config.addinivalue_line("markers", "docker: needs a private dockerd (root)")


def pytest_unconfigure(config):
    folder = config.stash.get(_GROUPS_DIR, None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


# Two xdist workers: groups of modules, each run by one worker (support/xdist_groups.py says why
# xdist's own loadgroup cannot do it here).
_GROUPS_DIR = pytest.StashKey[str]()


def _groups_dir(config):
    if _GROUPS_DIR not in config.stash:
        config.stash[_GROUPS_DIR] = tempfile.mkdtemp(prefix="ccc-xdist-groups-")
    return config.stash[_GROUPS_DIR]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """Controller: tell each worker where to write the groups of what it collects."""
    node.workerinput[xdist_groups.WORKERINPUT_KEY] = _groups_dir(node.config)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Controller: ``--dist loadgroup`` schedules whole groups (support/xdist_groups.py)."""
    if config.getvalue("dist") == "loadgroup":
        return xdist_groups.make_scheduler(config, log, _groups_dir(config))
    return None


def pytest_collection_modifyitems(config, items):
    """Worker: write the groups of the collected tests for the controller's scheduler."""
    folder = getattr(config, "workerinput", {}).get(xdist_groups.WORKERINPUT_KEY)
    if folder:
        xdist_groups.write_groups(folder, config.workerinput["workerid"], items)


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
