"""
The offline migration of a CCC Ansible inventory to a ccc-salt pillar tree (docs/migration.md),
run once by an admin from a checkout: ``scripts/migrate-ansible-inventory`` (``python3 -m
ccc_migrate``). It reads the inventory's folders and vault, maps the cluster, host and secret
variables, writes the SLS files and the GPG-encrypted secrets, and prints the report.

It lives outside ``_utils/`` so ``saltutil.sync_all`` never copies it to a node. The mapping of
users, user types and containers, its checks and the report are the rules the master's
inventory pillar uses too (``_runners/ccc_inventory.py``): those stay in ``_utils/``
(``ccc_migrate_{records,containers,check,markers,inventory,report,differences}``) and are
imported from there, as Salt's loader imports them, with ``_utils`` on the path (the launcher
puts it there; the tests' ``support.site`` too).
"""
