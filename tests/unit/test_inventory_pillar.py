"""The inventory pillar's mapping (``ccc_migrate_records``) on a real git repository holding the
files ccc-manager commits (``group_vars/ccc-cluster/{user-list,user-containers}.yml``), read at
each revision with ``ccc_inventory_git`` as the runner reads it, checked against the sample
site: what each commit serves, what a refused entry or a revision that does not load keeps, and
the report. The live path (schedule, external pillar, pillar watch, nodes) is
tests/cluster/test_inventory_repo.py."""

import subprocess

import ccc_inventory_git as git
import ccc_migrate_records as records
import pytest
import yaml
from support import site
from support.inventory_repo import BASE_CONTAINERS, BASE_USERS, CONTAINERS, FOLDER, USERS, Repo, manager_container


@pytest.fixture
def repo(tmp_path):
    return Repo(tmp_path / "ccc-inventory")


@pytest.fixture(scope="module")
def site_ccc():
    ccc = site.sample_ccc()
    return {key: value for key, value in ccc.items() if key not in ("users", "containers", "secrets")}


def load(repo, site_ccc, last_good=None):
    """What the runner does with the repository's HEAD: ``(revision, served, last_good, report)``."""
    revision = git.resolve(str(repo.path), "HEAD")
    texts = {path: git.read(str(repo.path), revision, path) for path in (USERS, CONTAINERS)}
    served, kept, report = records.map_revision(records.read_vars(texts), site_ccc, last_good or {}, revision)
    return revision, served, kept, report


def stacks(served):
    return {entry["STACK_NAME"]: entry for entry in served["containers"]}


def refused(report):
    """(file, entry) -> every reason it was refused for, one per line."""
    found = {}
    for entry in report.entries:
        if entry["status"] == "refused":
            found.setdefault((entry["source"], entry["key"]), []).append(entry["reason"])
    return {place: "\n".join(reasons) for place, reasons in found.items()}


def test_a_commit_like_ccc_managers_maps_users_and_containers_with_the_migrations_mapping(repo, site_ccc):
    repo.commit(BASE_USERS, BASE_CONTAINERS)
    revision, served, _, report = load(repo, site_ccc)
    assert set(served["users"]) == set(BASE_USERS)
    assert "USER_EMAIL" not in served["users"]["ana.novak@example.org"]  # the key is the e-mail
    assert list(stacks(served)) == ["ana-main", "bor-main"]
    assert stacks(served)["ana-main"]["EXTRA_ENVS"] == {"CONDA_PLUGINS_AUTO_ACCEPT_TOS": "yes"}
    assert stacks(served)["bor-main"]["FRP_PORTS"]["HTTP"][0]["subdomain"] == "bor"
    assert not refused(report)
    data = report.as_dict()
    assert data["summary"]["mapped"] == 4
    assert (USERS, "deployment_users[ana.novak@example.org].USER_EMAIL") in \
        {(e["source"], e["key"]) for e in data["entries"] if e["status"] == "changed"}
    assert len(revision) == 40


def test_a_new_user_and_container_a_changed_extra_envs_and_a_disabled_container_are_served(repo, site_ccc):
    repo.commit(BASE_USERS, BASE_CONTAINERS)
    _, _, kept, _ = load(repo, site_ccc)
    users = {**BASE_USERS, "cene.zupan@example.org": {"USER_FULLNAME": "Cene Zupan", "USER_NAME": "cene",
                                                       "USER_TYPE": "student"}}
    containers = [dict(BASE_CONTAINERS[0], EXTRA_ENVS={"CONDA_PLUGINS_AUTO_ACCEPT_TOS": "yes", "WANDB_MODE": "offline"}),
                  dict(BASE_CONTAINERS[1], DISABLED=True),
                  manager_container("cene-thesis", "cene.zupan@example.org", "cene")]
    second = repo.commit(users, containers)
    revision, served, kept, report = load(repo, site_ccc, kept)
    assert revision == second
    assert served["users"]["cene.zupan@example.org"]["USER_TYPE"] == "student"
    assert stacks(served)["ana-main"]["EXTRA_ENVS"]["WANDB_MODE"] == "offline"
    assert stacks(served)["bor-main"]["DISABLED"] is True
    assert "cene-thesis" in stacks(served)
    assert not refused(report)
    assert kept["containers"]["cene-thesis"]["revision"] == second


def test_a_refused_entry_keeps_its_last_good_version_and_the_rest_of_the_commit_applies(repo, site_ccc):
    first = repo.commit(BASE_USERS, BASE_CONTAINERS)
    _, _, kept, _ = load(repo, site_ccc)
    attack = dict(BASE_CONTAINERS[0], EXTRA_ENVS={"X": "{{ salt['cmd.run']('touch /tmp/pwned') }}"})
    wrong_type = dict(BASE_CONTAINERS[1], DEPLOYMENT_NODES="node1", USER_TYPE="no-such-type", SHM_SIZE="4GB")
    new_bad = manager_container("eve-new", "nobody@example.org", "eve")
    users = {**BASE_USERS, "ana.novak@example.org": dict(BASE_USERS["ana.novak@example.org"], USER_FULLNAME="Ana N.")}
    repo.commit(users, [attack, wrong_type, new_bad])
    _, served, kept, report = load(repo, site_ccc, kept)
    reasons = refused(report)
    assert "template syntax" in reasons[(CONTAINERS, "deployment_containers[ana-main]")]
    assert "EXTRA_ENVS.X" in reasons[(CONTAINERS, "deployment_containers[ana-main]")]
    assert "USER_TYPE 'no-such-type'" in reasons[(CONTAINERS, "deployment_containers[bor-main]")]
    assert "has no entry in ccc:users" in reasons[(CONTAINERS, "deployment_containers[eve-new]")]
    # nothing of the refused entries changed; the user's edit in the same commit applies
    assert stacks(served)["ana-main"] == stacks(load_first(repo, first, site_ccc))["ana-main"]
    assert stacks(served)["bor-main"]["SHM_SIZE"] == "2GB"
    assert "eve-new" not in stacks(served)
    assert served["users"]["ana.novak@example.org"]["USER_FULLNAME"] == "Ana N."
    notes = "\n".join(report.notes)
    assert f"deployment_containers[ana-main]: refused: its last good version (revision {first[:12]}) stays" in notes
    assert "deployment_containers[eve-new]: refused and never accepted before: not deployed" in notes
    assert "touch /tmp/pwned" not in str(report.as_dict())
    # the last good version survives a further commit that still holds the mistake
    repo.commit(users, [attack, wrong_type], message="ccc-manager: unrelated")
    _, served, _, _ = load(repo, site_ccc, kept)
    assert stacks(served)["ana-main"]["EXTRA_ENVS"] == {"CONDA_PLUGINS_AUTO_ACCEPT_TOS": "yes"}


def load_first(repo, revision, site_ccc):
    texts = {path: git.read(str(repo.path), revision, path) for path in (USERS, CONTAINERS)}
    return records.map_revision(records.read_vars(texts), site_ccc, {}, revision)[0]


def test_a_refused_user_keeps_its_last_good_record_and_its_containers(repo, site_ccc):
    repo.commit(BASE_USERS, BASE_CONTAINERS)
    _, _, kept, _ = load(repo, site_ccc)
    users = {**BASE_USERS, "bor.kralj@example.org": dict(BASE_USERS["bor.kralj@example.org"],
                                                         USER_FULLNAME="{% for x in y %}")}
    repo.commit(users, BASE_CONTAINERS)
    _, served, _, report = load(repo, site_ccc, kept)
    assert (USERS, "deployment_users[bor.kralj@example.org]") in refused(report)
    assert served["users"]["bor.kralj@example.org"]["USER_FULLNAME"] == "Bor Kralj"
    assert "bor-main" in stacks(served)


@pytest.mark.parametrize("raw, message", [
    ({CONTAINERS: "deployment_containers:\n  - STACK_NAME: [unclosed\n"}, "not valid YAML"),
    ({CONTAINERS: None}, "missing at this revision"),
    ({CONTAINERS: "deployment_containers: {ana-main: {}}\n"}, "deployment_containers must be a list"),
    ({CONTAINERS: "other_variable: 1\n"}, "deployment_containers is in none of"),
    ({USERS: "- just a list\n"}, "expected a mapping of variables"),
])
def test_a_revision_that_does_not_load_is_refused_as_a_whole(repo, site_ccc, raw, message):
    repo.commit(BASE_USERS, BASE_CONTAINERS)
    repo.commit(raw=raw)
    with pytest.raises(records.SourceError, match=message):
        load(repo, site_ccc)


def test_yaml_is_loaded_safely_and_other_variables_are_reported_not_mapped(repo, site_ccc):
    raw = {USERS: "deployment_users: !!python/object/apply:os.system ['touch /tmp/pwned']\n"}
    repo.commit(BASE_USERS, BASE_CONTAINERS)
    repo.commit(raw=raw)
    with pytest.raises(records.SourceError, match="not valid YAML"):
        load(repo, site_ccc)
    repo.commit(raw={USERS: yaml.safe_dump({"deployment_users": BASE_USERS, "deployment_types": {}})})
    _, _, _, report = load(repo, site_ccc)
    assert (USERS, "deployment_types") in {(e["source"], e["key"]) for e in report.entries if e["status"] == "not_mapped"}


def test_git_reads_a_revision_not_the_working_tree(repo):
    first = repo.commit(BASE_USERS, BASE_CONTAINERS)
    (repo.path / USERS).write_text("not committed: {")
    assert yaml.safe_load(git.read(str(repo.path), first, USERS))["deployment_users"] == BASE_USERS
    assert git.read(str(repo.path), first, f"{FOLDER}/absent.yml") is None
    with pytest.raises(git.GitError, match="names no commit"):
        git.resolve(str(repo.path), "no-such-branch")
    with pytest.raises(git.GitError, match="no such repository"):
        git.resolve(str(repo.path / "absent"), "HEAD")


def test_the_pillar_watch_watches_the_inventory_pillars_stored_result_and_no_other_external_pillar(tmp_path):
    import ccc_inventory_state
    import ccc_pillar_watch

    opts = {"pillar_roots": {"base": ["/srv/pillar"]}, "cachedir": str(tmp_path)}
    assert ccc_pillar_watch.watched_roots(opts) == ["/srv/pillar"]
    with_inventory = dict(opts, ext_pillar=[{"ccc_inventory": {}}])
    assert ccc_pillar_watch.watched_roots(with_inventory) == ["/srv/pillar", ccc_inventory_state.folder(str(tmp_path))]
    before = ccc_pillar_watch.tree_fingerprint(ccc_pillar_watch.watched_roots(with_inventory))
    assert ccc_inventory_state.write(str(tmp_path), {"revision": "a" * 40, "served": {}})
    assert not ccc_inventory_state.write(str(tmp_path), {"revision": "a" * 40, "served": {}})  # unchanged: untouched
    assert ccc_pillar_watch.tree_fingerprint(ccc_pillar_watch.watched_roots(with_inventory)) != before
    assert ccc_pillar_watch.watched_roots(dict(opts, ext_pillar=[{"ccc_inventory": {}}, {"cmd_yaml": "x"}])) is None


def test_a_repository_another_user_owns_is_not_read(repo):
    """Its config could name programs for root's git to run (fsmonitor, hooks): git's ownership
    check refuses it, and the runner reports that instead of serving anything from it."""
    repo.commit(BASE_USERS, BASE_CONTAINERS)
    subprocess.run(["chown", "-R", "12345:12345", str(repo.path)], check=True)
    with pytest.raises(git.GitError, match="dubious ownership"):
        git.resolve(str(repo.path), "HEAD")
