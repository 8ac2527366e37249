"""
The cachefilesd role's rules: its settings checked, ``/etc/cachefilesd.conf`` and
``/etc/default/cachefilesd`` as text. Pure: settings in, text or problems out.

The culling thresholds are percentages of free space (b*: blocks, f*: files): the daemon culls
old cache below ``*cull``, stops caching below ``*stop`` and runs freely above ``*run``; it
refuses to start unless ``0 <= stop < cull < run < 100`` for both kinds.
"""

import os
import re

THRESHOLDS = ("brun", "bcull", "bstop", "frun", "fcull", "fstop")
PERCENT = re.compile(r"^\s*(\d{1,3})\s*%?\s*$")
OPTS = re.compile(r"^[A-Za-z0-9 _=./-]*$")
# ``state``: the original's cachefilesd_state. Stopped keeps the package and its config but the
# daemon is stopped and disabled (and the open-files limit it needs is not set).
STATES = ("started", "stopped")


def percent(value):
    """``10``, ``"10"`` or ``"10%"`` as the integer 10; ``ValueError`` for anything else."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int):
        return value
    match = PERCENT.match(str(value))
    if not match:
        raise ValueError(value)
    return int(match.group(1))


def check(settings):
    """``(checked settings, problems)``: thresholds as integers, the cache dir absolute."""
    checked, problems = dict(settings or {}), []
    for key in THRESHOLDS:
        try:
            checked[key] = percent(checked.get(key))
        except ValueError:
            problems.append(f"ccc:cachefilesd:{key} must be a percentage 0..100, got {checked.get(key)!r}")
            continue
        if not 0 <= checked[key] < 100:
            problems.append(f"ccc:cachefilesd:{key} must be 0..99 %, got {checked[key]}")
    if not problems:
        for kind in ("b", "f"):
            run, cull, stop = (checked[kind + name] for name in ("run", "cull", "stop"))
            if not run > cull > stop:
                problems.append(f"ccc:cachefilesd: {kind}run > {kind}cull > {kind}stop is required, got "
                                f"{run}% > {cull}% > {stop}%")
    cache_dir = checked.get("cache_dir")
    if not isinstance(cache_dir, str) or not os.path.isabs(cache_dir) or os.path.normpath(cache_dir) == "/":
        problems.append(f"ccc:cachefilesd:cache_dir must be an absolute folder other than /, got {cache_dir!r}")
    else:
        checked["cache_dir"] = os.path.normpath(cache_dir)
    checked.setdefault("state", "started")
    if checked["state"] not in STATES:
        problems.append(f"ccc:cachefilesd:state must be started or stopped, got {checked['state']!r}")
    if not isinstance(checked.get("daemon_opts", ""), str) or not OPTS.match(checked.get("daemon_opts", "")):
        problems.append(f"ccc:cachefilesd:daemon_opts must be plain daemon options, got {checked.get('daemon_opts')!r}")
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
