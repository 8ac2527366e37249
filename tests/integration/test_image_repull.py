"""The image re-pull policy (``ccc:cluster:image_policy:pull: always``, the original's
``compute_container_image_pull_always``) end to end: ``salt-call --local state.apply containers``
against sample-pillar/ on a real (private) test dockerd.

No registry can be reached from here (docker.io does not resolve), so every re-pull fails: that
is the "keep the node's copy" path, said in the state's comment. A new image behind the same tag
is what a successful pull leaves on the node; here a new local build is tagged with the sample
image's name instead, and the next apply must recreate exactly the containers of that tag, say
"image updated: <old> -> <new>" in their ``.deploy``, and leave everything alone after that."""

import pathlib

import pytest

from support.site import SaltNode

pytestmark = pytest.mark.docker

BASE = "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1"
ALWAYS = {"cluster": {"image_policy": {"pull": "always"}}}


def managed(client):
    return {c.labels["ccc.stack"]: c for c in client.containers.list(all=True, filters={"label": "ccc.managed-by=ccc-salt"})}


def changed_states(results):
    return {state_id for state_id, result in results.items() if result["changes"]}


def _new_build(client):
    """A new image (another id) from the tiny test image, tagged with the sample's base image name."""
    base = client.containers.create("ccc-test/tiny:1")
    try:
        image = base.commit(repository="ccc-test/repull", tag="2", changes=["LABEL ccc-test.build=2"])
    finally:
        base.remove(force=True)
    image.tag(*BASE.rsplit(":", 1))
    return image


def test_pull_always_recreates_only_the_containers_whose_image_changed(tmp_path, clean_node1, storage):
    client = clean_node1.client()
    salt = SaltNode(tmp_path / "salt", "node1", clean_node1.url, storage, extra_ccc=ALWAYS)
    first, code = salt.apply()
    assert code == 0, {k: v["comment"] for k, v in first.items() if v["result"] is False}
    comment = first["ccc-container-ana-main"]["comment"]
    assert f"image '{BASE}' could not be re-pulled (" in comment and "the copy on this node is used" in comment
    before = {stack: c.id for stack, c in managed(client).items()}
    old = client.images.get(BASE).id
    using_base = {stack for stack, c in managed(client).items() if c.attrs["Config"]["Image"] == BASE}
    assert {"ana-main", "bor-main"} <= using_base and using_base != set(before)

    again, _ = salt.apply()
    assert changed_states(again) == set()  # a failed re-pull keeps the node's copy: nothing recreated
    try:
        new = _new_build(client).id
        preview, _ = salt.apply("test=True")
        short = (old.removeprefix("sha256:")[:12], new.removeprefix("sha256:")[:12])
        assert preview["ccc-container-ana-main"]["changes"] == {"image_updated": {"old": short[0], "new": short[1]}}
        assert {stack: c.id for stack, c in managed(client).items()} == before

        updated, code = salt.apply()
        assert code == 0
        after = {stack: c for stack, c in managed(client).items()}
        assert changed_states(updated) == {f"ccc-container-{stack}" for stack in using_base}
        assert {stack for stack in after if after[stack].id != before[stack]} == using_base
        assert {after[stack].attrs["Image"] for stack in using_base} == {new}
        report = (pathlib.Path(storage) / "shared" / "user_data" / "ana.novak@example.org" / "container-settings" / "ana-main.deploy").read_text()
        assert f"result: recreated: image updated: {short[0]} -> {short[1]}" in report

        settled, _ = salt.apply()
        assert changed_states(settled) == set()

        # the default policy (missing) never recreates for a moved tag: the tag goes back, nothing happens
        client.images.get("ccc-test/tiny:1").tag(*BASE.rsplit(":", 1))
        salt.write_pillar({})
        default, _ = salt.apply()
        assert changed_states(default) == set()
        assert "re-pulled" not in default["ccc-container-ana-main"]["comment"]
        assert {stack: c.attrs["Image"] for stack, c in managed(client).items() if stack in using_base} == \
            {stack: new for stack in using_base}
    finally:
        client.images.get("ccc-test/tiny:1").tag(*BASE.rsplit(":", 1))


def test_a_bad_pull_policy_holds_the_containers_and_says_why(tmp_path, clean_node1, storage):
    salt = SaltNode(tmp_path / "salt", "node1", clean_node1.url, storage,
                    extra_ccc={"cluster": {"image_policy": {"pull": "sometimes"}}})
    results, code = salt.apply(check=False)
    assert code != 0
    assert "ccc:cluster:image_policy:pull must be missing, always or never (true/false), got 'sometimes'" in \
        results["ccc-container-ana-main"]["comment"]
    assert managed(clean_node1.client()) == {}
