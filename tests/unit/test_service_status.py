"""`salt-run ccc.status` decisions: which services each role runs on a node (``ccc_role_services``),
how a unit's ``systemctl show`` or a container's inspect data reads to an admin
(``ccc_service_health``), the node side ``ccc_cluster.services`` (systemd faked: a recording
``systemctl`` on PATH, since the host has no systemd as PID 1; the Docker client is a stand-in
object answering ``inspect_container``), and the runner's summary and exit code."""

import os
import stat

import pytest
import yaml

import support.site  # noqa: F401  (puts _utils on the path)
from support.site import REPO
from support.scripts import load_module

import ccc_role_services  # noqa: E402
import ccc_service_health as health  # noqa: E402

RESTRICTED = {"subnet": "172.31.1.0/24", "restricted_access": ["10.99.0.0/24"]}


# --- the registry -----------------------------------------------------------------------------

def names(role, settings, ccc=None):
    return [(s["kind"], s["name"]) for s in ccc_role_services.services(role, settings, "node1", ccc)]


def test_docker_runs_the_engine_and_the_firewall_only_where_a_network_is_restricted():
    assert names("docker", {}) == [("unit", "docker.service")]
    ccc = {"cluster": {"networks": {"lab": {"subnet": "172.31.0.0/24"}, "students": RESTRICTED}}}
    assert names("docker", {}, ccc) == [("unit", "docker.service"), ("unit", "ccc-docker-firewall.service")]


def test_docker_lists_the_portainer_agent_container_when_switched_on():
    on = {"portainer_agent": {"enabled": True, "name": "portainer-agent"}}
    assert names("docker", on)[-1] == ("container", "portainer-agent")
    assert ("container", "portainer-agent") not in names("docker", {"portainer_agent": {"enabled": False}})


def defaults(role):
    return yaml.safe_load((REPO / "salt" / "cluster" / role / "defaults.yaml").read_text())[role]


def test_monitoring_follows_the_nodes_gpus_and_the_frp_client_role():
    settings = defaults("monitoring_agent")
    assert names("monitoring_agent", settings, {}) == [("unit", "prometheus-node-exporter.service")]
    gpu_node = {"node": {"compute_devices": {"gpu0": ["GPU-1"]}}, "roles": {"frp_client": True}}
    assert names("monitoring_agent", settings, gpu_node) == [
        ("unit", "prometheus-node-exporter.service"), ("unit", "ccc-gpu-exporter.service"),
        ("container", "ccc-metrics-forwarder")]


def test_patroller_fans_swarm_and_frpc_answer_from_their_own_modules():
    assert names("patroller", defaults("patroller")) == [("container", "claims")]
    webui = dict(defaults("patroller"), webui=dict(defaults("patroller")["webui"], enabled=True))
    assert names("patroller", webui) == [("container", "claims"), ("container", "patroller-webui")]
    assert names("superfan_gpu", {}) == [("unit", "ccc-fan-controller.service")]
    assert names("swarm", {}) == []
    frpc = {"networks": [{"network": "ccc-lab", "container_name": "frpc-lab"},
                         {"network": "ccc-student", "container_name": "frpc-student"}]}
    assert names("frp_client", frpc) == [("container", "frpc-lab"), ("container", "frpc-student")]


def test_host_roles_and_roles_without_services():
    assert names("fail2ban", {}) == [("unit", "fail2ban.service")]
    assert names("nvidia", {}) == [("unit", "nvidia-persistenced.service")]
    for role in ("inotify", "sshd_hostkeys", "timezone"):
        assert names(role, {}) == [] and not ccc_role_services.has_services(role)
    assert all(s["role"] == "docker" for s in ccc_role_services.services("docker", {}, "node1"))


# --- units ------------------------------------------------------------------------------------

@pytest.mark.parametrize("shown, expected", [
    ("LoadState=loaded\nActiveState=active\nSubState=running\nResult=success\nNRestarts=0", "ok"),
    ("LoadState=loaded\nActiveState=active\nSubState=exited\nResult=success\nNRestarts=0", "ok"),  # oneshot, RemainAfterExit
    ("LoadState=loaded\nActiveState=inactive\nSubState=dead\nResult=success\nNRestarts=0", "not running"),
    ("LoadState=loaded\nActiveState=activating\nSubState=auto-restart\nResult=exit-code\nNRestarts=12",
     "restarting (12 restarts)"),
    ("LoadState=loaded\nActiveState=failed\nSubState=failed\nResult=exit-code\nNRestarts=3", "failed (exit-code), 3 restarts"),
    ("LoadState=not-found\nActiveState=inactive\nSubState=dead\nResult=success\nNRestarts=0", "missing"),
    ("LoadState=masked\nActiveState=inactive\nSubState=dead", "unit masked"),
])
def test_unit_states_read_as_an_admin_acts_on_them(shown, expected):
    assert health.unit_state(health.parse_show(shown)) == expected


# --- containers -------------------------------------------------------------------------------

def attrs(restarts=0, role="docker", **state):
    return {"State": dict({"Running": True, "Status": "running", "ExitCode": 0}, **state), "RestartCount": restarts,
            "Config": {"Labels": {"ccc.cluster-role": role} if role else {}}}


@pytest.mark.parametrize("inspected, expected", [
    (None, "missing"),
    (attrs(), "ok"),
    (attrs(Health={"Status": "healthy", "Log": []}), "ok"),
    (attrs(Health={"Status": "unhealthy", "Log": [{"ExitCode": 1, "Output": "old"},
                                                  {"ExitCode": 1, "Output": "GET /\nconnection refused\n"}]}),
     "unhealthy: connection refused"),
    (attrs(Health={"Status": "unhealthy", "Log": [{"ExitCode": 7, "Output": ""}]}), "unhealthy: exit code 7"),
    (attrs(Health={"Status": "starting", "Log": []}), "starting (health check not passed yet)"),
    (attrs(12, Running=False, Restarting=True), "restarting (12 restarts)"),
    (attrs(Running=False, Status="exited", ExitCode=137), "not running (exited, exit code 137)"),
    (attrs(Running=False, Status="exited", ExitCode=137, OOMKilled=True), "not running (killed: out of memory)"),
])
def test_container_states_read_as_an_admin_acts_on_them(inspected, expected):
    assert health.container_state(inspected, "docker") == expected


@pytest.mark.parametrize("owner", [None, "patroller"])
def test_a_container_the_role_did_not_make_is_foreign_even_when_running(owner):
    state = health.container_state(attrs(role=owner), "docker")
    assert state == f"foreign: a container of that name not made by role docker (ccc.cluster-role={owner or '-'})"


def test_a_long_health_line_is_shortened():
    line = "x" * 500
    state = health.container_state(attrs(Health={"Status": "unhealthy", "Log": [{"Output": line}]}))
    assert state.startswith("unhealthy: xxx") and len(state) <= len("unhealthy: ") + health.HEALTH_LINE_LIMIT


# --- the runner's summary ---------------------------------------------------------------------

def test_problems_come_first_then_healthy_nodes_and_any_problem_sets_the_exit_code():
    returns = {
        "node1": {"ret": {"docker": {"docker.service": "ok", "container portainer-agent": "ok"}}, "retcode": 0},
        "node2": {"ret": {"docker": {"docker.service": "ok", "ccc-docker-firewall.service": "not running"},
                          "fail2ban": {"fail2ban.service": "ok"}}, "retcode": 0},
        "node3": {"ret": "'ccc_cluster.services' is not available.", "retcode": 254},
        "node5": {"failed": True},
        "node6": {"ret": "The minion function caused an exception: Traceback (most recent call last):\n"
                         "  File \"/x.py\", line 1, in services\nModuleNotFoundError: No module named 'x'\n",
                  "retcode": 1},
    }
    result = health.report(*health.sort_returns(returns, ["node1", "node2", "node3", "node4", "node5", "node6"]))
    assert result["health"] == [
        "node2: docker/ccc-docker-firewall.service: not running",
        "node3: could not tell: 'ccc_cluster.services' is not available.",
        "node6: could not tell: ModuleNotFoundError: No module named 'x'",
        "node4: did not answer",
        "node5: did not answer",
        "node1: ok (2 services)",
    ]
    assert result["not_answering"] == ["node4", "node5"]
    assert result["nodes"]["node2"]["fail2ban"] == {"fail2ban.service": "ok"}
    assert result["retcode"] == 1
    assert list(result) == sorted(result), "the outputter sorts keys: the summary ('health') must sort first"


def test_all_healthy_exits_zero():
    result = health.report(*health.sort_returns({"node1": {"ret": {"docker": {"docker.service": "ok"}}, "retcode": 0}},
                                                ["node1"]))
    assert result == {"health": ["node1: ok (1 service)"], "nodes": {"node1": {"docker": {"docker.service": "ok"}}},
                      "not_answering": [], "retcode": 0}


# --- the node side: ccc_cluster.services ------------------------------------------------------

FAKE_SYSTEMCTL = """#!/bin/sh
# FAKE systemctl (the host has no systemd as PID 1): records its arguments, answers from a file per unit.
echo "$*" >> "$CCC_FAKE_SYSTEMCTL/calls"
for last; do :; done
if [ -f "$CCC_FAKE_SYSTEMCTL/$last" ]; then cat "$CCC_FAKE_SYSTEMCTL/$last"; else
  printf 'LoadState=not-found\\nActiveState=inactive\\nSubState=dead\\nResult=success\\nNRestarts=0\\n'; fi
"""


class StandInDockerClient:
    """Answers ``api.inspect_container`` from a dict (ccc_engine.inspect's one call)."""

    def __init__(self, containers):
        self.api = self
        self.containers = containers

    def inspect_container(self, name):
        import docker.errors
        if name not in self.containers:
            raise docker.errors.NotFound(f"no such container: {name}")
        return self.containers[name]


@pytest.fixture
def fake_systemctl(tmp_path, monkeypatch):
    folder = tmp_path / "systemctl"
    folder.mkdir()
    script = tmp_path / "bin" / "systemctl"
    script.parent.mkdir()
    script.write_text(FAKE_SYSTEMCTL)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CCC_FAKE_SYSTEMCTL", str(folder))
    return folder


def defaults_file(url):
    """``cp.get_file_str`` of ``salt://cluster/<role>/defaults.yaml``: the role's defaults."""
    role = url.split("/")[3]
    return yaml.safe_dump({role: {"portainer_agent": {"enabled": False, "name": "portainer-agent"}}
                           if role == "docker" else {}})


def test_services_reports_each_role_this_node_applies(fake_systemctl, monkeypatch):
    (fake_systemctl / "docker.service").write_text("LoadState=loaded\nActiveState=active\nSubState=running\n")
    (fake_systemctl / "fail2ban.service").write_text(
        "LoadState=loaded\nActiveState=activating\nSubState=auto-restart\nResult=exit-code\nNRestarts=4\n")
    pillar = {"ccc": {"roles": {"fail2ban": True, "docker": True, "nvidia": False},
                      "cluster": {"networks": {"students": RESTRICTED}},
                      "docker": {"portainer_agent": {"enabled": True}}}}
    module = load_module("_modules/ccc_cluster.py", "ccc_cluster_services", pillar=pillar, grains={"id": "node1"},
                         context={}, salt={"cp.get_file_str": defaults_file})
    import ccc_engine
    monkeypatch.setattr(ccc_engine, "client", lambda node: StandInDockerClient(
        {"portainer-agent": attrs(Running=False, Status="exited", ExitCode=137)}))
    assert module.services() == {
        "fail2ban": {"fail2ban.service": "restarting (4 restarts)"},
        "docker": {"docker.service": "ok", "ccc-docker-firewall.service": "missing",
                   "container portainer-agent": "not running (exited, exit code 137)"},
    }
    calls = (fake_systemctl / "calls").read_text().splitlines()
    assert calls[0] == "show --property=LoadState,ActiveState,SubState,Result,NRestarts -- fail2ban.service"
