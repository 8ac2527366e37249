#!/usr/bin/env python3
"""Print the salt-master configuration that serves ccc-salt (file roots, pillar roots, reactor, schedule).

    scripts/master_config.py --site /srv/my-site-pillar > /etc/salt/master.d/ccc-salt.conf

The tests start their master with the same dictionary (``master_config()``), so what is tested
is what admins install.
"""

import argparse
import pathlib

import yaml

from minion_config import LOADER_SETTINGS

REPO = pathlib.Path(__file__).resolve().parent.parent
FLUSH_INTERVAL = 2  # seconds between ccc.flush runs (pending redeploys)
PILLAR_WATCH_INTERVAL = 20  # seconds between ccc.pillar_watch runs (admins' pillar edits reach nodes)
INVENTORY_INTERVAL = 10  # seconds between ccc_inventory.refresh runs (a lab's inventory repository)
# The master's keyring for ccc:secrets (#!yaml|gpg pillar, docs/secrets.md); root-only (0700).
GPG_KEYDIR = "/etc/salt/gpgkeys"


def master_config(repo=REPO, site=None, extra_pillar_roots=(), gpg_keydir=GPG_KEYDIR, inventory=None):
    """The ccc-salt part of a master config as a dict; ``inventory``: the ``ccc_inventory``
    settings of a lab that keeps its inventory repository (at least ``repo``)."""
    repo = pathlib.Path(repo)
    site = pathlib.Path(site) if site else repo / "sample-pillar"
    config = {
        # salt/ only: salt/_modules, _states and _beacons link to the repository's folders, so
        # pillar, tests and the rest of the checkout are never served.
        "file_roots": {"base": [str(repo / "salt")]},
        "runner_dirs": [str(repo / "_runners")],
        # Shared code (_utils/): Salt puts these dirs on the import path of the runners it loads.
        "utils_dirs": [str(repo / "_utils")],
        "pillar_roots": {"base": [str(p) for p in extra_pillar_roots] + [str(repo / "pillar"), str(site)]},
        # The master renders pillar, so only it holds the secret key that decrypts ccc:secrets. A
        # secret it cannot decrypt fails that minion's pillar render (states refuse to run) instead
        # of reaching a module as ciphertext (Salt 3008's default, pinned here).
        "gpg_keydir": str(gpg_keydir),
        "gpg_decrypt_must_succeed": True,
        # Each pillar compile makes a file client, whose backends' missing init made Salt load
        # every fileserver module (scripts/minion_config.py says why this setting stops that).
        **LOADER_SETTINGS,
        "reactor": [
            {"salt/beacon/*/ccc_settings/*": [str(repo / "reactor" / "settings_changed.sls")]},
            # A node now runs a moved container that another node still keeps: redeploy the
            # stack, so the old node removes its copy (make-before-break, ccc_moves).
            {"ccc/moved/*": [str(repo / "reactor" / "settings_changed.sls")]},
            {"salt/minion/*/start": [str(repo / "reactor" / "minion_start.sls")]},
            # A swarm node lacks a stack's overlay: the leader creates it, the stack is redeployed.
            {"ccc/swarm/overlay_needed": [str(repo / "reactor" / "swarm_overlay_needed.sls")]},
            # A node removed a container of a stack that left pillar: the leader removes its overlay.
            {"ccc/swarm/overlay_released": [str(repo / "reactor" / "swarm_overlay_released.sls")]},
            # A Portainer agent waits for the agents' overlay, or the leader made it: the waiting
            # nodes' agents join it (runner ccc_agent_overlay).
            {"ccc/swarm/agent_overlay/*": [str(repo / "reactor" / "swarm_agent_overlay.sls")]},
            # A node's Docker engine restarted (ccc_docker beacon): reconcile that node in full.
            {"salt/beacon/*/ccc_docker/restarted": [str(repo / "reactor" / "engine_restarted.sls")]},
            # A compute container crashed (ccc_docker beacon): redeploy its stack like an edit, so
            # the user's .deploy report tells why (ccc_problems); a same-spec apply changes nothing.
            {"salt/beacon/*/ccc_docker/died/*": [str(repo / "reactor" / "settings_changed.sls")]},
            # A state.apply returned: what the ccc runner holds pending behind it goes at once.
            {"salt/job/*/ret/*": [str(repo / "reactor" / "job_returned.sls")]},
        ],
        # The ccc runner coalesces settings edits per stack; a job's return applies the stacks left
        # pending behind it (reactor above), this schedule what no return ends (job timeouts,
        # probes, the rate limit's window). A schedule of a few seconds also shortens the
        # master's maintenance loop to that interval.
        "schedule": {
            "ccc-redeploy-flush": {"function": "ccc.flush", "seconds": FLUSH_INTERVAL, "return_job": False},
            # Pillar edits reach the nodes concerned (refresh + reconcile) within this interval
            # plus one apply; compiles nothing while the pillar files stay the same.
            "ccc-pillar-watch": {"function": "ccc.pillar_watch", "seconds": PILLAR_WATCH_INTERVAL,
                                 "return_job": False},
        },
        # At most max_applies settings redeploys per user per window (s); a job that has not
        # returned from all of its minions after job_timeout (s) counts as ended.
        "ccc_redeploy": {"max_applies": 6, "window": 60, "job_timeout": 300},
    }
    if inventory:
        config.update(inventory_config(repo, inventory))
        config["schedule"]["ccc-inventory-refresh"] = {"function": "ccc_inventory.refresh",
                                                       "seconds": INVENTORY_INTERVAL, "return_job": False}
    return config


def inventory_config(repo, inventory):
    """The inventory pillar (docs/pillar.md): ``ccc:users`` and ``ccc:containers`` from the lab's
    inventory repository, read and mapped by ``ccc_inventory.refresh``, served by the external
    pillar ``_pillar/ccc_inventory.py``; the pillar roots' files merge first, then this."""
    return {"pillar_dirs": [str(pathlib.Path(repo) / "_pillar")], "ext_pillar": [{"ccc_inventory": {}}],
            "ccc_inventory": dict(inventory)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", help="the site's pillar root (default: sample-pillar/)")
    parser.add_argument("--repo", default=str(REPO), help="where ccc-salt is installed on the master")
    parser.add_argument("--gpg-keydir", default=GPG_KEYDIR,
                        help="the master's keyring that decrypts ccc:secrets (default %(default)s)")
    parser.add_argument("--inventory-repo", help="a clone of the lab's inventory repository on the master: "
                        "its users and containers become ccc:users and ccc:containers (docs/pillar.md)")
    parser.add_argument("--inventory-rev", default="HEAD", help="the revision read (default %(default)s)")
    parser.add_argument("--inventory-fetch", help="a remote fetched before each read (then --inventory-rev origin/main)")
    args = parser.parse_args()
    inventory = {"repo": args.inventory_repo, "rev": args.inventory_rev, "fetch": args.inventory_fetch} \
        if args.inventory_repo else None
    config = master_config(args.repo, args.site, gpg_keydir=args.gpg_keydir, inventory=inventory)
    print(yaml.safe_dump(config, sort_keys=False), end="")


if __name__ == "__main__":
    main()
