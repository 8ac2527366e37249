"""The benches on the live cluster are pytest tests underneath (``bench/_harness.py``). This
conftest is what gives them this checkout's own salt-factories root: a fixture of a plugin named
with ``-p`` loses to salt-factories' own fixture of the same name (its entry point registers
later), while a conftest's fixture wins over every plugin's."""

from support.factories_root import salt_factories_default_root_dir  # noqa: F401  (a fixture)
