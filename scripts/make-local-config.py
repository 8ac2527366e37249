#!/usr/bin/env python3
"""Write a masterless minion config that serves this checkout (states, custom modules, pillar).

Used by the quickstart, the tests and the benchmarks:

    scripts/make-local-config.py --config-dir .local/node1 --id node1 [--pillar-root DIR ...]

Extra pillar roots come first, so a file there (e.g. site/nodes/node1.sls) replaces the one
from sample-pillar/. The generic pillar/ is always included; --site selects the site root
(default sample-pillar/).
"""

import argparse
import pathlib

import yaml

REPO = pathlib.Path(__file__).resolve().parent.parent


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config-dir", required=True, type=pathlib.Path)
    parser.add_argument("--id", required=True, help="minion id = node name in pillar")
    parser.add_argument("--site", default=str(REPO / "sample-pillar"), help="the site's pillar root")
    parser.add_argument("--pillar-root", action="append", default=[], help="extra pillar root, searched first")
    args = parser.parse_args()

    config_dir = args.config_dir.resolve()
    config_dir.mkdir(parents=True, exist_ok=True)
    state = config_dir / "var"
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
    }
    (config_dir / "minion").write_text(yaml.safe_dump(config, sort_keys=False))
    print(config_dir)


if __name__ == "__main__":
    main()
