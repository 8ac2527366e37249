"""Test sites built from sample-pillar/: plain pillar dicts for the Python API, and pillar roots
plus masterless minion configs for salt-call, pointed at a test dockerd and temporary storage."""

import json
import os
import pathlib
import subprocess
import sys
import tempfile

import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
SAMPLE_SITE = REPO / "sample-pillar" / "site"
SALT_CALL = [sys.executable, "-c", "import sys; from salt.scripts import salt_call; sys.argv[0]='salt-call'; salt_call()"]

# Shipped code imports its shared modules through Salt's utils dirs; the tests import them here.
# The checkout too, for the offline migration tool's package (ccc_migrate/, as its launcher runs it).
sys.path.insert(0, str(REPO / "_utils"))
sys.path.insert(1, str(REPO / "_modules"))
sys.path.insert(2, str(REPO))
from ccc_pillar import deep_merge  # noqa: E402  (re-exported for the tests)


def sample_ccc(node="node1"):
    """The sample site's ``ccc`` pillar for one node, merged as Salt merges it."""
    merged = {}
    for name in ("cluster", "user_types", "users", "containers"):
        merged = deep_merge(merged, yaml.safe_load((SAMPLE_SITE / f"{name}.sls").read_text()))
    node_file = SAMPLE_SITE / "nodes" / f"{node}.sls"
    if node_file.exists():
        merged = deep_merge(merged, yaml.safe_load(node_file.read_text()))
    return merged["ccc"]


def storage_overrides(root):
    """``ccc:cluster`` overrides that put every storage root under ``root`` (created here)."""
    root = pathlib.Path(root)
    nfs = {key: str(root / "shared" / key) for key in ("user_data", "group_data", "apps_data", "dataset_data", "private_data")}
    local = {key: str(root / "local" / key) for key in ("hdd_data", "ssd_data", "sshd_data")}
    for path in list(nfs.values()) + list(local.values()):
        os.makedirs(path, exist_ok=True)
    return {"mount_points": {"nfs": nfs, "local": local}}


def unmount_below(root):
    """Lazily unmount every mount under ``root`` (live private data mounts a run left behind)."""
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        points = [line.split()[4] for line in handle if line.split()[4].startswith(str(root) + "/")]
    for point in sorted(points, reverse=True):
        subprocess.run(["umount", "-l", point], check=False)


NODE_INDEX = {"node1": 1, "node2": 2, "node3": 3}


def node_state_dir(storage_root, node):
    """``ccc:node:state_dir`` of a simulated node: per test and per node (the record of the
    containers its role created must never be shared between nodes)."""
    return str(pathlib.Path(storage_root) / "local" / "node-state" / node)


def node_local(storage_root, node):
    """Node-local folders of a simulated node, per test: ``state_dir`` and ``binds_dir`` (its pin
    tmpfs, unmounted with the test's storage by ``unmount_below``)."""
    return {"state_dir": node_state_dir(storage_root, node),
            "binds_dir": str(pathlib.Path(storage_root) / "local" / "binds" / node)}


def network_overrides(node):
    """``ccc:cluster:networks`` for one simulated node: its own subnets and bridge names, so
    several private dockerds on one host never share a bridge or a route."""
    index = NODE_INDEX[node]
    names = ("lab-unrestricted", "student-restricted", "claims")
    return {
        name: {"subnet": f"10.232.{index}.{64 * slot}/26", "gateway": f"10.232.{index}.{64 * slot + 1}",
               "bridge_name": f"ccc{index}-{name.split('-')[0][:5]}"}
        for slot, name in enumerate(names)
    }


def node_ccc(node, storage_root, docker_url):
    """The sample site's ccc pillar for ``node``, pointed at test storage and a test dockerd."""
    overrides = {"cluster": dict(storage_overrides(storage_root), networks=network_overrides(node)),
                 "node": {"docker_url": docker_url, **node_local(storage_root, node)}}
    return deep_merge(sample_ccc(node), overrides)


# One keyring (the sample's DEMO key) for every test config: each keyring gets its own gpg-agent,
# which outlives the test and holds inotify instances (root has 128 on Debian by default).
# One per pytest-xdist worker: two workers never create and import into one keyring at once.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
SHARED_GPG_KEYDIR = pathlib.Path(tempfile.gettempdir()) / (f"ccc-salt-test-gpgkeys-{os.getuid()}"
                                                           + (f"-{_WORKER}" if _WORKER else ""))


class SaltNode:
    """A masterless minion (salt-call --local) for one simulated node of a test site."""

    def __init__(self, workdir, node, docker_url, storage_root, extra_ccc=None):
        self.node = node
        self.workdir = pathlib.Path(workdir)
        self.overrides_root = self.workdir / "pillar-overrides"
        self.config_dir = self.workdir / "config"
        self.docker_url = docker_url
        self.storage_root = pathlib.Path(storage_root)
        self.extra_ccc = extra_ccc or {}
        self.write_pillar()
        subprocess.run(
            [sys.executable, str(REPO / "scripts" / "make-local-config.py"), "--config-dir", str(self.config_dir),
             "--id", node, "--pillar-root", str(self.overrides_root), "--gpg-keydir", str(SHARED_GPG_KEYDIR)],
            check=True, capture_output=True,
        )
        self.salt_call("saltutil.sync_all")

    def write_pillar(self, extra_ccc=None):
        """(Re)write this node's override pillar: storage, Docker endpoint and ``extra_ccc``."""
        if extra_ccc is not None:
            self.extra_ccc = extra_ccc
        node_sls = self.overrides_root / "site" / "nodes" / f"{self.node}.sls"
        node_sls.parent.mkdir(parents=True, exist_ok=True)
        base = yaml.safe_load((SAMPLE_SITE / "nodes" / f"{self.node}.sls").read_text())["ccc"]
        ccc = deep_merge(base, {"cluster": dict(storage_overrides(self.storage_root), networks=network_overrides(self.node)),
                                "node": {"docker_url": self.docker_url, **node_local(self.storage_root, self.node)}})
        ccc = deep_merge(ccc, self.extra_ccc)
        node_sls.write_text(yaml.safe_dump({"ccc": ccc}))

    def salt_call(self, *args, check=True, timeout=300):
        """Run salt-call --local for this node; returns parsed JSON output (``local`` value)."""
        command = SALT_CALL + ["--local", "-c", str(self.config_dir), "--out=json", "--retcode-passthrough", *args]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        try:
            output = json.loads(proc.stdout)["local"] if proc.stdout.strip() else None
        except ValueError:
            output = None
        if check and proc.returncode not in (0,):
            raise AssertionError(f"salt-call {' '.join(args)} exited {proc.returncode}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
        return output, proc.returncode

    def apply(self, *args, check=True):
        """state.apply containers [args]; returns ({state id: result dict}, returncode)."""
        output, code = self.salt_call("state.apply", "containers", *args, check=check)
        results = {}
        for key, value in (output or {}).items():
            results[key.split("_|-")[1]] = value
        return results, code
