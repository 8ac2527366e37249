"""The original's Portainer UI, image re-pull and cachefilesd_state settings carried to the keys
ccc-salt has for them (``ccc_migrate.cluster.map_var``), and the re-pull default of the original
(compute_container_image_pull_always unset meant true) kept by the whole migration."""

import support.site  # noqa: F401  (puts _utils on the path)

from ccc_migrate import cluster as migrate_cluster  # noqa: E402  (support.site puts the checkout on the path)
import ccc_migrate_report  # noqa: E402


def _map(variables):
    tree, report = {}, ccc_migrate_report.Report()
    for key, value in variables.items():
        assert migrate_cluster.map_var(key, value, tree, report, "cluster-vars.yml") is True, key
    return tree, report


def test_the_portainer_ui_settings_become_ccc_docker_portainer_ui():
    tree, _ = _map({"portainer_ui": True, "portainer_ui_name": "portainer-web-ui",
                    "portainer_ui_image": "portainer/portainer-ce:2.21.4", "portainer_ui_storage_path": "/data/portainer",
                    "portainer_ui_publish_ip": "10.0.0.10", "portainer_ui_publish_port": 9000,
                    "portainer_ui_network": "bridge"})
    assert tree["docker"]["portainer_ui"] == {
        "enabled": True, "name": "portainer-web-ui", "image": "portainer/portainer-ce:2.21.4",
        "storage_path": "/data/portainer", "publish_ip": "10.0.0.10", "publish_port": 9000, "network": None}
    assert _map({"portainer_ui_network": "tools"})[0]["docker"]["portainer_ui"]["network"] == "tools"


def test_pull_always_becomes_the_image_policy_and_cachefilesd_state_the_roles_state():
    assert _map({"compute_container_image_pull_always": True})[0]["cluster"]["image_policy"] == {"pull": "always"}
    assert _map({"compute_container_image_pull_always": False})[0]["cluster"]["image_policy"] == {"pull": "missing"}
    stopped, _ = _map({"cachefilesd_state": "stopped"})
    assert stopped == {"roles": {"cachefilesd": True}, "cachefilesd": {"state": "stopped"}}
    assert _map({"cachefilesd_state": "started"})[0]["cachefilesd"] == {"state": "started"}
