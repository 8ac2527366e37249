"""``salt-run ccc_inventory.refresh``/``report`` and the ``ccc_inventory`` external pillar, loaded by
Salt's own loaders with the master config ``scripts/master_config.py --inventory-repo`` writes
(the sample site as the site pillar, its secrets decrypted with the DEMO key), on a git
repository: what a compiled pillar holds after each commit, and what the report says. No master
daemon and no nodes: tests/cluster/test_inventory_repo.py is the live path."""

import master_config
import pytest
import salt.config
import salt.loader
import salt.pillar
import yaml
from support import secrets, site
from support.inventory_repo import BASE_CONTAINERS, BASE_USERS, CONTAINERS, Repo


@pytest.fixture
def master(tmp_path):
    """``(runners, opts, repo)`` of a master configured for the inventory repository."""
    keydir = secrets.demo_keyring(tmp_path / "gpgkeys")
    repo = Repo(tmp_path / "ccc-inventory")
    opts = salt.config.master_config("/dev/null")
    opts.update(master_config.master_config(site.REPO, gpg_keydir=keydir, inventory={"repo": str(repo.path)}))
    opts.update(cachedir=str(tmp_path / "cache"), pki_dir=str(tmp_path / "pki"), sock_dir=str(tmp_path / "sock"),
                id="ccc-master")
    (tmp_path / "cache").mkdir()
    yield salt.loader.runner(opts, utils=salt.loader.utils(opts)), opts, repo
    secrets.stop_agent(keydir)


def compiled(opts, minion="node1"):
    pillar = salt.pillar.get_pillar(opts, {"id": minion}, minion, saltenv="base").compile_pillar()
    assert not pillar.get("_errors"), pillar.get("_errors")
    return pillar["ccc"]


def test_the_runner_serves_each_loaded_revision_and_keeps_it_while_a_later_one_does_not_load(master):
    runners, opts, repo = master
    sample = [entry["STACK_NAME"] for entry in site.sample_ccc()["containers"]]
    assert runners["ccc_inventory.refresh"]()["loaded"] is False  # no repository yet: the site alone
    assert "no commit" in runners["ccc_inventory.report"]()["problem"] or \
        "does not have any commits" in runners["ccc_inventory.report"]()["problem"]
    assert [entry["STACK_NAME"] for entry in compiled(opts)["containers"]] == sample

    first = repo.commit(BASE_USERS, BASE_CONTAINERS)
    assert runners["ccc_inventory.refresh"]() == {"configured": True, "revision": first, "loaded": True,
                                                  "served_revision": first, "changed": True}
    assert runners["ccc_inventory.refresh"]()["changed"] is False  # same revision: nothing read again
    ccc = compiled(opts)
    assert [entry["STACK_NAME"] for entry in ccc["containers"]] == ["ana-main", "bor-main"]
    assert ccc["containers"][0]["EXTRA_ENVS"] == {"CONDA_PLUGINS_AUTO_ACCEPT_TOS": "yes"}
    assert ccc["cluster"]["mount_points"] and ccc["user_types"]  # the site's settings are still there

    broken = repo.commit(raw={CONTAINERS: "deployment_containers: [\n"})
    assert runners["ccc_inventory.refresh"]()["loaded"] is False
    shown = runners["ccc_inventory.report"]()
    assert shown["revision"] == broken and shown["served_revision"] == first
    assert "not valid YAML" in shown["problem"] and f"revision {first[:12]} stays in use" in shown["problem"]
    assert [entry["STACK_NAME"] for entry in compiled(opts)["containers"]] == ["ana-main", "bor-main"]


def test_the_report_names_a_refused_entry_and_the_version_that_stays(master):
    runners, opts, repo = master
    first = repo.commit(BASE_USERS, BASE_CONTAINERS)
    runners["ccc_inventory.refresh"]()
    attacked = [dict(BASE_CONTAINERS[0], SHM_SIZE="4g", EXTRA_ENVS={"X": "{{ 7 * 7 }}"}), BASE_CONTAINERS[1]]
    second = repo.commit(containers=attacked)
    runners["ccc_inventory.refresh"]()
    shown = runners["ccc_inventory.report"]()
    assert shown["revision"] == second and shown["loaded"] is True and shown["summary"]["refused"] == 1
    refused = [entry for entry in shown["entries"] if entry["status"] == "refused"]
    assert refused[0]["key"] == "deployment_containers[ana-main]" and "EXTRA_ENVS.X" in refused[0]["reason"]
    assert f"deployment_containers[ana-main]: refused: its last good version (revision {first[:12]}) stays" \
        in shown["notes"]
    assert "7 * 7" not in yaml.safe_dump(shown)
    ana = next(entry for entry in compiled(opts)["containers"] if entry["STACK_NAME"] == "ana-main")
    assert ana["SHM_SIZE"] == "2GB" and ana["EXTRA_ENVS"] == {"CONDA_PLUGINS_AUTO_ACCEPT_TOS": "yes"}
    assert "differences" not in shown and runners["ccc_inventory.report"](full=True)["differences"]


def test_with_fetch_the_runner_reads_what_ccc_manager_pushed_to_the_labs_server(tmp_path):
    """The usual setup: ccc-manager pushes to the lab's git server; the master's clone fetches
    ``origin`` before each read and reads ``origin/main``."""
    keydir = secrets.demo_keyring(tmp_path / "gpgkeys")
    manager = Repo(tmp_path / "manager")  # ccc-manager's clone
    server = tmp_path / "server.git"
    manager.git("init", "-q", "--bare", str(server))
    manager.git("remote", "add", "origin", str(server))
    manager.commit(BASE_USERS, BASE_CONTAINERS)
    manager.git("push", "-q", "origin", "main")
    clone = tmp_path / "master-clone"
    manager.git("clone", "-q", str(server), str(clone))
    opts = salt.config.master_config("/dev/null")
    inventory = {"repo": str(clone), "fetch": "origin", "rev": "origin/main"}
    opts.update(master_config.master_config(site.REPO, gpg_keydir=keydir, inventory=inventory))
    opts.update(cachedir=str(tmp_path / "cache"), pki_dir=str(tmp_path / "pki"), id="ccc-master")
    runners = salt.loader.runner(opts, utils=salt.loader.utils(opts))
    try:
        assert runners["ccc_inventory.refresh"]()["loaded"] is True
        added = [*BASE_CONTAINERS, dict(BASE_CONTAINERS[1], STACK_NAME="bor-second", FRP_PORTS={"TCP": [22]})]
        pushed = manager.commit(containers=added, message="ccc-manager: add bor-second")
        manager.git("push", "-q", "origin", "main")
        assert runners["ccc_inventory.refresh"]()["revision"] == pushed
        assert "bor-second" in [entry["STACK_NAME"] for entry in compiled(opts)["containers"]]
    finally:
        secrets.stop_agent(keydir)
