"""The patroller role renders for a sample node (masterless salt-call against sample-pillar/,
nothing applied; the Docker endpoint is a socket that does not exist): the claims container with
the node's GPUs and ``<node>-monitor`` labels, the web UI's folder, files and container where it
is enabled, a node without device groups told it gets no GPU, wrong settings stopping the role,
the role's switch, and ``clean`` removing both containers (never the web UI's folder)."""

import json

import pytest

from support.site import SaltNode

DEAD = "unix:///nonexistent/ccc-patroller-role.sock"
NODE1_GPUS = ["GPU-5f1c2a64-8a1e-4b7e-9d1e-0c0a11110001", "GPU-5f1c2a64-8a1e-4b7e-9d1e-0c0a11110002",
              "GPU-5f1c2a64-8a1e-4b7e-9d1e-0c0a11110003"]


def args(rendered, state_id):
    return {k: v for item in next(iter(v for k, v in rendered[state_id].items() if not k.startswith("__")))
            if isinstance(item, dict) for k, v in item.items()}


def show(salt, sls="cluster.patroller"):
    rendered, code = salt.salt_call("state.show_sls", sls, check=False)
    assert code == 0 and isinstance(rendered, dict), rendered
    return rendered


@pytest.fixture(scope="module")
def salt(tmp_path_factory):
    path = tmp_path_factory.mktemp("patroller-render")
    return SaltNode(path, "node1", DEAD, path / "storage")


def test_node1_runs_the_claims_container_with_its_gpus(salt):
    salt.write_pillar({})
    rendered = show(salt)
    assert sorted(rendered) == ["ccc-cluster-patroller-claims-container", "ccc-cluster-patroller-gpus",
                                "ccc-cluster-patroller-haproxy", "ccc-cluster-patroller-webui-container"]
    assert args(rendered, "ccc-cluster-patroller-gpus")["name"] == (
        "Patroller watches 3 GPU(s) of device groups device_lab, device_student: " + ", ".join(NODE1_GPUS))
    spec = args(rendered, "ccc-cluster-patroller-claims-container")["spec"]
    assert spec["image"] == "registry.example.org/vicos/patroller:latest"
    assert spec["device_requests"] == [{"driver": "nvidia", "device_ids": NODE1_GPUS, "count": 0, "capabilities": [["gpu"]]}]
    assert spec["labels"]["frp.80.http.subdomain"] == "node1-monitor"
    assert spec["networks"] == [{"name": "claims", "aliases": ["reservation"]},
                                {"name": "lab-unrestricted", "aliases": []}]
    assert "absent" in rendered["ccc-cluster-patroller-webui-container"]["ccc_service_container"]
    assert spec["labels"]["frp.80.http.password"] == "{{ .Envs.FRP_CCC_MONITOR_PASSWORD }}"
    password, _ = salt.salt_call("pillar.get", "ccc:secrets:basic_auth:monitor:password")
    assert password and "PGP" not in password and password not in json.dumps(rendered)  # the placeholder, never the credential


def test_webui_on_a_node_without_device_groups(salt):
    # without an FRP client on the node (the sample's secrets lack the web UI's credential)
    salt.write_pillar({"roles": {"frp_client": False}, "node": {"compute_devices": None}, "patroller": {"webui": {
        "enabled": True, "image": "registry.example.org/patroller-webui:1", "storage_path": "/srv/claims-ui",
        "config": {"title": "GPU claims"}}}})
    rendered = show(salt)
    assert args(rendered, "ccc-cluster-patroller-gpus")["name"].startswith("Patroller gets no GPU")
    assert args(rendered, "ccc-cluster-patroller-claims-container")["spec"]["device_requests"] == []
    assert args(rendered, "ccc-cluster-patroller-webui-occupancy-data")["replace"] is False
    assert args(rendered, "ccc-cluster-patroller-webui-occupancy-data")["name"] == "/srv/claims-ui/occupancy_data.parquet"
    assert json.loads(args(rendered, "ccc-cluster-patroller-webui-config")["contents"]) == {"title": "GPU claims"}
    webui = args(rendered, "ccc-cluster-patroller-webui-container")["spec"]
    assert webui["labels"]["frp.80.http.subdomain"] == "patroller"
    assert webui["binds"][1] == {"source": "/srv/claims-ui/web-ui.json", "target": "/etc/patroller/web-ui.json",
                                 "read_only": True}


def test_wrong_settings_stop_the_role_with_one_message(salt):
    salt.write_pillar({"patroller": {"proxy_network": None, "lease": "soon"}})
    output, code = salt.salt_call("state.apply", "cluster.patroller", "test=True", check=False)
    assert code != 0
    (only,) = output.values()
    assert only["__id__"] == "ccc-cluster-patroller-settings" and only["result"] is False
    assert only["comment"] == (
        "ccc:patroller is not valid, nothing changed: ccc:patroller:proxy_network is required: the frpc-watched "
        "network <node>-monitor is published from (while the role is on); ccc:patroller:lease must be a whole "
        "number of seconds >= 1, got 'soon'")


def test_switched_off_and_absent(salt):
    salt.write_pillar({"roles": {"patroller": False}})
    assert list(show(salt)) == ["ccc-cluster-patroller-off"]
    salt.write_pillar({"patroller": {"name": "gpu-claims"}})
    clean = show(salt, "cluster.patroller.clean")
    assert {args(clean, key)["name"]: args(clean, key)["role"] for key in clean} == {
        "gpu-claims": "patroller", "patroller-webui": "patroller"}
    assert all("absent" in state["ccc_service_container"] for state in clean.values())


def test_where_frpc_runs_the_proxy_network_and_credentials_are_checked(salt):
    frp = {"roles": {"frp_client": True}, "frp_client": {"networks": [
        {"network": "student-restricted", "container_name": "frp-student-client-service"}]}}
    salt.write_pillar(frp)
    output, _ = salt.salt_call("state.apply", "cluster.patroller", "test=True", check=False)
    (only,) = output.values()
    assert only["comment"] == (
        "ccc:patroller is not valid, nothing changed: proxy_network 'lab-unrestricted' is not watched by this "
        "node's FRP client (ccc:frp_client:networks: student-restricted): <node>-monitor would not be published")
    # the sample's secrets hold basic_auth:monitor but not the web UI's credential
    salt.write_pillar({**frp, "patroller": {"proxy_network": "student-restricted", "webui": {"enabled": True, "image": "ui:1"}}})
    output, _ = salt.salt_call("state.apply", "cluster.patroller", "test=True", check=False)
    (only,) = output.values()
    assert only["comment"] == (
        "ccc:patroller is not valid, nothing changed: FRP basic auth patroller_webui needs "
        "ccc:secrets:basic_auth:patroller_webui:user and :password in this node's pillar (docs/secrets.md)")
    salt.write_pillar({**frp, "patroller": {"proxy_network": "student-restricted"}})
    assert "ccc-cluster-patroller-claims-container" in show(salt)
