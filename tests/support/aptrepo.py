"""The signed local apt repository that test nodes (``tests/support/sysnode.py``) install from.

Test nodes reach no Debian archive, so the packages the cluster roles install are collected here,
once, on the host:

* **From Debian** (``ROLE_PACKAGES`` and everything they depend on or recommend that the node image
  ``ccc-test/node:1`` lacks): ``docker.io`` (with ``containerd``, ``runc``, ``tini``, ...), ``haproxy`` and
  ``fail2ban`` (with ``python3`` and friends). They are resolved by ``apt-get install
  --download-only`` in a throwaway container of the node image, against the host's Debian mirror
  (the one ``tests/images/lib.sh`` finds, or ``CCC_DEBIAN_MIRROR``), on the host's network.
* **Stand-ins** (``tests/images/apt-standins/<package>/``, built with ``dpkg-deb``): FAKES under
  NVIDIA's and Mellanox's package names, because their archives are unreachable and there is no
  GPU or adapter. Every program appends ``<date> <program> <argv>`` to the node's
  ``/var/log/ccc-fake-nvidia.log`` (NVIDIA) or ``/var/log/ccc-fake-mlnx.log`` (Mellanox).

  ==========================  ====================  ============================================
  package                     version               installs
  ==========================  ====================  ============================================
  nvidia-container-toolkit    1.17.8-1              ``nvidia-container-runtime`` (records, then
                                                    ``exec runc "$@"``), ``nvidia-container-
                                                    runtime-hook`` (records, exits 0)
  nvidia-headless-550         550.127.05-0ubuntu1   ``nvidia-persistenced``: records, forks a
                                                    daemon that stays up until SIGTERM, pid file
                                                    ``/run/nvidia-persistenced/nvidia-
                                                    persistenced.pid`` (a ``Type=forking`` unit)
  nvidia-utils-550            550.127.05-0ubuntu1   ``nvidia-smi``: records, prints "No devices
                                                    were found", exits 6 (a driver without GPUs)
  mlnx-ofed-all               24.10-1.1.4.0         ``/usr/sbin/ofed_uninstall.sh`` (records,
                                                    exits 0) and the ``openibd`` unit
                                                    (``Type=oneshot``, ``RemainAfterExit=yes``)
                                                    whose ``/usr/sbin/openibd`` records each
                                                    start and stop; its postinst only runs
                                                    ``systemctl daemon-reload`` (not enabled,
                                                    not started)
  mlnx-fw-updater             24.10-1.1.4.0         a postinst that records that it ran
  libibverbs1                 44.0-2+ccctest1       nothing (a document): Debian's RDMA library's
                                                    name, a conflicting package the mellanox
                                                    role removes
  ==========================  ====================  ============================================

Layout, under ``${CCC_CACHE_DIR:-~/.cache/ccc-salt}/apt-repo-<hash>/`` (hash of this file, the
stand-in trees, the node image's inputs and the mirror; a finished build is reused as is)::

    repo/                  flat repository, served read-only to nodes at NODE_PATH
      *.deb                downloaded and stand-in packages
      Packages, Packages.gz, Release, InRelease, Release.gpg
    ccc-test-archive.gpg   public key (binary, for ``signed-by``); also at repo/ccc-test-archive.gpg
    ccc-test-archive.asc   the same key, ASCII-armored (what a pillar usually carries)

The signing key is generated for each build with an empty passphrase and its secret part is
deleted after signing; it exists nowhere else. On a node the source line is ``SOURCE_LINE``.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import os
import pathlib
import shutil
import subprocess
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
STANDINS = REPO / "tests" / "images" / "apt-standins"
NODE_IMAGE = "ccc-test/node:1"
ROLE_PACKAGES = ("docker.io", "fail2ban",
                 # the Docker API proxies of role containers (frpc, patroller, portainer agent)
                 "haproxy",
                 # the node agents (salt/cluster/agents: python3 + venv + libraries) and superfan_gpu
                 "python3", "python3-venv", "python3-yaml", "python3-prometheus-client", "python3-docker",
                 "ipmitool",
                 # monitoring_agent's packaged node_exporter
                 "prometheus-node-exporter",
                 # nfs_storage and cachefilesd
                 "nfs-common", "cachefilesd",
                 # the netplan role (netplan apply runs udevadm, which netplan.io does not pull in)
                 "netplan.io", "udev")
SUITE = "bookworm"
NODE_PATH = "/srv/ccc-test-apt"
NODE_KEY = f"{NODE_PATH}/ccc-test-archive.gpg"
SOURCE_LINE = f"deb [signed-by={NODE_KEY}] file:{NODE_PATH} ./"
KEY_NAME = "ccc-test-archive"


@dataclasses.dataclass(frozen=True)
class AptRepo:
    """A built repository: ``path`` (bind it at NODE_PATH), the public key files, its hash."""

    path: pathlib.Path
    key_path: pathlib.Path
    armored_key_path: pathlib.Path
    inputs: str

    def packages(self):
        """``{name: version}`` of every package in the repository."""
        found, name = {}, None
        for line in (self.path / "Packages").read_text().splitlines():
            if line.startswith("Package: "):
                name = line.split(": ", 1)[1]
            elif line.startswith("Version: ") and name:
                found[name] = line.split(": ", 1)[1]
        return found


def debian_mirror():
    """The host's Debian mirror for SUITE, found as the image builders find it."""
    script = f'suite={SUITE}; . "{REPO}/tests/images/lib.sh"; debian_mirror'
    return subprocess.run(["bash", "-c", script], check=True, capture_output=True, text=True).stdout.strip()


def _inputs_hash(mirror):
    digest = hashlib.sha256()
    digest.update(pathlib.Path(__file__).read_bytes())
    for path in sorted(p for p in STANDINS.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(STANDINS)} {path.stat().st_mode & 0o111}".encode())
        digest.update(path.read_bytes())
    image_inputs = subprocess.run(
        ["docker", "image", "inspect", "--format", '{{index .Config.Labels "ccc-test.inputs"}}', NODE_IMAGE],
        check=True, capture_output=True, text=True).stdout.strip()
    digest.update(f"{image_inputs} {mirror} {' '.join(ROLE_PACKAGES)}".encode())
    return digest.hexdigest()[:16]


def build_repo(cache_dir=None):
    """The repository for the current inputs: reused when built before, else built (minutes).

    Needs root, docker, ``apt-ftparchive`` (apt-utils), ``dpkg-deb`` and ``gpg``, and the node
    image (``tests/images/build-node.sh``)."""
    cache = pathlib.Path(cache_dir or os.environ.get("CCC_CACHE_DIR") or pathlib.Path.home() / ".cache" / "ccc-salt")
    cache.mkdir(parents=True, exist_ok=True)
    mirror = debian_mirror()
    inputs = _inputs_hash(mirror)
    final = cache / f"apt-repo-{inputs}"
    with open(cache / f"apt-repo-{inputs}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent sessions share one build
        if not (final / "repo" / "InRelease").exists():
            scratch = pathlib.Path(tempfile.mkdtemp(prefix="apt-repo-build.", dir=cache))
            try:
                _build_into(scratch, mirror)
                shutil.rmtree(final, ignore_errors=True)
                scratch.rename(final)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    return AptRepo(final / "repo", final / f"{KEY_NAME}.gpg", final / f"{KEY_NAME}.asc", inputs)


def _build_into(root, mirror):
    repo = root / "repo"
    repo.mkdir()
    _download(repo, mirror)
    for tree in sorted(p for p in STANDINS.iterdir() if p.is_dir()):
        _run(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(tree), str(repo)])
    _index(repo)
    _sign(root, repo)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # apt reads file: sources as _apt


def _download(repo, mirror):
    """ROLE_PACKAGES and what the node image lacks for them, as .deb files in ``repo``."""
    script = (
        f"echo 'deb {mirror} {SUITE} main' >/etc/apt/sources.list && "
        "apt-get -q update && mkdir -p /out/partial && "
        "apt-get -q install -y --download-only -o Dir::Cache::archives=/out "
        + " ".join(ROLE_PACKAGES)
        + " && rm -rf /out/partial /out/lock"
    )
    _run(["docker", "run", "--rm", "--network", "host", "--entrypoint", "/bin/sh",
          "-v", f"{repo}:/out", NODE_IMAGE, "-c", script])
    if not any(repo.glob("docker.io_*.deb")):
        raise RuntimeError(f"apt-get downloaded no docker.io into {repo}")


def _index(repo):
    packages = _run(["apt-ftparchive", "packages", "."], cwd=repo)
    (repo / "Packages").write_text(packages)
    _run(["gzip", "-9kn", "Packages"], cwd=repo)
    release = _run(["apt-ftparchive",
                    "-o", "APT::FTPArchive::Release::Origin=ccc-salt-tests",
                    "-o", "APT::FTPArchive::Release::Label=ccc-salt test packages",
                    "-o", f"APT::FTPArchive::Release::Suite={SUITE}",
                    "release", "."], cwd=repo)
    (repo / "Release").write_text(release)


def _sign(root, repo):
    """A throwaway ed25519 key signs Release (InRelease, Release.gpg); only its public part stays."""
    home = root / "gnupg"
    home.mkdir(mode=0o700)
    gpg = ["gpg", "--homedir", str(home), "--batch", "--pinentry-mode", "loopback", "--passphrase", ""]
    try:
        _run(gpg + ["--quick-gen-key", "ccc-salt test archive (throwaway) <ccc-salt-tests@invalid>",
                    "ed25519", "sign", "never"])
        _run(gpg + ["--clearsign", "-o", str(repo / "InRelease"), str(repo / "Release")])
        _run(gpg + ["--detach-sign", "--armor", "-o", str(repo / "Release.gpg"), str(repo / "Release")])
        (root / f"{KEY_NAME}.gpg").write_bytes(
            subprocess.run(gpg + ["--export"], check=True, capture_output=True).stdout)
        _run(gpg + ["--armor", "--export", "-o", str(root / f"{KEY_NAME}.asc")])
    finally:
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)
    shutil.copy(root / f"{KEY_NAME}.gpg", repo / f"{KEY_NAME}.gpg")


def _run(argv, cwd=None):
    """Run a build step; its output on failure is part of the error."""
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"{argv[0]} failed ({result.returncode}): {' '.join(argv)}\n"
                           f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result.stdout
