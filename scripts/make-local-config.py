#!/usr/bin/env python3
"""Write a masterless minion config that serves this checkout (states, custom modules, pillar).

Used by the quickstart, the tests and the benchmarks:

    scripts/make-local-config.py --config-dir .local/node1 --id node1 [--pillar-root DIR ...]

Extra pillar roots come first, so a file there (e.g. site/nodes/node1.sls) replaces the one
from sample-pillar/. The generic pillar/ is always included; --site selects the site root
(default sample-pillar/).

Secrets (``ccc:secrets``, ``#!yaml|gpg``, docs/secrets.md) are decrypted with the keyring in
--gpg-keydir (default: <config-dir>/gpgkeys). For the sample site the public DEMO key of
sample-pillar/gpgkeys/ is imported there, so the sample's secrets.sls decrypts.
"""

import argparse
import os
import pathlib
import subprocess
import sys

import yaml

from minion_config import LOADER_SETTINGS

REPO = pathlib.Path(__file__).resolve().parent.parent
SAMPLE_SITE = REPO / "sample-pillar"
DEMO_SECRET_KEY = SAMPLE_SITE / "gpgkeys" / "demo-secret-key.asc"


def import_demo_key(keydir):
    """Import the sample site's DEMO secret key into ``keydir`` (public demo material only)."""
    proc = subprocess.run(["gpg", "--batch", "--no-tty", "--homedir", str(keydir), "--import", str(DEMO_SECRET_KEY)],
                          capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"make-local-config: importing the demo key into {keydir} failed:\n{proc.stderr.strip()}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config-dir", required=True, type=pathlib.Path)
    parser.add_argument("--id", required=True, help="minion id = node name in pillar")
    parser.add_argument("--site", default=str(REPO / "sample-pillar"), help="the site's pillar root")
    parser.add_argument("--pillar-root", action="append", default=[], help="extra pillar root, searched first")
    parser.add_argument("--gpg-keydir", type=pathlib.Path,
                        help="keyring that decrypts ccc:secrets (default: <config-dir>/gpgkeys)")
    args = parser.parse_args()

    config_dir = args.config_dir.resolve()
    config_dir.mkdir(parents=True, exist_ok=True)
    state = config_dir / "var"
    keydir = (args.gpg_keydir or config_dir / "gpgkeys").resolve()
    keydir.mkdir(parents=True, exist_ok=True)
    os.chmod(keydir, 0o700)
    if pathlib.Path(args.site).resolve() == SAMPLE_SITE:
        import_demo_key(keydir)
    config = {
        "id": args.id,
        "file_client": "local",
        "file_roots": {"base": [str(REPO / "salt")]},
        "pillar_roots": {"base": [str(pathlib.Path(p).resolve()) for p in args.pillar_root]
                         + [str(REPO / "pillar"), str(pathlib.Path(args.site).resolve())]},
        "cachedir": str(state / "cache"),
        "extension_modules": str(state / "cache" / "extmods"),
        "pki_dir": str(state / "pki"),
        "sock_dir": str(state / "sock"),
        "log_file": str(state / "minion.log"),
        "log_level_logfile": "info",
        "state_output": "changes",
        "state_verbose": False,
        "pillar_source_merging_strategy": "smart",
        "gpg_keydir": str(keydir),
        # A secret that cannot be decrypted fails the pillar render (states refuse to run) instead
        # of reaching a module as ciphertext (Salt 3008's default, pinned here).
        "gpg_decrypt_must_succeed": True,
        # Every salt-call gathered the grains again (0.08-0.10 s of a 1.1 s no-op): Salt's own
        # cache keeps them 5 minutes (grains_cache_expiration). ccc-salt reads only the id and
        # init grains, which do not change under a running node; saltutil.refresh_grains renews it.
        "grains_cache": True,
        **LOADER_SETTINGS,
    }
    (config_dir / "minion").write_text(yaml.safe_dump(config, sort_keys=False))
    # The cached grains hold the id and the config's own grains: a config written again (another
    # --id) starts from fresh ones, never from the node it replaced.
    (state / "cache" / "grains.cache.p").unlink(missing_ok=True)
    print(config_dir)


if __name__ == "__main__":
    main()
