"""The FRP label convention of role services (``ccc_frp``): what frpc's docker-gen reads, with
basic auth as ``{{ .Envs.NAME }}`` placeholders that frpc fills from its own secret env."""

import pytest

import support.site  # noqa: F401  (puts _utils on the path)

import ccc_frp  # noqa: E402


def test_a_metrics_service_gets_http_subdomain_location_and_placeholder_auth():
    labels = ccc_frp.service_labels(9100, "node1-metrics", "/", auth="metrics")
    assert labels == {
        "frp.enabled": "true",
        "frp.9100": "http",
        "frp.9100.http.subdomain": "node1-metrics",
        "frp.9100.http.locations": "/",
        "frp.9100.health_check": "false",
        "frp.9100.http.username": "{{ .Envs.FRP_CCC_METRICS_USER }}",
        "frp.9100.http.password": "{{ .Envs.FRP_CCC_METRICS_PASSWORD }}",
    }


def test_without_auth_or_location_no_such_labels_and_health_check_on():
    labels = ccc_frp.service_labels("8000", "patroller", health_check=True)
    assert labels["frp.8000.health_check"] == "true"
    assert not [key for key in labels if key.endswith(("username", "password", "locations"))]
    with pytest.raises(KeyError, match="unknown FRP basic-auth credential 'grafana'"):
        ccc_frp.service_labels(3000, "x", auth="grafana")


def test_frpc_gets_the_token_and_only_the_credentials_that_are_set():
    present = {("frp", "token"), ("basic_auth", "monitor", "user"), ("basic_auth", "monitor", "password"),
               ("basic_auth", "metrics", "user")}
    env = ccc_frp.frpc_secret_env(lambda path: tuple(path) in present)
    assert env == {"FRPC_AUTH_TOKEN": ["frp", "token"],
                   "FRP_CCC_MONITOR_USER": ["basic_auth", "monitor", "user"],
                   "FRP_CCC_MONITOR_PASSWORD": ["basic_auth", "monitor", "password"]}


@pytest.mark.parametrize("value,templated", [("{{ .Envs.FRPC_AUTH_TOKEN }}", True), ("a}}b", True), ("p{w", False), (7, False)])
def test_user_values_with_template_braces_are_spotted(value, templated):
    assert ccc_frp.has_template(value) is templated


def test_the_credentials_a_container_asks_for_are_read_from_its_labels():
    labels = {**ccc_frp.service_labels(9100, "node1-metrics", "/", auth="metrics"),
              **ccc_frp.service_labels(80, "node1-monitor", auth="monitor")}
    assert ccc_frp.credentials_used(labels) == ["metrics", "monitor"]
    assert ccc_frp.credentials_used(ccc_frp.service_labels(80, "portainer")) == []
