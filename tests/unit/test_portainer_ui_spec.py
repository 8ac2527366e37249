"""The Portainer server's container spec (``ccc_portainer.ui_spec``) from the docker role's
defaults: accepted by the generic role-container rules, no Docker API, and each bad setting named.
The container itself runs on a test dockerd: tests/integration/test_docker_portainer_ui.py."""

import pytest
import yaml

from support.site import REPO

import ccc_portainer  # noqa: E402  (support.site puts _utils on the path)
import ccc_service_containers  # noqa: E402

DEFAULTS = yaml.safe_load((REPO / "salt" / "cluster" / "docker" / "defaults.yaml").read_text())["docker"]["portainer_ui"]


def test_the_defaults_make_a_valid_spec_without_any_docker_api():
    spec = ccc_service_containers.normalize(ccc_portainer.ui_spec(DEFAULTS, has_secret=True))
    assert spec["image"] == "portainer/portainer-ce:2.21.4" and spec["docker_api"] is None
    assert spec["binds"] == [{"source": "/var/lib/portainer", "target": "/data", "read_only": False}]
    assert spec["ports"] == {"9000/tcp": ["127.0.0.1", 9000]} and spec["networks"] == []
    assert spec["secret_env"] == {"AGENT_SECRET": ["portainer", "agent_secret"]} and spec["secret_env_inline"]
    assert ccc_portainer.ui_spec(dict(DEFAULTS, frp_subdomain=None), has_secret=False)["labels"] == {}
    assert ccc_portainer.ui_spec(DEFAULTS, has_secret=False)["secret_env"] == {}


@pytest.mark.parametrize("key, value, message", [
    ("storage_path", "/", "storage_path must be an absolute folder other than /, got '/'"),
    ("storage_path", None, "storage_path must be an absolute folder other than /, got None"),
    ("publish_port", "9000", "publish_port must be a port number, got '9000'"),
    ("publish_port", 70000, "publish_port must be a port number, got 70000"),
    ("image", "", "image must be a non-empty string, got ''"),
    ("network", 5, "network must be a network name or null, got 5"),
    ("frp_subdomain", "", "frp_subdomain must be a subdomain or null, got ''"),
])
def test_each_bad_setting_is_named(key, value, message):
    with pytest.raises(ValueError, match=f"ccc:docker:portainer_ui:{message}".replace("(", r"\(").replace(")", r"\)")):
        ccc_portainer.ui_spec(dict(DEFAULTS, **{key: value}), has_secret=True)
