"""A lab that keeps its inventory repository as the source of truth (ccc_inventory): commits
shaped like ccc-manager's (it rewrites group_vars/ccc-cluster/{user-list,user-containers}.yml
and commits) reach the nodes by themselves, through the master's schedule (ccc_inventory.refresh)
and pillar watch: a new user and container, a changed EXTRA_ENVS, a disabled container. A commit
the mapping refuses (template syntax in one container; YAML that does not parse) changes nothing
on the nodes or in the compiled pillar, and ``salt-run ccc_inventory.report`` names it."""

import fcntl
import pathlib
import shutil
import subprocess
import time

import ccc_inventory_state
import pytest
import yaml
from support import site

from .conftest import managed_stacks
from .test_pillar_watch import _container_ids
from .test_redeploy import container_attrs, wait_for

pytestmark = pytest.mark.docker

FOLDER = "group_vars/ccc-cluster"
USERS, CONTAINERS = f"{FOLDER}/user-list.yml", f"{FOLDER}/user-containers.yml"
# the refresh's and the watch's intervals (scripts/master_config.py) + refresh + one full apply
REACH_TIMEOUT = 120
IMAGE = "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1"
EVA = "eva.horvat@example.org"
MARKER = "/tmp/ccc-inventory-template-ran"


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=ccc-manager", "-c", "user.email=manager@example.org",
                           *args], check=True, capture_output=True, text=True).stdout.strip()


def commit(repo, texts, message):
    """Write the files and commit them, as ccc-manager does; the commit id."""
    for relative, text in texts.items():
        path = repo / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def files(users, containers):
    return {USERS: yaml.safe_dump({"deployment_users": users}, sort_keys=False),
            CONTAINERS: yaml.safe_dump({"deployment_containers": containers}, sort_keys=False)}


def report(master):
    return master.salt_run_cli(timeout=60).run("ccc_inventory.report").data or {}


def served_ccc(master, node="node1"):
    ccc = (master.salt_run_cli(timeout=60).run("pillar.show_pillar", node).data or {}).get("ccc") or {}
    return {"users": ccc.get("users"), "containers": ccc.get("containers")}


def settled(master):
    """No redeploy or reconcile pending or in flight on the master (``ccc.redeploy_status``)."""
    record = master.salt_run_cli(timeout=60).run("ccc.redeploy_status").data or {}
    entries = [*(record.get("stacks") or {}).values(), *(record.get("nodes") or {}).values()]
    return not any(entry.get("pending") or entry.get("jid") for entry in entries)


def env_of(daemon, name):
    attrs = container_attrs(daemon, name)
    return set(attrs["Config"]["Env"]) if attrs and attrs["State"]["Running"] else None


def test_commits_like_ccc_managers_reach_the_nodes_and_a_refused_commit_changes_nothing(
        master, minions, dockerds, inventory_repo):
    node1, node2 = dockerds["node1"], dockerds["node2"]
    users = yaml.safe_load((site.SAMPLE_SITE / "users.sls").read_text())["ccc"]["users"]
    containers = yaml.safe_load((site.SAMPLE_SITE / "containers.sls").read_text())["ccc"]["containers"]
    inventory_repo.mkdir()
    git(inventory_repo, "init", "-q", "-b", "main")
    try:
        # The lab's inventory as the site pillar has it: served, nothing on the nodes changes.
        base = commit(inventory_repo, files(users, containers), "inventory as migrated")
        assert wait_for(lambda: report(master).get("revision") == base, timeout=REACH_TIMEOUT, interval=1)
        assert report(master)["loaded"] is True and report(master)["summary"]["refused"] == 0

        # ccc-manager: a new user and container, a changed EXTRA_ENVS, a disabled container.
        new_users = {**users, EVA: {"USER_EMAIL": EVA, "USER_FULLNAME": "Eva Horvat", "USER_NAME": "eva",
                                    "USER_TYPE": "researcher"}}
        edited = [dict(entry) for entry in containers]
        by_stack = {entry["STACK_NAME"]: entry for entry in edited}
        by_stack["ana-main"]["EXTRA_ENVS"] = {"WANDB_MODE": "offline"}
        by_stack["bor-main"]["DISABLED"] = True
        edited.append({"STACK_NAME": "eva-main", "USER_EMAIL": EVA, "CONTAINER_IMAGE": IMAGE, "SHM_SIZE": "2GB",
                       "FRP_PORTS": {"TCP": [22], "HTTP": [{"port": 6006, "subdomain": "eva", "pass": "eva-tb-pass"}]},
                       "EXTRA_ENVS": {"CONDA_PLUGINS_AUTO_ACCEPT_TOS": "yes"}, "INSTALL_PACKAGES": "htop"})
        second = commit(inventory_repo, files(new_users, edited), "ccc-manager: add eva-main, disable bor-main")
        committed = time.monotonic()
        assert wait_for(lambda: "CONDA_PLUGINS_AUTO_ACCEPT_TOS=yes" in (env_of(node1, "eva-main") or ()),
                        timeout=REACH_TIMEOUT, interval=0.5), \
            f"a new container committed to the inventory did not reach node1: {report(master)}"
        print(f"ccc-manager commit -> new container running on node1: {time.monotonic() - committed:.1f} s")
        assert wait_for(lambda: "WANDB_MODE=offline" in (env_of(node1, "ana-main") or ()),
                        timeout=REACH_TIMEOUT, interval=0.5), "the changed EXTRA_ENVS did not reach ana-main"
        assert wait_for(lambda: "bor-main" not in managed_stacks(node1) | managed_stacks(node2),
                        timeout=REACH_TIMEOUT, interval=0.5), "the disabled container still runs"
        print(f"ccc-manager commit -> all three changes on the nodes: {time.monotonic() - committed:.1f} s")
        assert report(master)["revision"] == second

        # A commit the mapping refuses: template syntax in one container (with another change to
        # it), then YAML that does not parse. Nothing changes; the report names both.
        assert wait_for(lambda: settled(master), timeout=REACH_TIMEOUT, interval=1)  # the commit's redeploys are over
        before_ids = wait_for(lambda: _container_ids(dockerds), interval=0.5)
        before_pillar = served_ccc(master)
        attacked = [dict(entry) for entry in edited]
        for entry in attacked:
            if entry["STACK_NAME"] == "ana-main":
                entry.update(SHM_SIZE="4g", EXTRA_ENVS={"WANDB_MODE": f"{{{{ salt['cmd.run']('touch {MARKER}') }}}}"})
        refused = commit(inventory_repo, files(new_users, attacked), "ccc-manager: edit ana-main")
        assert wait_for(lambda: report(master).get("revision") == refused, timeout=REACH_TIMEOUT, interval=1)
        shown = report(master)
        assert shown["loaded"] is True
        reasons = [e["reason"] for e in shown["entries"]
                   if e["status"] == "refused" and e["key"] == "deployment_containers[ana-main]"]
        assert reasons and "template syntax" in reasons[0], shown
        assert any(f"revision {second[:12]}) stays" in note for note in shown["notes"]), shown["notes"]
        broken = commit(inventory_repo, {CONTAINERS: "deployment_containers:\n  - STACK_NAME: [unclosed\n"},
                        "ccc-manager: broken")
        assert wait_for(lambda: report(master).get("revision") == broken, timeout=REACH_TIMEOUT, interval=1)
        shown = report(master)
        assert shown["loaded"] is False and shown["served_revision"] == refused
        assert "not valid YAML" in shown["problem"] and "stays in use" in shown["problem"]
        # the watch compiles the pillar now and finds nothing to bring to the nodes
        watched = master.salt_run_cli(timeout=120).run("ccc.pillar_watch", "force=True").data
        assert watched["refreshed"] == [], watched
        assert served_ccc(master) == before_pillar
        assert wait_for(lambda: _container_ids(dockerds), interval=0.5) == before_ids
        assert "WANDB_MODE=offline" in env_of(node1, "ana-main")
        assert not pathlib.Path(MARKER).exists()
    finally:
        # Back to the site pillar alone for the package's other tests: with the refresh held off
        # (its lock), the repository and what it served go; the nodes return to the sample site.
        cachedir = master.config["cachedir"]
        folder = pathlib.Path(ccc_inventory_state.folder(cachedir))
        folder.mkdir(mode=0o700, exist_ok=True)
        with open(folder / ".lock", "a", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            shutil.rmtree(inventory_repo, ignore_errors=True)
            (folder / ccc_inventory_state.STATE).unlink(missing_ok=True)
    assert wait_for(lambda: "bor-main" in managed_stacks(node1) and "eva-main" not in managed_stacks(node1),
                    timeout=REACH_TIMEOUT, interval=0.5), "the nodes did not return to the site pillar"
