"""`state.apply cluster test=True` for every sample node, masterless on this machine (nothing is
applied; the node's Docker engine is a private test dockerd): every role of the node renders and nothing fails, the roles come in the documented
order, and ``ccc:roles``/``ccc:only_roles`` decide which run, as ``ccc_cluster.roles`` says."""

import pytest

from support import site

pytestmark = pytest.mark.docker

NODES = ("node1", "node2", "node3")
ORDER = ["fail2ban", "nvidia", "docker", "inotify", "sshd_hostkeys", "timezone"]


def _run(tmp_path, docker_url, node, extra=None, *args):
    # Every node's run talks to the same test dockerd: node1's network definitions for all.
    extra = site.deep_merge({"cluster": {"networks": site.network_overrides("node1")}}, extra or {})
    salt_node = site.SaltNode(tmp_path / "work", node, docker_url, tmp_path / "storage", extra_ccc=extra)
    output, _ = salt_node.salt_call("state.apply", "cluster", "test=True", *args, check=False)
    assert isinstance(output, dict), output
    return sorted(output.values(), key=lambda state: state["__run_num__"])


def _roles(states):
    seen = []
    for state in states:
        sls = state.get("__sls__") or ""
        role = sls.split(".")[1] if sls.startswith("cluster.") else None
        if role and role not in seen:
            seen.append(role)
    return seen


@pytest.mark.parametrize("node", NODES)
def test_every_sample_node_renders_every_role_in_order_and_nothing_fails(tmp_path, node1_dockerd, node):
    states = _run(tmp_path, node1_dockerd.url, node)
    assert [f"{s['__id__']}: {s['comment']}" for s in states if s["result"] is False] == []
    assert _roles(states) == ORDER  # the sample switches the driver role on for its GPU nodes
    assert states[-1]["__id__"] == "ccc-cluster-roles-summary"
    assert states[-1]["name"].startswith(f"cluster roles applied: {', '.join(ORDER)}; cleaned: none")


def test_only_roles_and_an_absent_role_on_the_command_line(tmp_path, node1_dockerd):
    states = _run(tmp_path, node1_dockerd.url, "node1", {"roles": {"timezone": "absent"}, "only_roles": "inotify,timezone"})
    assert _roles(states) == ["inotify", "timezone"]
    assert [s["__sls__"] for s in states if s["__id__"].startswith("ccc-cluster-timezone")] == ["cluster.timezone.clean"] * \
        len([s for s in states if s["__id__"].startswith("ccc-cluster-timezone")])
    assert states[-1]["name"] == "cluster roles applied: inotify; cleaned: timezone; skipped: 4"


def test_an_unknown_role_fails_the_run_and_names_the_roles(tmp_path):
    salt_node = site.SaltNode(tmp_path / "work", "node1", "unix:///nonexistent.sock", tmp_path / "storage",
                              extra_ccc={"only_roles": "docker,frp"})
    output, returncode = salt_node.salt_call("state.apply", "cluster", "test=True", check=False)
    assert returncode != 0
    text = "\n".join(output) if isinstance(output, list) else str(output)
    assert "unknown role 'frp'; the roles are: fail2ban, nvidia, docker, inotify, sshd_hostkeys, timezone" in text
