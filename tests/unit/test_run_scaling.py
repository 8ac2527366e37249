"""A run over many containers does its shared work once (issue 21: a no-op apply of 500
containers cost more per container than one of 50). The pillar's per-run facts (the cluster's
nodes, the STACK_NAME index, the FRP subdomains in use, the mount table's children) are made once
and looked up per container, and every lookup answers exactly what the one-shot function
answers. No Docker: node facts are plain lambdas, the settings files do not exist."""

import os

import pytest

from support.site import deep_merge, sample_ccc, storage_overrides

import ccc_engine
import ccc_mountfd
import ccc_pillar
import ccc_plan
import ccc_resolver
import ccc_subdomains

ANA = "ana.novak@example.org"
IMAGE = "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1"


def many(count, root):
    """The sample site for node1, its storage under ``root``, with ``count`` more containers of
    Ana's, each with its own FRP subdomain."""
    ccc = deep_merge(sample_ccc("node1"), {"cluster": storage_overrides(root)})
    ccc["containers"] += [{"STACK_NAME": f"bulk-{index:03d}", "USER_EMAIL": ANA, "CONTAINER_IMAGE": IMAGE,
                           "FRP_PORTS": {"HTTP": [{"port": 8080, "subdomain": f"bulk-{index:03d}"}]}}
                          for index in range(count)]
    return ccc


def facts(ccc):
    return ccc_resolver.NodeFacts(
        "node1", compute_devices=ccc.get("node", {}).get("compute_devices"), docker_gid=998,
        host_timezone_files=["/etc/localtime"], image_lookup=lambda ref, credentials: ({"id": "sha256:x", "labels": {}}, None),
        github_keys=lambda login: ([], "no GitHub here"),
    )


def inputs_for(ccc):
    return ccc_plan.Inputs(ccc=ccc, cluster=ccc_pillar.cluster_settings(ccc), node=ccc_pillar.node_settings(ccc, "node1"),
                           facts=facts(ccc), stored={}, notices={})


def stacks_of(ccc):
    return [entry["STACK_NAME"] for entry in ccc["containers"]]


def records_built_per_container(count, root, monkeypatch):
    ccc = many(count, root)
    built = []
    real = ccc_pillar.merged_record
    monkeypatch.setattr(ccc_pillar, "merged_record", lambda users, entry: built.append(1) or real(users, entry))
    inputs = inputs_for(ccc)
    resolutions = [ccc_plan.plan(inputs, stack) for stack in stacks_of(ccc)]
    monkeypatch.setattr(ccc_pillar, "merged_record", real)
    assert [r["action"] for r in resolutions if r["stack"].startswith("bulk-")] == ["run"] * count
    return len(built) / len(stacks_of(ccc))


def test_planning_a_run_builds_each_containers_record_a_constant_number_of_times(tmp_path, monkeypatch):
    small = records_built_per_container(10, tmp_path / "small", monkeypatch)
    large = records_built_per_container(60, tmp_path / "large", monkeypatch)
    # A plan that asked every other container again (the run's square) built about one record
    # per container in the run for each container: 66 at 60, 16 at 10.
    assert large <= small + 0.5, (small, large)


def test_a_plan_with_the_runs_shared_facts_is_the_one_shot_resolution(tmp_path):
    ccc = many(12, tmp_path)
    ccc["containers"][-1]["FRP_PORTS"]["HTTP"][0]["subdomain"] = "bulk-000"  # a clash the admin made
    inputs = inputs_for(ccc)
    for stack in stacks_of(ccc):
        alone = ccc_resolver.resolve_container(ccc, stack, inputs.facts,
                                               taken=ccc_subdomains.taken_subdomains(ccc, {}, except_stack=stack))
        planned = ccc_plan.plan(inputs, stack)
        assert planned.pop("overlay", None) is None and planned.pop("storage_missing", []) == []  # no swarm, no NFS
        assert planned == alone, stack


def test_a_user_taking_a_subdomain_another_container_holds_is_refused_through_the_view(tmp_path):
    ccc = many(3, tmp_path)
    claims = ccc_subdomains.subdomain_claims(ccc, {})
    text = "bulk-001:\n  FRP_PORTS:\n    HTTP:\n      - {port: 80, subdomain: bulk-002}\n"
    result = ccc_resolver.resolve_container(ccc, "bulk-001", facts(ccc), settings_text=text,
                                            taken=ccc_subdomains.taken_except(claims, "bulk-001"))
    assert result["settings_status"] == "rejected"
    assert any("subdomain 'bulk-002' is already used by another container" in m for m in result["user_messages"])


def test_the_taken_view_answers_as_the_dict_it_replaces():
    claims = {"web": ["a", "b"], "api": ["a"], "node1-web": ["b"], "docs": ["c", "a"]}
    view = ccc_subdomains.taken_except(claims, "a")
    assert dict(view) == {"web": "b", "node1-web": "b", "docs": "c"}
    assert "api" not in view and "web" in view and "nowhere" not in view
    assert len(view) == 3 and sorted(view) == ["docs", "node1-web", "web"]
    assert dict(ccc_subdomains.taken_except(claims)) == {"web": "a", "api": "a", "node1-web": "b", "docs": "c"}
    assert ccc_subdomains.excluding(view, "a") is view  # already without a's names
    assert ccc_subdomains.excluding(view, "b") == {"docs": "c"}
    assert ccc_subdomains.excluding({"web": "b", "api": "a"}, "a") == {"web": "b"}
    assert ccc_subdomains.excluding(None, "a") == {}


def test_the_stack_index_finds_what_a_scan_found(tmp_path):
    ccc = many(2, tmp_path)
    ccc["containers"] += [{"STACK_NAME": "bulk-001", "USER_EMAIL": ANA}, {"STACK_NAME": ["not", "a", "name"]}, "junk"]
    index = ccc_pillar.entries_by_stack(ccc)
    for stack in ("bulk-000", "bulk-001", "ana-main", "nowhere", ["not", "a", "name"], None):
        assert ccc_pillar.container_record(ccc, stack, index=index) == ccc_pillar.container_record(ccc, stack)
    assert ccc_pillar.container_record(ccc, "bulk-001", index=index) == (
        None, ["STACK_NAME 'bulk-001' is defined more than once"])
    assert ccc_pillar.container_record(ccc, ["not", "a", "name"])[0] is None


def test_only_the_asked_keys_of_the_ccc_pillar_are_copied():
    pillar = {"ccc": {"cluster": {"networks": {"lab": {"subnet": "10.0.0.0/24"}}}, "node": {"name": "n1"},
                      "containers": [{"STACK_NAME": "x"}]}}
    part = ccc_pillar.pillar_ccc(pillar, keys=("cluster", "node", "swarm"))
    assert part == {"cluster": {"networks": {"lab": {"subnet": "10.0.0.0/24"}}}, "node": {"name": "n1"}}
    part["cluster"]["networks"]["lab"]["subnet"] = "changed"
    assert pillar["ccc"]["cluster"]["networks"]["lab"]["subnet"] == "10.0.0.0/24"  # a copy
    assert ccc_pillar.pillar_ccc(pillar) == pillar["ccc"]
    assert ccc_pillar.pillar_ccc({}, keys=("cluster",)) == {}


def test_each_mount_is_found_below_its_parent():
    mounts = ccc_mountfd.mountinfo()
    children = ccc_mountfd.children_of(mounts)
    assert sum(len(found) for found in children.values()) == len(mounts)
    for record in mounts:
        assert record in children[record.parent]
    root = next(record for record in mounts if record.point == "/")
    assert all(child.parent == root.id for child in children.get(root.id, []))


@pytest.mark.parametrize("url, trusted", [("unix:///var/run/docker.sock", False), ("tcp://10.0.0.5:2375", True)])
def test_a_local_engine_is_asked_without_looking_up_proxies(url, trusted, monkeypatch):
    monkeypatch.setitem(os.environ, "HTTP_PROXY", "http://proxy.example.org:3128")
    made = ccc_engine.client({"docker_url": url, "state_dir": "/nonexistent"})
    try:
        assert made.api.trust_env is trusted
    finally:
        made.close()
