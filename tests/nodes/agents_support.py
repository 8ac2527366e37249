"""What node tests of the agent roles need to install the agents offline: the wheels of
``ccc:agents:pip_packages`` (nodes reach no package index).

``wheel_pillar(node)`` downloads the pinned requirements of ``salt/cluster/agents/defaults.yaml``
once on the host (into ``${CCC_CACHE_DIR:-~/.cache/ccc-salt}/agent-wheels``, later runs reuse
them without the network), copies them into the node and returns the ``ccc:agents`` pillar that
points pip there (``pip_find_links``: no index at all, as on an offline site)."""

import os
import pathlib
import re
import subprocess
import sys

import yaml

from support import locks

REPO = pathlib.Path(__file__).resolve().parents[2]
NODE_WHEELS = "/srv/ccc-test-wheels"


def requirements():
    """The pip requirements the agents install (the defaults' ``pip_packages``)."""
    defaults = yaml.safe_load((REPO / "salt" / "cluster" / "agents" / "defaults.yaml").read_text())
    return list(defaults["agents"]["pip_packages"])


def wheels_dir():
    """The host folder holding a wheel of every pinned requirement (downloaded when missing)."""
    cache = pathlib.Path(os.environ.get("CCC_CACHE_DIR") or pathlib.Path.home() / ".cache" / "ccc-salt") / "agent-wheels"
    cache.mkdir(parents=True, exist_ok=True)
    with locks.cache_lock("agent-wheels"):  # another xdist worker may be downloading them now
        missing = [req for req in requirements() if not list(cache.glob(_wheel_glob(req)))]
        if missing:
            subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                            "--dest", str(cache), *missing], check=True, capture_output=True, text=True)
    return cache


def _wheel_glob(requirement):
    """``name==version`` as the file name pattern of its wheel (``nvidia_ml_py-13.615.71-*.whl``)."""
    name, _, version = requirement.partition("==")
    return f"{re.sub(r'[-_.]+', '_', name)}-{version or '*'}-*.whl"


def wheel_pillar(node):
    """Copy the wheels into ``node`` and return ``{"pip_find_links": <folder in the node>}``."""
    source = wheels_dir()
    node.exec(["mkdir", "-p", NODE_WHEELS])
    for wheel in sorted(source.glob("*.whl")):
        subprocess.run(["docker", "cp", str(wheel), f"{node.container}:{NODE_WHEELS}/{wheel.name}"], check=True)
    return {"pip_find_links": NODE_WHEELS}
