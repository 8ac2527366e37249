"""The command line of the migration (``python3 -m ccc_migrate``, run by ``scripts/migrate-ansible-inventory``): arguments, writing, output."""

import argparse
import sys

from . import migration, vault, write


def parse(argv):
    parser = argparse.ArgumentParser(prog="migrate-ansible-inventory",
                                     description="Write a ccc-salt pillar tree from a CCC Ansible inventory.")
    parser.add_argument("inventory_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--check", action="store_true", help="only print the report; write nothing")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--vault-password-file", help="decrypt vault_vars/cluster-secrets.yml with this password")
    parser.add_argument("--recipient", help="GPG key (id or fingerprint) the secrets are encrypted to: the salt-master's")
    parser.add_argument("--gpg-homedir", help="keyring that holds the recipient's public key")
    return parser.parse_args(argv)


def run(args):
    """Migrate; returns the report's text (or JSON). Raises MigrationError/WriteError."""
    if not args.check:
        write.check_out_dir(args.out_dir)
    password = vault.read_password_file(args.vault_password_file) if args.vault_password_file else None
    site, nodes, secrets, report = migration.migrate(args.inventory_dir, password)
    if args.check:
        return report.json() if args.json else report.text()
    files = write.plain_files(site, nodes)
    if secrets:
        if not args.recipient:
            raise migration.MigrationError("the vault holds secrets: give --recipient (the salt-master's GPG key)")
        files["site/secrets.sls"] = write.secrets_file(secrets, args.recipient, args.gpg_homedir)
    written = sorted(files) + ["migration-report.txt", "migration-report.json"]
    files["migration-report.txt"] = report.text(written)
    files["migration-report.json"] = report.json(written)
    write.write(args.out_dir, files)
    return report.json(written) if args.json else report.text(written)


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        sys.stdout.write(run(args))
    except (migration.MigrationError, write.WriteError, vault.VaultError, OSError) as exc:
        sys.stderr.write(f"migrate-ansible-inventory: {exc}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
