"""The cluster role rules (``ccc_roles``): which roles ``state.apply cluster`` applies, cleans or
skips on a node, from ``ccc:roles`` and ``ccc:only_roles``, in the documented order."""

import pytest

import support.site  # noqa: F401  (puts _utils on the path)

import ccc_roles  # noqa: E402


def test_defaults_apply_the_roles_that_are_on_by_default_in_order():
    plan = ccc_roles.select(None)
    assert plan["apply"] == ["fail2ban", "docker", "monitoring_agent", "inotify", "sshd_hostkeys", "timezone"]
    assert plan["clean"] == []
    off = "off by default (ccc:roles)"
    assert plan["skipped"] == {"mellanox": "runs only when ccc:only_roles names it", "netplan": off, "zfs": off,
                               "nvidia": off, "swarm": off, "frp_client": off, "cachefilesd": off,
                               "nfs_storage": off, "superfan_gpu": off, "patroller": off}


def test_a_node_switches_roles_on_off_and_absent():
    plan = ccc_roles.select({"nvidia": True, "fail2ban": False, "timezone": "absent"})
    assert plan["apply"] == ["nvidia", "docker", "monitoring_agent", "inotify", "sshd_hostkeys"]
    assert plan["clean"] == ["timezone"]
    assert plan["skipped"]["fail2ban"] == "off in ccc:roles"
    assert plan["skipped"]["patroller"] == "off by default (ccc:roles)"


@pytest.mark.parametrize("only", ["timezone,docker", " docker , timezone ", ["docker", "timezone"]])
def test_only_roles_limits_a_run_and_keeps_the_documented_order(only):
    plan = ccc_roles.select({}, only)
    assert plan["apply"] == ["docker", "timezone"]
    assert set(plan["skipped"]) == set(ccc_roles.ORDER) - {"docker", "timezone"}
    assert plan["skipped"]["fail2ban"] == "not in ccc:only_roles"


def test_only_roles_runs_a_role_that_is_off_by_default_but_never_one_a_node_switched_off():
    assert ccc_roles.select({}, "nvidia")["apply"] == ["nvidia"]
    plan = ccc_roles.select({"nvidia": False, "docker": "absent"}, "nvidia,docker")
    assert plan["apply"] == []
    assert plan["clean"] == ["docker"]
    assert plan["skipped"]["nvidia"] == "off in ccc:roles"


def test_the_originals_role_names_are_understood():
    assert ccc_roles.select({"sshd-hostkey": False}, "sshd-hostkey,timezone")["apply"] == ["timezone"]
    plan = ccc_roles.select({"frp-client": False}, "monitoring-agent,frp-client,superfan-gpu,docker-swarm")
    assert plan["apply"] == ["swarm", "superfan_gpu", "monitoring_agent"]
    assert plan["skipped"]["frp_client"] == "off in ccc:roles"


def test_the_agent_roles_keep_their_settings_under_the_agents_keys():
    assert ccc_roles.settings_key("superfan_gpu") == "fans"
    assert ccc_roles.settings_key("monitoring_agent") == "monitoring"
    assert ccc_roles.settings_key("patroller") == "patroller"


@pytest.mark.parametrize("roles, only, message", [
    ({"dockr": True}, None, "unknown role 'dockr'; the roles are: fail2ban, mellanox, netplan, zfs, nvidia, docker"),
    ({"docker": "yes"}, None, "ccc:roles:docker must be true, false or absent, got 'yes'"),
    (["docker"], None, "ccc:roles must be a mapping"),
    ({}, "docker,frp", "unknown role 'frp'"),
    ({}, "docker,monitoring", "unknown role 'monitoring'"),
    ({}, {"docker": True}, "ccc:only_roles must be a list or a comma-separated string"),
])
def test_bad_switches_are_refused_with_a_clear_message(roles, only, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ccc_roles.select(roles, only)


def test_an_empty_only_roles_does_not_limit():
    assert ccc_roles.select({}, "")["apply"] == ccc_roles.select({})["apply"]


def test_the_mellanox_driver_runs_only_when_only_roles_names_it():
    assert "mellanox" not in ccc_roles.select({"mellanox": True})["apply"]
    assert ccc_roles.select({"mellanox-driver": True}, "mellanox-driver,docker")["apply"] == ["mellanox", "docker"]
    assert ccc_roles.select({}, "mellanox")["apply"] == ["mellanox"]
    assert ccc_roles.select({"mellanox": False}, "mellanox")["apply"] == []
    assert ccc_roles.select({"mellanox": "absent"})["clean"] == ["mellanox"]


def test_the_originals_portainer_role_runs_the_docker_role_and_says_so():
    plan = ccc_roles.select({}, "portainer,timezone")
    assert plan["apply"] == ["docker", "timezone"]
    assert plan["notes"] == ["only_roles portainer runs the docker role: the Portainer agent and UI are part of "
                             "the docker role (ccc:docker:portainer_agent, ccc:docker:portainer_ui)"]
    assert ccc_roles.select({"docker": False}, "portainer")["apply"] == []


def test_the_originals_nightwatch_runs_nothing_and_says_what_replaces_it():
    plan = ccc_roles.select({}, "compute-container-nightwatch")
    assert plan["apply"] == []
    assert set(plan["skipped"]) == set(ccc_roles.ORDER)
    assert plan["notes"][0].startswith("only_roles compute-container-nightwatch runs nothing: the original's "
                                       "nightwatch is replaced by the settings beacon and the master's reactor")
    assert ccc_roles.select({}, "docker, compute-container-nightwatch")["apply"] == ["docker"]
    assert ccc_roles.select({})["notes"] == []


@pytest.mark.parametrize("name, message", [
    ("portainer", "'portainer' is no role of its own: the Portainer agent and UI are part of the docker role"),
    ("compute-container-nightwatch", "'compute-container-nightwatch' is no role here: the original's nightwatch"),
])
def test_ccc_roles_names_the_originals_names_with_what_they_became(name, message):
    with pytest.raises(ValueError, match=message):
        ccc_roles.select({name: True})
