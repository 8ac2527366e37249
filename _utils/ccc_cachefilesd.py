"""
The cachefilesd role's rules: its settings checked, ``/etc/cachefilesd.conf`` and
``/etc/default/cachefilesd`` as text. Pure: settings in, text or problems out.

The culling thresholds are percentages of free space (b*: blocks, f*: files): the daemon culls
old cache below ``*cull``, stops caching below ``*stop`` and runs freely above ``*run``; it
refuses to start unless ``0 <= stop < cull < run < 100`` for both kinds.
"""

import os

import ccc_role_schema

THRESHOLDS = ("brun", "bcull", "bstop", "frun", "fcull", "fstop")


def percent(value):
    """A threshold the schema let through (``10``, ``"10"`` or ``"10%"``) as the integer 10."""
    return value if isinstance(value, int) else int(str(value).strip().rstrip("%"))


def check(settings, schema):
    """``(checked settings, problems)`` by the role's ``schema``: thresholds as integers, the
    cache dir normalised. Beyond the schema: the order of each kind's thresholds (one key
    compared with another), which the daemon needs to start."""
    problems = ccc_role_schema.problems("cachefilesd", settings, schema)
    if problems:
        return dict(settings), problems
    checked = dict(settings, cache_dir=os.path.normpath(settings["cache_dir"]))
    checked.update((key, percent(settings[key])) for key in THRESHOLDS)
    for kind in ("b", "f"):
        run, cull, stop = (checked[kind + name] for name in ("run", "cull", "stop"))
        if not run > cull > stop:
            problems.append(f"ccc:cachefilesd: {kind}run > {kind}cull > {kind}stop is required, got "
                            f"{run}% > {cull}% > {stop}%")
    return checked, problems


def conf_text(checked, node):
    """``/etc/cachefilesd.conf`` for node ``node`` (its cache tag is ``<node>-cache``)."""
    lines = ["# Managed by ccc-salt (cluster role cachefilesd, pillar ccc:cachefilesd); edits are replaced.",
             f"dir {checked['cache_dir']}", f"tag {node}-cache"]
    lines += [f"{key} {checked[key]}%" for key in THRESHOLDS]
    return "\n".join(lines) + "\n"


def default_text(checked):
    """``/etc/default/cachefilesd``: the daemon may run (Debian's package ships RUN=no)."""
    return ("# Managed by ccc-salt (cluster role cachefilesd).\n"
            "RUN=yes\n"
            f"DAEMON_OPTS=\"{checked.get('daemon_opts', '')}\"\n")


def services(settings, node_id):
    """What the role runs on a node (``salt-run ccc.status``): the FS-cache daemon's unit, none
    when the admin keeps it stopped."""
    if isinstance(settings, dict) and settings.get("state") == "stopped":
        return []
    return [{"kind": "unit", "name": "cachefilesd.service", "role": "cachefilesd"}]
