"""Prometheus' own programs for the tests (``prometheus``, ``promtool``), from Debian's
``prometheus`` package unpacked into the test cache, never installed: installing it would start a
Prometheus service on the host. The ``.deb`` comes through ``apt-get download`` once and is
unpacked into ``${CCC_CACHE_DIR:-~/.cache/ccc-salt}/prometheus/root``, under a lock (parallel
workers share one download)."""

import pathlib
import shutil
import subprocess
import tempfile

from support import locks

CACHE = locks.CACHE_DIR / "prometheus"


def _download(root):
    """Download and unpack the package into ``root`` (apt lists refreshed if the first try fails)."""
    with tempfile.TemporaryDirectory(dir=CACHE) as work:
        download = ["apt-get", "download", "-q", "prometheus"]
        if subprocess.run(download, cwd=work, capture_output=True).returncode:
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, check=True)
            subprocess.run(download, cwd=work, capture_output=True, check=True)
        deb = sorted(pathlib.Path(work).glob("prometheus_*.deb"))[-1]
        unpacked = pathlib.Path(work) / "root"
        subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True)
        shutil.rmtree(root, ignore_errors=True)
        unpacked.rename(root)


def binary(name):
    """The path of ``name`` (``prometheus`` or ``promtool``) from the unpacked package."""
    CACHE.mkdir(parents=True, exist_ok=True)
    root = CACHE / "root"
    with locks.cache_lock("prometheus"):
        if not all((root / "usr" / "bin" / program).exists() for program in ("prometheus", "promtool")):
            _download(root)
    return root / "usr" / "bin" / name


def promtool(*args, cwd=None):
    """Run ``promtool args``; returns the CompletedProcess (text, stdout and stderr captured)."""
    return subprocess.run([str(binary("promtool")), *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120)
