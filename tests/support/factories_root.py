"""salt-factories' root folder for the daemons this checkout starts, one fixture imported by
two conftests: the suite's (``tests/conftest.py``) and the benches' on the live cluster
(``bench/conftest.py``: ``bench/_harness.py`` runs pytest on a file outside ``tests/``, where
the suite's conftest is not loaded). Only a conftest's fixture wins over salt-factories' own of
the same name; loaded as a ``-p`` plugin it loses (salt-factories' entry point registers later)."""

import hashlib
import os
import pathlib
import sys
import tempfile

import pytest


@pytest.fixture(scope="session")
def salt_factories_default_root_dir():
    """salt-factories' root for its daemons' folders, one per xdist worker: salt-factories picks a
    free ``<root>/<daemon id>_<n>`` unlocked, so two workers starting the same master could share.
    And one per Python environment: the daemons' start scripts (``<root>/scripts``) are written
    once and name the Salt that wrote them, so a checkout would otherwise run another (perhaps
    deleted) checkout's Salt."""
    worker = os.environ.get("PYTEST_XDIST_WORKER") or "main"
    environment = hashlib.sha256(sys.prefix.encode()).hexdigest()[:8]
    return pathlib.Path(tempfile.gettempdir()).resolve() / f"ccc-salt-factories-{environment}-{worker}"
