"""The acceptance tier shares the systemd test nodes of tests/nodes (node image, test apt
repository, node factory); see tests/nodes/conftest.py."""

from nodes.conftest import node_repo, salt_factories_config, sysnodes  # noqa: F401  (fixtures shared with tests/nodes)
