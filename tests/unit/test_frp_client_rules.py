"""The frp_client role's rules (``ccc_frp_client``): one frpc container per watched network with the
env CCC's frpc image expects, the token and the credentials that exist as secret env (never plain
env), docker.sock read-only, and mistakes in ``ccc:frp_client`` named."""

import re

import pytest

import support.site  # noqa: F401  (puts _utils on the path)
from support import role_files

import ccc_frp_client  # noqa: E402
import ccc_service_containers  # noqa: E402

SETTINGS = {"image": "lukacu/frpc:0.33", "server_address": "frp.example.org", "server_port": 7000, "log_level": "info",
            "log_dir": "/var/log/frpc", "env": {"FRPC_LOG_DAYS": 5},
            "networks": [{"network": "lab-unrestricted", "container_name": "frp-lab-client-service", "log_name": "lab.log"},
                         {"network": "student-restricted", "container_name": "frp-student-client-service"}]}
SCHEMA = role_files.schema("frp_client")
PRESENT = {("frp", "token"), ("basic_auth", "metrics", "user"), ("basic_auth", "metrics", "password")}


def specs(settings=SETTINGS, present=PRESENT):
    return ccc_frp_client.container_specs(settings, "node1", lambda path: tuple(path) in present)


def test_one_container_per_network_with_the_images_env():
    lab, student = specs()
    assert lab["name"] == "frp-lab-client-service" and lab["image"] == "lukacu/frpc:0.33" and lab["role"] == "frp_client"
    assert lab["env"] == {"FRPC_SERVER_ADDRESS": "frp.example.org", "FRPC_SERVER_PORT": "7000", "FRPC_PREFIX": "node1",
                          "FRPC_LOGFILE": "/var/log/frpc/lab.log", "FRPC_LOG_LEVEL": "info",
                          "FRPC_NETWORK": "lab-unrestricted", "FRPC_LOG_DAYS": "5"}
    assert lab["networks"] == [{"name": "lab-unrestricted", "aliases": []}]
    assert student["env"]["FRPC_LOGFILE"] == "/var/log/frpc/frp-student-client-service.log"
    assert lab["binds"] == [{"source": "/var/log/frpc", "target": "/var/log/frpc", "read_only": False}]
    assert lab["docker_api"] == "frpc"  # never docker.sock: its own allowlist proxy
    assert lab["restart"] == "always"
    ccc_service_containers.normalize(lab)  # a spec the generic state takes


def test_token_and_present_credentials_are_secret_env_never_env():
    lab = specs()[0]
    assert lab["secret_env"] == {"FRPC_AUTH_TOKEN": ["frp", "token"],
                                 "FRP_CCC_METRICS_USER": ["basic_auth", "metrics", "user"],
                                 "FRP_CCC_METRICS_PASSWORD": ["basic_auth", "metrics", "password"]}
    assert not [key for key in lab["env"] if "TOKEN" in key or "PASSWORD" in key]


def test_the_token_is_asked_for_even_when_missing_so_the_state_fails_clearly():
    assert specs(present=set())[0]["secret_env"] == {"FRPC_AUTH_TOKEN": ["frp", "token"]}


@pytest.mark.parametrize("change,message", [
    ({"server_address": ""}, "ccc:frp_client:server_address must be set"),
    ({"server_port": "70a"}, "ccc:frp_client:server_port must be a port number 1..65535, got '70a'"),
    ({"server_port": 70000}, "ccc:frp_client:server_port must be a port number 1..65535, got 70000"),
    ({"log_level": "loud"}, "ccc:frp_client:log_level must be one of trace, debug, info, warn, error"),
    ({"networks": [{"network": "lab"}]}, r"ccc:frp_client:networks\[0\]:container_name is required: a Docker name"),
    ({"networks": [{"network": "a", "container_name": "x"}, {"network": "b", "container_name": "x"}]},
     r"networks\[1\]: container_name x is used twice"),
    ({"networks": [{"network": "a", "container_name": "x", "log_name": "../etc/passwd"}]}, "log_name must be a plain file name"),
])
def test_mistakes_are_named(change, message):
    problems = ccc_frp_client.check(dict(SETTINGS, **change), SCHEMA)
    assert len(problems) == 1 and re.search(message, problems[0]), problems


def test_the_sample_settings_pass():
    assert ccc_frp_client.check(SETTINGS, SCHEMA) == []


def test_services_list_the_containers_for_status():
    assert ccc_frp_client.services(SETTINGS, "node1") == [
        {"kind": "container", "name": "frp-lab-client-service", "role": "frp_client"},
        {"kind": "container", "name": "frp-student-client-service", "role": "frp_client"}]
    assert ccc_frp_client.services({}, "node1") == []
