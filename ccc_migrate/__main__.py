"""``python3 -m ccc_migrate``: the migration's command (``scripts/migrate-ansible-inventory``)."""

import sys

from ccc_migrate.cli import main

sys.exit(main())
