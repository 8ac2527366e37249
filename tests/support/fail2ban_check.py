"""fail2ban's own configuration checker, run from Debian's fail2ban package unpacked into the
test cache (never installed: the host's services are not touched). The ``.deb`` comes through
``apt-get download``; the unpacked tree is reused from
``${CCC_CACHE_DIR:-~/.cache/ccc-salt}/fail2ban-deb/``."""

import fcntl
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

CACHE = pathlib.Path(os.environ.get("CCC_CACHE_DIR", pathlib.Path.home() / ".cache" / "ccc-salt")) / "fail2ban-deb"


def _download(target):
    """Download and unpack the fail2ban package into ``target`` (apt lists refreshed if needed)."""
    with tempfile.TemporaryDirectory() as work:
        for attempt in range(2):
            proc = subprocess.run(["apt-get", "download", "-q", "fail2ban"], cwd=work, capture_output=True, text=True)
            if proc.returncode == 0:
                break
            if attempt == 0:
                subprocess.run(["apt-get", "update", "-qq"], check=True, capture_output=True)
        else:
            raise RuntimeError(f"apt-get download fail2ban failed: {proc.stderr[-2000:]}")
        deb = next(pathlib.Path(work).glob("fail2ban_*.deb"))
        unpacked = pathlib.Path(work) / "root"
        subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True)
        shutil.move(str(unpacked), str(target))


def unpacked():
    """The unpacked package root (downloaded once, under a lock)."""
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    with open(str(CACHE) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (CACHE / "usr" / "bin" / "fail2ban-client").exists():
            shutil.rmtree(CACHE, ignore_errors=True)
            _download(CACHE)
    return CACHE


def client(config_dir, *args):
    """Run the unpacked ``fail2ban-client -c config_dir args`` with the system python3 (fail2ban's
    interpreter on Debian); returns the CompletedProcess."""
    root = unpacked()
    python = shutil.which("python3") or sys.executable
    env = dict(os.environ, PYTHONPATH=str(root / "usr" / "lib" / "python3" / "dist-packages"))
    return subprocess.run([python, str(root / "usr" / "bin" / "fail2ban-client"), "-c", str(config_dir), *args],
                          capture_output=True, text=True, env=env, timeout=120)


def config_with_jail(tmp_path, jail_text):
    """A copy of the package's ``/etc/fail2ban`` with ``jail_text`` as our jail file."""
    config = pathlib.Path(tmp_path) / "fail2ban"
    shutil.copytree(unpacked() / "etc" / "fail2ban", config)
    (config / "jail.d" / "ccc-sshd.local").write_text(jail_text)
    return config
