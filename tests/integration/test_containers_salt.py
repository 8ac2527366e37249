"""End to end through Salt: `salt-call --local state.apply containers` against sample-pillar/ on a
real (private) dockerd. GPUs: that dockerd runs with a fake `nvidia-container-runtime-hook` on its
PATH (the narrowest hardware boundary, see tests/support/dockerd.py), so Docker's own nvidia
device driver accepts the GPU device requests and passes the UUIDs to the hook."""

import json
import os
import pathlib
import subprocess

import pytest
import yaml

import ccc_moves

from support.site import SALT_CALL, SaltNode, sample_ccc

NODE1_STACKS = {"ana-main", "ana-jupyter", "bor-main"}
LAB_GPUS = sample_ccc("node1")["node"]["compute_devices"]["device_lab"]
STUDENT_GPUS = sample_ccc("node1")["node"]["compute_devices"]["device_student"]

pytestmark = pytest.mark.docker


@pytest.fixture
def node1(tmp_path, clean_node1, storage):
    salt = SaltNode(tmp_path / "salt", "node1", clean_node1.url, storage)
    salt.client = clean_node1.client()
    salt.daemon = clean_node1
    return salt


def managed(client):
    return {c.labels["ccc.stack"]: c for c in client.containers.list(all=True, filters={"label": "ccc.managed-by=ccc-salt"})}


def user_dir(storage, email):
    return pathlib.Path(storage) / "shared" / "user_data" / email


def same_folder(source, folder):
    """A pin and the user folder it was made from are the same inode on the same file system."""
    a, b = os.stat(source), os.stat(folder)
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def changed_states(results):
    return {state_id for state_id, result in results.items() if result["changes"]}


def test_first_apply_deploys_the_node_contract_and_second_apply_changes_nothing(node1, storage):
    results, code = node1.apply()
    assert code == 0, json.dumps(results, indent=1)[-3000:]
    # One state plans and applies them all; each container reports in its own state.
    assert results["ccc-containers-deploy"]["result"] is True and results["ccc-containers-deploy"]["changes"] == {}
    assert all("created" in results[f"ccc-container-{stack}"]["changes"] for stack in NODE1_STACKS)
    containers = managed(node1.client)
    assert set(containers) == NODE1_STACKS
    assert all(c.status == "running" for c in containers.values())

    attrs = node1.client.api.inspect_container("ana-main")
    env = dict(item.split("=", 1) for item in attrs["Config"]["Env"])
    assert env["USER_NAME"] == "ana"
    assert env["USER_ID"] == "1000"
    assert env["USER_PUBKEY"].startswith("ssh-ed25519 ")
    assert env["CONTAINER_NAME"] == "ana-main" and env["CONTAINER_NODE"] == "node1"
    assert env["CONTAINER_IMAGE"] == "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1"
    assert env["RUNIT_STATUS_FILE"] == "/home/ana/.containers/ana-main.status"
    assert env["RUNIT_WORKING_ENV_FILE"] == "/home/ana/.containers/ana-main.env-backup"
    assert env["APPS"] == "/opt/apps/matlab/bin/matlab:/opt/apps/pycharm/bin/pycharm.sh,pycharm"
    assert "'/home/ana/.containers/ana-main.yml'" in env["CONTAINER_WELCOME_MSG"]
    assert env["NVIDIA_VISIBLE_DEVICES"] == ",".join(LAB_GPUS)
    assert "USER_GROUPS" not in env

    labels = attrs["Config"]["Labels"]
    assert labels["frp.enabled"] == "true"
    assert labels["frp.22"] == "tcp" and labels["frp.22.health_check"] == "false"
    assert labels["frp.6006"] == "http"
    assert labels["frp.6006.http.subdomain"] == "node1-ana-tb"
    assert labels["frp.6006.http.username"] == "ana"
    assert labels["frp.6006.http.password"] == "change-me"
    assert labels["frp.notify_email"] == "ana.novak@example.org"
    assert labels["ccc-user.email"] == "ana.novak@example.org" and labels["ccc-user.name"] == "Ana Novak"
    assert "ccc-user.mentor" not in labels
    assert labels["ccc.managed-by"] == "ccc-salt" and len(labels["ccc.spec-hash"]) == 20
    assert set(attrs["Config"]["ExposedPorts"]) == {"22/tcp", "6006/tcp"}

    host = attrs["HostConfig"]
    assert attrs["Config"]["Hostname"] == "node1"
    assert host["RestartPolicy"]["Name"] == "unless-stopped"
    assert host["ShmSize"] == 8 * 1024**3
    assert not host["Privileged"]
    [request] = host["DeviceRequests"]
    assert request["Driver"] == "nvidia" and request["DeviceIDs"] == LAB_GPUS
    assert request["Capabilities"] == [["gpu"]]
    mounts = {m["Destination"]: m for m in attrs["Mounts"]}
    home = user_dir(storage, "ana.novak@example.org")
    # User folders reach Docker only as pins (root-only bind mounts of the checked inode).
    binds = pathlib.Path(storage) / "local" / "binds" / "node1" / "ana-main"
    for target, folder in (("/home/ana", home / "ana-main"), ("/home/ana/.containers", home / "container-settings"),
                           ("/storage/user", home), ("/storage/private", home / "private")):
        source = pathlib.Path(mounts[target]["Source"])
        assert source.parent.parent == binds and same_folder(source, folder), (target, source)
    assert mounts["/home/ana"]["RW"]
    assert not mounts["/opt/apps"]["RW"] and not mounts["/home/.sshd"]["RW"]
    assert mounts["/home/.sshd"]["Source"] == str(pathlib.Path(storage) / "local" / "sshd_data" / "stacks" / "ana-main")
    assert mounts["/storage/group"]["RW"] and mounts["/storage/datasets"]["RW"]
    assert mounts["/storage/private"]["Propagation"] == "rslave"
    assert same_folder(mounts["/storage/private/lab"]["Source"], pathlib.Path(storage) / "shared" / "private_data" / "lab")
    assert "no-new-privileges" in host["SecurityOpt"] and set(host["CapDrop"]) >= {"NET_RAW", "MKNOD"}
    assert host["PidsLimit"] == 16384
    assert set(attrs["NetworkSettings"]["Networks"]) == {"lab-unrestricted", "claims"}

    # The GPU request reached the runtime hook (fake NVIDIA toolkit), with the UUIDs in the env.
    calls = pathlib.Path(node1.daemon.calls_log).read_text()
    assert "prestart" in calls
    pid1_env = node1.client.containers.get("ana-main").exec_run(["cat", "/proc/1/environ"]).output.split(b"\0")
    visible = [item for item in pid1_env if item.startswith(b"NVIDIA_VISIBLE_DEVICES=")]
    assert visible == [f"NVIDIA_VISIBLE_DEVICES={','.join(LAB_GPUS)}".encode()]

    bor = node1.client.api.inspect_container("bor-main")
    assert bor["HostConfig"]["DeviceRequests"][0]["DeviceIDs"] == LAB_GPUS + STUDENT_GPUS
    assert bor["Config"]["Labels"]["ccc-user.mentor"] == "Ana Novak"
    jupyter = node1.client.api.inspect_container("ana-jupyter")
    assert same_folder({m["Destination"]: m["Source"] for m in jupyter["Mounts"]}["/home/ana"], home / "ana-main")

    default_settings = home / "container-settings" / "ana-main.yml"
    assert default_settings.stat().st_uid == 1000
    assert yaml.safe_load(default_settings.read_text()) == {"ana-main": None}
    report = (home / "container-settings" / "ana-main.deploy").read_text()
    assert "node: node1" in report and "result: created and started" in report

    ids = {stack: c.id for stack, c in containers.items()}
    results, code = node1.apply()
    assert code == 0
    assert changed_states(results) == set(), [results[s]["changes"] for s in changed_states(results)]
    assert {stack: c.id for stack, c in managed(node1.client).items()} == ids
    assert (home / "container-settings" / "ana-main.deploy").read_text() == report


def test_a_user_setting_recreates_only_that_container_and_test_mode_shows_the_diff(node1, storage):
    node1.apply()
    ids = {stack: c.id for stack, c in managed(node1.client).items()}
    settings = user_dir(storage, "ana.novak@example.org") / "container-settings" / "ana-main.yml"
    settings.write_text("ana-main:\n  SHM_SIZE: 4g\n  INSTALL_PACKAGES: htop tmux\n")

    preview, code = node1.apply("test=True")
    assert preview["ccc-container-ana-main"]["result"] is None
    diff = preview["ccc-container-ana-main"]["changes"]["recreated"]
    assert diff["shm_size"] == {"old": 8 * 1024**3, "new": 4 * 1024**3}
    assert diff["environment"]["INSTALL_PACKAGES"] == {"old": "", "new": "htop tmux"}
    assert "labels" not in diff or all("password" not in k or v["new"] == "***" for k, v in diff["labels"].items())
    assert {stack: c.id for stack, c in managed(node1.client).items()} == ids

    results, code = node1.apply()
    assert code == 0
    after = {stack: c.id for stack, c in managed(node1.client).items()}
    assert after["ana-main"] != ids["ana-main"]
    assert {s: i for s, i in after.items() if s != "ana-main"} == {s: i for s, i in ids.items() if s != "ana-main"}
    attrs = node1.client.api.inspect_container("ana-main")
    assert attrs["HostConfig"]["ShmSize"] == 4 * 1024**3
    assert "INSTALL_PACKAGES=htop tmux" in attrs["Config"]["Env"]
    assert changed_states(results) == {"ccc-container-ana-main"}
    report = (settings.parent / "ana-main.deploy").read_text()
    assert "result: recreated with the new settings" in report and "packages: htop tmux" in report


def test_the_fast_redeploy_applies_one_stack_as_a_state_run_limited_to_it_does(node1, storage):
    """``ccc_docker.redeploy`` (what the master sends after an edit while the node's pillar is
    current): that container alone, recreated as the user asked and reported in ``.deploy``; a
    bad value keeps it and explains; a container that fails gives exit code 1; a name pillar does
    not know is refused;
    a container it starts gets the private data groups of its pin, as the state run's mounts
    step gives them."""
    shared = pathlib.Path(storage) / "shared" / "private_data" / "lab-shared"
    shared.mkdir(parents=True)
    (shared / "data.txt").write_text("lab data\n")
    node1.apply()
    ids = {stack: c.id for stack, c in managed(node1.client).items()}
    settings = user_dir(storage, "ana.novak@example.org") / "container-settings" / "ana-main.yml"
    report = settings.parent / "ana-main.deploy"
    settings.write_text("ana-main:\n  SHM_SIZE: 4g\n")

    out, code = node1.salt_call("ccc_docker.redeploy", "ana-main", "notice=one apply held back: you saved often")
    assert code == 0 and out["stack"] == "ana-main"
    assert out["facts"]["changes"]["recreated"]["shm_size"] == {"old": 8 * 1024**3, "new": 4 * 1024**3}
    assert out["deploy_started"] >= out["started"]
    after = {stack: c.id for stack, c in managed(node1.client).items()}
    assert after["ana-main"] != ids["ana-main"]
    assert {s: i for s, i in after.items() if s != "ana-main"} == {s: i for s, i in ids.items() if s != "ana-main"}
    assert node1.client.api.inspect_container("ana-main")["HostConfig"]["ShmSize"] == 4 * 1024**3
    assert "result: recreated with the new settings" in report.read_text()
    assert "one apply held back: you saved often" in report.read_text()

    settings.write_text("ana-main:\n  SHM_SIZE: 900t\n")  # the user's mistake: kept running, told why
    out, code = node1.salt_call("ccc_docker.redeploy", "ana-main")
    assert code == 0 and out["facts"]["changes"] == {} and not out["facts"]["problem"]
    assert managed(node1.client)["ana-main"].id == after["ana-main"]
    assert "'900t' is more than the cluster maximum" in report.read_text() and "NOT applied" in report.read_text()

    containers = sample_ccc("node1")["containers"]  # the admins' mistake: the container fails, exit code 1
    node1.write_pillar({"containers": [dict(containers[0], USER_EMAIL="nobody@example.org"), *containers[1:]]})
    out, code = node1.salt_call("ccc_docker.redeploy", "ana-main", check=False)
    assert code == 1 and out["success"] is False and "nobody@example.org" in out["facts"]["problem"]

    refused = subprocess.run(SALT_CALL + ["--local", "-c", str(node1.config_dir), "--retcode-passthrough",
                                          "ccc_docker.redeploy", "nobody-here"], capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0
    assert "nobody-here was not redeployed: no container of that name in this node's pillar" in refused.stderr + refused.stdout

    second = {"STACK_NAME": "ana-second", "USER_EMAIL": "ana.novak@example.org",
              "CONTAINER_IMAGE": "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1", "DEPLOYMENT_NODES": ["node1"]}
    node1.write_pillar({"containers": sample_ccc("node1")["containers"] + [second]})
    out, code = node1.salt_call("ccc_docker.redeploy", "ana-second")  # new here: a new pin, no groups in it yet
    assert code == 0 and "created" in out["facts"]["changes"]
    assert any("/ana-second/" in path for path in out["private_mounts"]["mounted"]), out["private_mounts"]
    container = node1.client.containers.get("ana-second")
    assert container.exec_run(["cat", "/storage/private/lab-shared/data.txt"]).output == b"lab data\n"


def test_filters_orphans_moves_and_disabled_purge(node1, storage):
    node1.apply()
    ids = {stack: c.id for stack, c in managed(node1.client).items()}

    # A filtered run touches only the selected container.
    settings_dir = user_dir(storage, "bor.kralj@example.org") / "container-settings"
    (settings_dir / "bor-main.yml").write_text("bor-main:\n  DEPLOYMENT_NODES: [node2]\n")
    results, code = node1.apply('pillar={"containers": "ana-main"}')
    assert code == 0 and set(k for k in results if k.startswith("ccc-container-")) == {"ccc-container-ana-main"}
    assert "bor-main" in managed(node1.client)

    # bor-main moved to node2: node1 keeps it until node2 reports it running (make-before-break) ...
    results, code = node1.apply('pillar={"users": "bor.kralj@example.org"}')
    assert code == 0
    assert "kept running on node1 until node2 runs it" in results["ccc-container-bor-main"]["comment"]
    assert "still running on node1" in (settings_dir / "bor-main.deploy").read_text()
    assert "bor-main" in managed(node1.client)
    # ... then removes it; the home stays. (node2's marker, as node2 writes it once it runs bor-main.)
    ccc_moves.write(str(pathlib.Path(storage) / "shared" / "user_data" / ".ccc-salt"), "bor-main", "node2", True)
    results, code = node1.apply('pillar={"users": "bor.kralj@example.org"}')
    assert code == 0
    assert results["ccc-container-bor-main"]["changes"]["removed"]
    assert "bor-main" not in managed(node1.client)
    assert (user_dir(storage, "bor.kralj@example.org") / "bor-main").is_dir()

    # ana-jupyter is dropped from pillar: the orphan is removed, its data is kept.
    containers = [c for c in sample_ccc("node1")["containers"] if c["STACK_NAME"] != "ana-jupyter"]
    node1.write_pillar({"containers": containers})
    results, code = node1.apply()
    assert code == 0
    assert results["ccc-containers-orphans"]["changes"] == {"removed": ["ana-jupyter"]}
    assert set(managed(node1.client)) == {"ana-main"}
    assert managed(node1.client)["ana-main"].id == ids["ana-main"]

    # DISABLED + PURGE_USER_DATA removes ana-main and only that stack's own data.
    (user_dir(storage, "ana.novak@example.org") / "ana-main" / "notes.txt").write_text("mine")
    for entry in containers:
        if entry["STACK_NAME"] == "ana-main":
            entry.update(DISABLED=True, PURGE_USER_DATA=True, STORAGE_NAME="ana-main")
    containers.append({"STACK_NAME": "ana-second", "USER_EMAIL": "ana.novak@example.org",
                       "CONTAINER_IMAGE": "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1", "DEPLOYMENT_NODES": ["node2"]})
    node1.write_pillar({"containers": containers})
    results, code = node1.apply()
    assert code == 0, results
    assert "ana-main" not in managed(node1.client)
    ana = user_dir(storage, "ana.novak@example.org")
    assert not (ana / "ana-main").exists()
    assert not (ana / "container-settings" / "ana-main.yml").exists()
    assert (ana / "container-settings").is_dir()
    assert (ana / "container-settings" / "ana-jupyter.yml").exists()


def test_bad_admin_record_fails_only_that_container(node1, storage):
    containers = sample_ccc("node1")["containers"]
    containers[0] = dict(containers[0], USER_EMAIL="nobody@example.org")
    node1.write_pillar({"containers": containers})
    results, code = node1.apply(check=False)
    assert code != 0
    assert results["ccc-container-ana-main"]["result"] is False
    assert "nobody@example.org" in results["ccc-container-ana-main"]["comment"]
    assert results["ccc-container-bor-main"]["result"] is True
    assert "failed: ana-main" in results["ccc-containers-summary"]["comment"]
    assert set(managed(node1.client)) == {"ana-jupyter", "bor-main"}


def test_live_private_mounts_follow_pillar_without_recreating_the_container(node1, storage):
    shared = pathlib.Path(storage) / "shared" / "private_data" / "lab-shared"
    shared.mkdir(parents=True)
    (shared / "data.txt").write_text("lab data\n")
    results, code = node1.apply()
    assert code == 0
    binds = pathlib.Path(storage) / "local" / "binds" / "node1"
    mounted = [pathlib.Path(p) for p in results["ccc-containers-private-mounts"]["changes"]["mounted"]]
    # Inside each granted container's own private pin, never on the user's path.
    assert {p.relative_to(binds).parts[0] for p in mounted} == {"ana-main", "ana-jupyter", "bor-main"}
    assert all(p.parts[-2:] == ("private", "lab-shared") for p in mounted)
    container = node1.client.containers.get("ana-main")
    assert container.exec_run(["cat", "/storage/private/lab-shared/data.txt"]).output == b"lab data\n"

    # Revoking the group for researchers unmounts it live; the container is not recreated.
    node1.write_pillar({"user_types": {"researcher": {"allowed_private_data_mount_groups": []}}})
    results, code = node1.apply()
    assert code == 0
    assert sorted(results["ccc-containers-private-mounts"]["changes"]["unmounted"]) == sorted(map(str, mounted))
    assert node1.client.containers.get("ana-main").id == container.id
    assert container.exec_run(["ls", "/storage/private/lab-shared"]).exit_code != 0
    assert (shared / "data.txt").exists()


def test_clean_removes_every_managed_container_but_no_data_and_no_foreign_container(node1, storage):
    node1.apply()
    foreign = node1.client.containers.create("ccc-test/tiny:1", name="not-ours")
    output, code = node1.salt_call("state.apply", "containers.clean")
    assert code == 0, output
    assert managed(node1.client) == {}
    assert node1.client.containers.get("not-ours").id == foreign.id
    assert (user_dir(storage, "ana.novak@example.org") / "ana-main").is_dir()
    assert (user_dir(storage, "ana.novak@example.org") / "container-settings" / "ana-main.yml").exists()

    # A container that merely has a managed container's name is never touched.
    node1.client.containers.create("ccc-test/tiny:1", name="ana-main")
    results, code = node1.apply(check=False)
    assert results["ccc-container-ana-main"]["result"] is False
    assert "not managed by ccc-salt" in results["ccc-container-ana-main"]["comment"]
    node1.client.containers.get("ana-main").remove(force=True)
    foreign.remove(force=True)


def impostor_image(client, stack):
    """An image whose labels claim ccc-salt made its containers (containers inherit image labels)."""
    base = client.containers.create("ccc-test/tiny:1")
    try:
        return base.commit(repository="ccc-test/impostor", tag=stack,
                           changes=["LABEL ccc.managed-by=ccc-salt", f"LABEL ccc.stack={stack}"])
    finally:
        base.remove(force=True)


def test_containers_ccc_salt_did_not_create_are_never_removed_or_replaced(node1, storage):
    results, code = node1.apply()
    assert code == 0
    # An image-labelled container whose stack is in no pillar: it looks like an orphan.
    ghost = node1.client.containers.create(impostor_image(node1.client, "ghost").id, name="ghost")
    assert ghost.labels["ccc.managed-by"] == "ccc-salt"
    # Someone with Docker access swaps ana-main for their own, with every label of the real one.
    labels = node1.client.api.inspect_container("ana-main")["Config"]["Labels"]
    node1.client.containers.get("ana-main").remove(force=True)
    foreign = node1.client.containers.create("ccc-test/tiny:1", name="ana-main", labels=labels)

    results, code = node1.apply(check=False)
    assert results["ccc-container-ana-main"]["result"] is False
    assert "not managed by ccc-salt" in results["ccc-container-ana-main"]["comment"]
    assert results["ccc-containers-orphans"]["result"] is True and not results["ccc-containers-orphans"]["changes"]
    assert node1.client.containers.get("ana-main").id == foreign.id
    assert node1.client.containers.get("ghost").id == ghost.id

    listed, _ = node1.salt_call("ccc_docker.managed")
    assert set(listed) == {"ana-jupyter", "bor-main"}
    # The execution module refuses (CommandExecutionError): salt-call says why on stderr and fails.
    refused = subprocess.run(SALT_CALL + ["--local", "-c", str(node1.config_dir), "ccc_docker.remove", "ghost"],
                             capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0 and "not managed by ccc-salt" in refused.stderr, refused
    output, code = node1.salt_call("state.apply", "containers.clean")
    assert code == 0, output
    assert {c.name for c in node1.client.containers.list(all=True)} >= {"ghost", "ana-main"}
    assert set(managed(node1.client)) == {"ghost", "ana-main"}  # labelled, but never ours
    ghost.remove(force=True)
    foreign.remove(force=True)


def break_pillar(node):
    """Make node's pillar fail to render (an included SLS with a Jinja error)."""
    node_sls = node.overrides_root / "site" / "nodes" / f"{node.node}.sls"
    pillar = yaml.safe_load(node_sls.read_text())
    node_sls.write_text(yaml.safe_dump(dict(pillar, include=["site.broken"])))
    (node.overrides_root / "site" / "broken.sls").write_text("broken: {{ no_such_thing.anywhere }}\n")


def test_orphan_removal_is_never_a_mass_deletion_by_accident(node1, storage):
    node1.apply()
    ids = {stack: c.id for stack, c in managed(node1.client).items()}
    assert set(ids) == NODE1_STACKS

    # ccc:containers: [] (a bad merge, a typo): refused, in test mode too.
    node1.write_pillar({"containers": []})
    preview, code = node1.apply("test=True", check=False)
    orphans = preview["ccc-containers-orphans"]
    assert orphans["result"] is False and not orphans["changes"]
    assert "refusing to remove 3 orphaned container(s) (ana-jupyter, ana-main, bor-main)" in orphans["comment"]
    assert "ccc_force_orphans" in orphans["comment"]
    results, code = node1.apply(check=False)
    assert code != 0 and results["ccc-containers-orphans"]["result"] is False
    assert {stack: c.id for stack, c in managed(node1.client).items()} == ids

    # A pillar that failed to render: refused even with the flag (force=True gets past Salt's check).
    break_pillar(node1)
    results, code = node1.apply("force=True", 'pillar={"ccc_force_orphans": true}', check=False)
    assert results["ccc-containers-orphans"]["result"] is False
    assert "render errors" in results["ccc-containers-orphans"]["comment"]
    assert {stack: c.id for stack, c in managed(node1.client).items()} == ids

    # The admin's explicit flag, with a pillar that renders.
    node1.write_pillar({"containers": []})
    results, code = node1.apply('pillar={"ccc_force_orphans": true}')
    assert code == 0
    assert results["ccc-containers-orphans"]["changes"] == {"removed": sorted(NODE1_STACKS)}
    assert managed(node1.client) == {}


def test_plans_and_diffs_never_show_tokens_or_passwords(node1, storage):
    containers = sample_ccc("node1")["containers"]
    ana = next(entry for entry in containers if entry["STACK_NAME"] == "ana-main")
    ana["EXTRA_ENVS"] = {"HF_TOKEN": "hf_first_token"}
    node1.write_pillar({"containers": containers})
    results, code = node1.apply()
    assert code == 0
    ana["EXTRA_ENVS"] = {"HF_TOKEN": "hf_second_token"}
    ana["FRP_PORTS"]["HTTP"][0]["pass"] = "new-secret-pw"
    node1.write_pillar({"containers": containers})

    preview, code = node1.apply("test=True")
    diff = preview["ccc-container-ana-main"]["changes"]["recreated"]
    assert diff["environment"]["HF_TOKEN"] == {"old": "***", "new": "***"}
    assert diff["labels"]["frp.6006.http.password"] == {"old": "***", "new": "***"}
    plan, _ = node1.salt_call("ccc_docker.plan", "ana-main")
    resolved, _ = node1.salt_call("ccc_containers.resolve", "ana-main")
    raw, _ = node1.salt_call("ccc_containers.resolve", "ana-main", "raw=True")
    assert plan["spec"]["environment"]["HF_TOKEN"] == "***" and plan["record"]["EXTRA_ENVS"] == {"HF_TOKEN": "***"}
    assert plan["spec"]["environment"]["USER_NAME"] == "ana"
    assert raw == plan  # the raw plan behind resolve is the module's plan, masked the same way
    # For people: reads like the .deploy report, user folders by their own path, never a pin.
    home = user_dir(storage, "ana.novak@example.org")
    assert resolved.startswith("container: ana-main (user ana.novak@example.org)\nnode: node1\n")
    assert "\nplacement: node1 (" in resolved and "\nimage: vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1\n" in resolved
    assert f"\n  - {home / 'ana-main'} -> /home/ana\n" in resolved and "-> /opt/apps (ro)" in resolved
    assert "6006: HTTP at subdomain node1-ana-tb" in resolved and "extra environment: HF_TOKEN (values hidden)" in resolved
    assert "/binds/" not in resolved
    results, code = node1.apply()
    assert code == 0 and results["ccc-container-ana-main"]["changes"]["recreated"]
    shown = json.dumps([results, preview, plan, resolved, raw])
    for secret in ("hf_first_token", "hf_second_token", "change-me", "new-secret-pw"):
        assert secret not in shown
    env = node1.client.api.inspect_container("ana-main")["Config"]["Env"]
    assert "HF_TOKEN=hf_second_token" in env  # the container itself gets the real value
