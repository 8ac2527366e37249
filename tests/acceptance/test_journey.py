"""The admin's whole journey, as docs/migration.md and docs/operations.md tell it, on two systemd
test nodes (tests/support/sysnode.py: gpu1 and gpu3 of the test inventory, each with its own
salt-minion and dockerd) and a real salt-master configured by scripts/master_config.py:

1. the containers the original playbook made run on the nodes (its container contract: names,
   env, mounts, labels and networks as tests/integration/test_migrate_roundtrip.py knows them);
   each user has a file in their home (the test inventory with each user's real public key: a
   copy of tests/data/ansible-inventory whose placeholder keys are replaced, and keys added for
   the two users who had none);
2. ``scripts/ccc-secret gen-key`` makes the master's key, ``scripts/migrate-ansible-inventory``
   writes the site pillar with the vault's secrets encrypted to it, the master serves it (the
   secrets decrypt) and the minions' keys are accepted;
3. the cut-over, node by node, as docs/migration.md writes it (the commands it quotes are asserted
   to be in the docs): test mode, the original's containers listed and removed, ``state.apply
   cluster``, ``state.apply containers``: every stack of the node runs, and every user logs in
   over SSH with their key (from the node) and finds their home file;
4. ``salt-run ccc.status`` is all ok;
5. a user edits their settings file and the container follows; an admin adds a user in pillar and
   their container appears without any refresh, and the user logs in over SSH with their key;
6. one node is rebooted: everything it ran comes back and ``ccc.status`` says so.

Each step's time is printed (``-s``) and summed up at the end.

The site's local adjustments (a test network has no GPUs, registry, Portainer image, NFS server
or outside network), written as an admin would in a node's pillar file: ``only_roles: docker``
(the other roles need the hardware or outside services), no registry logins, no NVIDIA toolkit,
no Portainer agent, images never pulled, ``compute_devices`` empty (NVIDIA_VISIBLE_DEVICES=void),
GitHub keys from a file. The shared storage (``/data/shared``, NFS in the inventory) is one host
folder bound into both nodes. The images are ``ccc-test/sshd:1`` (tests/images/sshd) tagged with
the inventory's names and loaded into each node's dockerd."""

import importlib.util
import json
import pathlib
import re
import shutil
import subprocess
import time

import pytest
import yaml

import master_config
import minion_config
from support import secrets, site
from support.sysnode import HOST_IP, REPO, accept_minion

pytestmark = pytest.mark.docker

INVENTORY = REPO / "tests" / "data" / "ansible-inventory"
USER_LIST = "group_vars/ccc-cluster/user-list.yml"
USERS = {"ana-main": "ana", "bor-main": "bor", "eva-admin": "eva", "cene-thesis": "cene", "dara-course": "dara",
         "eva-student-gpu": "eva"}
NODES = ("gpu1", "gpu3")
NODE_STACKS = {"gpu1": {"ana-main", "bor-main", "eva-admin"}, "gpu3": {"cene-thesis", "dara-course", "eva-student-gpu"}}
SHARED = "/data/shared"  # the inventory's NFS mount points live below it
IMAGE = "ccc-test/sshd:1"
MIGRATION_DOC = (REPO / "docs" / "migration.md").read_text()
OPERATIONS_DOC = (REPO / "docs" / "operations.md").read_text()
README = (REPO / "README.md").read_text()
TIMES = {}


def _contract():
    """tests/integration/test_migrate_roundtrip.py's model of the original's containers, loaded
    under its own name (the module is collected as a test module too)."""
    path = REPO / "tests" / "integration" / "test_migrate_roundtrip.py"
    spec = importlib.util.spec_from_file_location("ccc_original_contract", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def documented(command, doc=MIGRATION_DOC):
    """The test runs what the docs say: ``command`` (with ``<node>`` for the node) is quoted there."""
    assert command in doc, f"not in the docs: {command}"
    return command


class Step:
    """Times one step of the journey into TIMES."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.started = time.monotonic()
        return self

    def __exit__(self, *exc):
        TIMES[self.name] = time.monotonic() - self.started
        print(f"\n[journey] {self.name}: {TIMES[self.name]:.1f} s")


def wait_for(what, check, timeout, interval=1.0, explain=None):
    """Poll ``check`` until it is true; on timeout fail with ``explain()`` (what the admin would read)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s (last: {value!r})\n{explain() if explain else ''}")
        time.sleep(interval)


def diagnose(master, node, email, stack):
    """What an admin reads when an edit is not followed (docs/operations.md, "See what is wrong")."""
    parts = {"deploy": node.exec(["cat", f"{SHARED}/user_data/{email}/container-settings/{stack}.deploy"], check=False).stdout,
             "redeploy_status": master.salt_run_cli(timeout=60).run("ccc.redeploy_status").stdout,
             "beacons": master.salt_cli(timeout=60).run("beacons.list", minion_tgt=node.name).stdout,
             "minion log": node.exec("journalctl -u ccc-test-salt-minion --no-pager -n 60", check=False).stdout}
    return "\n".join(f"--- {key}\n{value[-4000:]}" for key, value in parts.items())


# ---- the site, the master and the nodes -------------------------------------------------------

@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("journey")


@pytest.fixture(scope="module")
def user_keys(work):
    """Each user's SSH key pair: ``{user: private key path}``."""
    keys = {}
    for user in sorted(set(USERS.values())):
        keys[user] = work / "keys" / user
        keys[user].parent.mkdir(exist_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{user}@laptop", "-f", str(keys[user])],
                       check=True)
    return keys


@pytest.fixture(scope="module")
def inventory(work, user_keys):
    """The test inventory with the users' real public keys (bor's come from GitHub, a file here)."""
    copy = work / "inventory"
    shutil.copytree(INVENTORY, copy)
    text = (copy / USER_LIST).read_text()
    public = {user: key.with_suffix(".pub").read_text().strip() for user, key in user_keys.items()}
    for user, placeholder in (("ana", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMigrationTestKeyForAnaOnly00000000000000 ana@laptop"),
                              ("eva", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMigrationTestKeyForEvaOnly00000000000000 eva@desk")):
        assert placeholder in text
        text = text.replace(placeholder, public[user])
    for user in ("cene", "dara"):
        assert f"    USER_NAME: {user}\n" in text
        text = text.replace(f"    USER_NAME: {user}\n", f"    USER_NAME: {user}\n    USER_PUBKEY: \"{public[user]}\"\n")
    (copy / USER_LIST).write_text(text)
    return copy, public["bor"]


@pytest.fixture(scope="module")
def master_key(work):
    """docs/operations.md: ``ccc-secret gen-key --homedir /etc/salt/gpgkeys`` (here a test folder)."""
    keydir = work / "gpgkeys"
    made = subprocess.run([str(REPO / "scripts" / "ccc-secret"), "gen-key", "--homedir", str(keydir)],
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    fingerprint = re.search(r"key id: ([0-9A-F]{40})", made.stdout).group(1)
    yield keydir, fingerprint
    secrets.stop_agent(keydir)


@pytest.fixture(scope="module")
def site_pillar(work, master_key, inventory):
    """Step 2: the migration with the vault, secrets encrypted to the master's key."""
    keydir, fingerprint = master_key
    source, _ = inventory
    out = work / "site-pillar"
    with Step("2a migrate-ansible-inventory"):
        proc = subprocess.run([str(REPO / "scripts" / "migrate-ansible-inventory"), str(source), str(out),
                               "--vault-password-file", str(source / ".vault-password"),
                               "--recipient", fingerprint, "--gpg-homedir", str(keydir)],
                              capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (out / "site" / "secrets.sls").read_text().startswith("#!yaml|gpg")
    return out


def local_adjustments(migrated_node):
    """The node's migrated pillar plus the test site's local adjustments (module docstring)."""
    ccc = yaml.safe_load(migrated_node.read_text())["ccc"]
    ccc.pop("netplan", None)
    ccc.pop("zfs", None)
    ccc["roles"] = {}
    ccc["node"] = dict(ccc.get("node") or {}, compute_devices={})
    ccc["only_roles"] = "docker"
    ccc["docker"] = {"registries": [], "nvidia_toolkit": {"enabled": False}, "portainer_agent": {"enabled": False}}
    ccc["cluster"] = {"image_policy": {"pull": "missing"}, "github_keys_url": "file:///srv/github/{login}.keys"}
    return "#!yaml\n" + yaml.safe_dump({"ccc": ccc}, sort_keys=False)


@pytest.fixture(scope="module")
def overrides(work, site_pillar):
    """A pillar root before the site's: each node's file with the local adjustments."""
    root = work / "local-pillar"
    for node in NODES:
        path = root / "site" / "nodes" / f"{node}.sls"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(local_adjustments(site_pillar / "site" / "nodes" / f"{node}.sls"))
    return root


@pytest.fixture(scope="module")
def master(salt_factories, site_pillar, overrides, master_key):
    """README "Master setup": scripts/master_config.py's config, the site and the master's key."""
    keydir, _ = master_key
    config = master_config.master_config(REPO, site_pillar, [overrides], gpg_keydir=keydir)
    config["interface"] = HOST_IP
    factory = salt_factories.salt_master_daemon("ccc-journey-master", overrides=config)
    with factory.started():
        yield factory


@pytest.fixture(scope="module")
def shared(work):
    folder = work / "shared"
    folder.mkdir()
    yield folder
    subprocess.run(["rm", "-rf", str(folder)], check=False)


@pytest.fixture(scope="module")
def originals(sysnodes, shared, site_pillar, inventory, user_keys):
    """Step 1: the nodes as the original playbook left them: Docker from the site's mirror, its
    networks and the containers of its contract, running; each user's file in their home."""
    contract = _contract()
    contract.INVENTORY, contract.GITHUB_KEY = inventory  # the inventory with the users' real keys
    cluster = yaml.safe_load((site_pillar / "site" / "cluster.sls").read_text())["ccc"]["cluster"]
    saved = subprocess.run(["docker", "save", IMAGE], capture_output=True, check=True).stdout
    networks = yaml.safe_load((INVENTORY / "group_vars" / "ccc-cluster" / "cluster-vars.yml").read_text())["docker_networks"]
    images = {c["CONTAINER_IMAGE"] for c in contract.inventory_vars("group_vars/ccc-cluster/user-containers.yml")["deployment_containers"]}
    made = {}
    with Step("1 nodes booted with the original's containers"):
        for node in NODES:
            made[node] = sysnodes(node, volumes=[(shared, SHARED)])
            made[node].add_apt_source()  # the site's Debian mirror
            made[node].exec("DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io", timeout=600)
            made[node].exec("echo Europe/Ljubljana > /etc/timezone && mkdir -p /srv/github && "
                            f"echo '{contract.GITHUB_KEY}' > /srv/github/borkralj.keys")
            subprocess.run(["docker", "exec", "-i", made[node].container, "docker", "load"], input=saved,
                           capture_output=True, check=True)
            for image in images:
                made[node].exec(["docker", "tag", IMAGE, image])
            for net in networks:
                if not net.get("disabled"):
                    made[node].exec(["docker", "network", "create", "--subnet", net["subnet"], "--gateway", net["gateway"],
                                     "-o", f"com.docker.network.bridge.name={net['internal_name']}", net["name"]])
            for stack in sorted(NODE_STACKS[node]):
                run_original(made[node], contract.original_container(stack, node, cluster["mount_points"]), stack)
            for user, key in user_keys.items():
                made[node].write_file(f"/root/keys/{user}", key.read_text(), mode="0600")
        # Each user's file, written in the original's container (the home is on the shared storage).
        for node in NODES:
            for stack in NODE_STACKS[node]:
                made[node].exec(["docker", "exec", stack, "sh", "-c", f"echo {stack} before the switch > /home/{USERS[stack]}/notes.txt"])
    return made


def run_original(node, original, stack):
    """``docker run`` as the original's compute container role ran it (§3 of the reference)."""
    argv = ["docker", "run", "--detach", "--name", stack, "--hostname", original["hostname"],
            "--restart", "unless-stopped", "--shm-size", str(original["shm_size"]), "--network", original["networks"][0]]
    for key, value in original["env"].items():
        argv += ["--env", f"{key}={value}"]
    for key, value in original["labels"].items():
        argv += ["--label", f"{key}={value}"]
    for source, target, read_only in original["mounts"]:
        node.exec(["mkdir", "-p", source]) if not source.startswith(("/etc/", "/var/run/")) else None
        argv += ["--mount", f"type=bind,source={source},target={target}" + (",readonly" if read_only else "")]
    node.exec(argv + ["--privileged"] * original["privileged"] + [original["env"]["CONTAINER_IMAGE"]])
    for network in original["networks"][1:]:
        node.exec(["docker", "network", "connect", network, stack])


def running_stacks(node, managed=None):
    """Names of the running containers with the CCC user label (``managed``: ccc-salt's only)."""
    listed = node.exec(["docker", "ps", "--filter", "label=ccc-user.email",
                        "--format", '{{.Names}} {{.Label "ccc.managed-by"}}']).stdout.split("\n")
    pairs = [line.split(" ", 1) + [""] for line in listed if line.strip()]
    return {name for name, owner, *_ in pairs if managed is None or (owner.strip() == "ccc-salt") == managed}


def salt(master, node, *args, timeout=600):
    """``salt <node> ...`` through the master; waits out a state run already going on the node (the
    minion's start-up reconcile) instead of failing on it."""
    deadline = time.monotonic() + timeout
    while True:
        ran = master.salt_cli(timeout=timeout).run(*args, minion_tgt=node)
        busy = isinstance(ran.data, list) and any("is running as PID" in str(line) for line in ran.data)
        if not busy or time.monotonic() > deadline:
            return ran
        time.sleep(2)


def assert_states_ok(ran):
    assert isinstance(ran.data, dict), ran.stdout[-3000:] + ran.stderr[-3000:]
    failed = {key: value["comment"] for key, value in ran.data.items() if value["result"] is False}
    assert failed == {}, failed


@pytest.fixture(scope="module")
def minions(master, originals):
    """Step 2 (end): each node's minion with scripts/minion_config.py's settings, key accepted."""
    with Step("2b minions started and accepted"):
        for node, made in originals.items():
            settings = minion_config.minion_config(publish_port=master.config["publish_port"])
            made.start_minion(HOST_IP, master.config["ret_port"], master.config["publish_port"], settings=settings)
            accept_minion(master, node, timeout=120)
    return originals


# ---- the journey ------------------------------------------------------------------------------

def test_1_the_originals_containers_run_on_the_nodes(originals):
    for node in NODES:
        assert running_stacks(originals[node], managed=False) == NODE_STACKS[node]


def test_2_the_master_serves_the_migrated_site_and_its_secrets_decrypt(master, minions):
    for node in NODES:
        with Step(f"2c {node}: saltutil.sync_all, saltutil.refresh_pillar"):
            for command in (documented("salt 'gpu*' saltutil.sync_all", README),
                            documented("salt 'gpu*' saltutil.refresh_pillar", README)):
                assert salt(master, node, command.split()[2], timeout=300).returncode == 0
        errors = salt(master, node, "pillar.item", "_errors", "unmask=True", timeout=60)
        assert not (errors.data or {}).get("_errors"), errors.stdout
        keys = salt(master, node, "pillar.keys", "ccc:secrets", timeout=60)
        assert keys.returncode == 0 and keys.data, keys.stdout  # names only: never the values
        users = salt(master, node, "pillar.keys", "ccc:users", timeout=60).data  # Salt 3008 masks values
        assert "ana.novak@lab.example.org" in users, users
    # The original's containers were not touched by the minions' start-up reconcile.
    for node in NODES:
        assert running_stacks(minions[node], managed=False) == NODE_STACKS[node]


def test_3_cut_over_node_by_node_as_docs_migration_writes_it(master, minions):
    for node in NODES:
        made = minions[node]
        with Step(f"3 cut-over {node}: test mode"):
            for command in (documented("salt <node> state.apply cluster test=True"),
                            documented("salt <node> state.apply containers test=True")):
                ran = salt(master, node, *command.split()[2:])
                assert isinstance(ran.data, dict), ran.stdout[-3000:] + ran.stderr[-3000:]
        with Step(f"3 cut-over {node}: the original's containers removed"):
            documented("docker ps -a --filter label=ccc-user.email --format '{{.Names}} {{.Label \"ccc.managed-by\"}}'")
            listed = made.exec(["docker", "ps", "-a", "--filter", "label=ccc-user.email",
                                "--format", '{{.Names}} {{.Label "ccc.managed-by"}}']).stdout.split("\n")
            shown = [line.split()[0] for line in listed if line.strip() and len(line.split()) == 1]
            assert set(shown) == NODE_STACKS[node], listed
            documented("docker rm -f <STACK_NAME>")
            for stack in shown:
                made.exec(["docker", "rm", "-f", stack])
        with Step(f"3 cut-over {node}: state.apply cluster"):
            assert_states_ok(salt(master, node, *documented("salt <node> state.apply cluster").split()[2:]))
        with Step(f"3 cut-over {node}: state.apply containers"):
            assert_states_ok(salt(master, node, *documented("salt <node> state.apply containers").split()[2:]))
        assert running_stacks(made, managed=True) == NODE_STACKS[node]


def ssh_from_node(node, stack, user, command, key=None, timeout=60):
    """``ssh`` from the node into ``stack`` (its address on its first network) as ``user``."""
    attrs = json.loads(node.exec(["docker", "inspect", stack]).stdout)[0]
    address = next(iter(attrs["NetworkSettings"]["Networks"].values()))["IPAddress"]
    argv = ["ssh", "-i", key or f"/root/keys/{user}", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", f"{user}@{address}", command]
    return wait_for(f"{user} logs in to {stack}", lambda: (r := node.exec(argv, check=False)).returncode == 0 and r,
                    timeout=timeout)


def test_3_every_user_logs_in_over_ssh_with_their_key_and_finds_their_home_files(minions):
    with Step("3 every user logged in over SSH"):
        for node in NODES:
            for stack in sorted(NODE_STACKS[node]):
                logged = ssh_from_node(minions[node], stack, USERS[stack], "id -un; cat ~/notes.txt")
                assert logged.stdout == f"{USERS[stack]}\n{stack} before the switch\n", (stack, logged.stdout)


def status(master):
    ran = master.salt_run_cli(timeout=120).run(*documented("salt-run ccc.status", OPERATIONS_DOC).split()[1:])
    assert isinstance(ran.data, dict), ran.stdout + ran.stderr
    return ran


def running_per_status(data):
    """``{node: stacks}`` that ``ccc.status`` shows running."""
    shown = {}
    for stack, where in data["stacks"].items():
        for node, item in where.items():
            if item["state"] == "running":
                shown.setdefault(node, set()).add(stack)
    return shown


def test_4_ccc_status_is_all_ok(master, minions):
    with Step("4 salt-run ccc.status"):
        ran = status(master)
    assert ran.data["not_answering"] == [], ran.data
    assert all(": ok (" in line for line in ran.data["health"]), ran.data["health"]
    assert running_per_status(ran.data) == NODE_STACKS, ran.data["containers"]
    assert ran.returncode == 0, ran.data["containers"]


def test_5_a_users_settings_edit_is_followed_within_seconds(master, minions):
    node = minions["gpu1"]
    import ccc_schema  # noqa: PLC0415  (support.site put _utils on the path)

    wanted = ccc_schema.parse_size("1GB")
    before = json.loads(node.exec(["docker", "inspect", "ana-main"]).stdout)[0]["HostConfig"]["ShmSize"]
    assert before != wanted
    with Step("5a settings edit -> container recreated"):
        node.exec(["docker", "exec", "ana-main", "sh", "-c",
                   "printf 'ana-main:\\n  SHM_SIZE: 1GB\\n' > /home/ana/.containers/ana-main.yml"])

        def shm():
            found = node.exec(["docker", "inspect", "ana-main"], check=False)
            if found.returncode:
                return None
            attrs = json.loads(found.stdout)[0]
            return attrs["State"]["Running"] and attrs["HostConfig"]["ShmSize"] == wanted

        wait_for("ana-main recreated with SHM_SIZE 1GB", shm, timeout=90,
                 explain=lambda: diagnose(master, node, "ana.novak@lab.example.org", "ana-main"))
    report = node.exec(["cat", f"{SHARED}/user_data/ana.novak@lab.example.org/container-settings/ana-main.deploy"]).stdout
    assert "gpu1" in report, report


def test_5_an_admin_adds_a_user_and_they_log_in_over_ssh(master, minions, site_pillar, work):
    key = work / "id_new"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    users = site_pillar / "site" / "users.sls"
    containers = site_pillar / "site" / "containers.sls"
    with Step("5b admin adds a user -> container runs"):
        data = yaml.safe_load(users.read_text())
        data["ccc"]["users"]["new.user@lab.example.org"] = {
            "USER_NAME": "newu", "USER_FULLNAME": "New User", "USER_TYPE": "researcher",
            "USER_EMAIL": "new.user@lab.example.org", "USER_PUBKEY": key.with_suffix(".pub").read_text().strip()}
        users.write_text("#!yaml\n" + yaml.safe_dump(data, sort_keys=False))
        data = yaml.safe_load(containers.read_text())
        data["ccc"]["containers"].append({"STACK_NAME": "newu-main", "USER_EMAIL": "new.user@lab.example.org",
                                          "CONTAINER_IMAGE": "vicoslab/ccc:base-v3.1-ubuntu22.04-cuda12.2"})
        containers.write_text("#!yaml\n" + yaml.safe_dump(data, sort_keys=False))
        wait_for("newu-main running on gpu1", lambda: "newu-main" in running_stacks(minions["gpu1"], managed=True),
                 timeout=120)
    node = minions["gpu1"]
    node.write_file("/root/id_new", key.read_text(), mode="0600")
    with Step("5c first SSH login of the new user"):
        logged = ssh_from_node(node, "newu-main", "newu", "id -un; pwd", key="/root/id_new")
    assert logged.stdout.split() == ["newu", "/home/newu"]


def test_5_a_stack_moves_node_when_its_user_says_so(master, minions):
    """eva-student-gpu (allowed on gpu1 and gpu3, placed on gpu3) moves to gpu1 by its user's
    DEPLOYMENT_NODES; the same home is there, and gpu3 keeps no copy."""
    old, new = minions["gpu3"], minions["gpu1"]
    old.exec(["docker", "exec", "eva-student-gpu", "sh", "-c", "echo made on gpu3 > /home/eva/moved.txt"])
    with Step("5d a stack moves gpu3 -> gpu1"):
        old.exec(["docker", "exec", "eva-student-gpu", "sh", "-c",
                  "printf 'eva-student-gpu:\\n  DEPLOYMENT_NODES: [gpu1]\\n' > /home/eva/.containers/eva-student-gpu.yml"])
        wait_for("eva-student-gpu running on gpu1 only",
                 lambda: "eva-student-gpu" in running_stacks(new, managed=True)
                 and "eva-student-gpu" not in running_stacks(old), timeout=120,
                 explain=lambda: diagnose(master, old, "eva.horvat@lab.example.org", "eva-student-gpu"))
    moved = new.exec(["docker", "exec", "eva-student-gpu", "cat", "/home/eva/moved.txt"]).stdout
    assert moved == "made on gpu3\n"


def test_6_a_rebooted_node_runs_everything_again_and_status_says_so(master, minions):
    node = minions["gpu3"]
    ran_before = running_stacks(node, managed=True)
    with Step("6 gpu3 rebooted -> its stacks run again"):
        node.restart(timeout=180)
        wait_for("gpu3's stacks running", lambda: running_stacks(node, managed=True) >= ran_before, timeout=240)
    with Step("6 ccc.status after the reboot"):
        ran = wait_for("ccc.status all ok", lambda: (r := status(master)).returncode == 0 and r, timeout=120, interval=5)
    assert ran.data["not_answering"] == []
    assert running_per_status(ran.data)["gpu3"] == ran_before, ran.data["containers"]
    print("\n[journey] times: " + ", ".join(f"{name}: {seconds:.1f} s" for name, seconds in TIMES.items()))
