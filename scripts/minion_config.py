#!/usr/bin/env python3
"""Print the salt-minion settings ccc-salt relies on with a master (reconnect detection, loader, jobs).

    scripts/minion_config.py > /etc/salt/minion.d/ccc-salt.conf     # on every node, then restart salt-minion

Why: a settings edit fires one event at the master. While the master is down, Salt 3008 keeps
it (and the ``salt/minion/<id>/start`` event it sends once when the connection closes) in memory
on the minion's request channel; nothing sends them again if that channel loses them. With
``master_alive_interval`` the minion checks its master connection every so often, drops events
while it knows the master is away, and sends a new ``salt/minion/<id>/start`` once it has
reconnected; the master's reactor (``reactor/minion_start.sls``) then reconciles the node, which
applies every edit made meanwhile, however long the outage (README.md, "Master outages").

``lazy_loader_strict_matching`` (``LOADER_SETTINGS``, also in the masterless config of
scripts/make-local-config.py): when Salt's loader looks up a function its module does not have
(every file client asks each fileserver backend for an ``init``), it loads every other module of
that kind to look for a ``__virtualname__`` match; with strict matching it only tries the modules
whose file name contains the name asked for, which is how Salt's and ccc-salt's modules are all
named. That scan (gitfs, hgfs, svnfs, ... imported and their ``__virtual__`` run) cost about 0.1 s
of a 1.1 s ``salt-call --local state.apply containers`` no-op.

``multiprocessing: true`` (Salt's default, pinned here: this file in ``minion.d`` overrides a
``multiprocessing: false`` in ``/etc/salt/minion``): every job runs in a process of its own,
forked from the minion. Jobs as threads of the minion process are a known way to make Salt's
jobs start sooner (an edit's job 0.1 s sooner in bench/redeploy_latency.py). With them
ccc-salt's spare SSH host keys would never be topped up: the top-up forks only from a
single-threaded process (``ccc_hostkey_spares.top_up_later``), so every first deploy would make
its keys during the apply. ``saltutil.kill_job`` would signal the minion itself. Every job would
share one process's umask, working directory and imported shared modules.

The tests start their minions with these settings (``minion_config()``).
"""

import argparse

import yaml

MASTER_ALIVE_INTERVAL = 30  # seconds between the minion's checks of its master connection
LOADER_SETTINGS = {"lazy_loader_strict_matching": True}
JOB_SETTINGS = {"multiprocessing": True}  # each job in a process of its own (see the docstring)


def minion_config(master_alive_interval=MASTER_ALIVE_INTERVAL, publish_port=None):
    """
    The ccc-salt part of a minion config as a dict. ``publish_port``: only for a master that
    publishes on another port than 4505 (the connection check looks for that port).

    CLI Example:

    .. code-block:: bash

        scripts/minion_config.py --master-alive-interval 30
    """
    config = {"master_alive_interval": int(master_alive_interval), **LOADER_SETTINGS, **JOB_SETTINGS}
    if publish_port:
        config["publish_port"] = int(publish_port)
    return config


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master-alive-interval", type=int, default=MASTER_ALIVE_INTERVAL,
                        help="seconds between connection checks (default %(default)s)")
    parser.add_argument("--publish-port", type=int, help="the master's publish_port, when not 4505")
    args = parser.parse_args()
    print(yaml.safe_dump(minion_config(args.master_alive_interval, args.publish_port), sort_keys=False), end="")


if __name__ == "__main__":
    main()
