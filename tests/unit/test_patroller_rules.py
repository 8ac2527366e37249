"""The patroller role's rules (``_utils/ccc_patroller.py``): the GPUs Patroller gets (the union of
the node's device groups, none without groups, all only when asked), the claims container and
web UI specs an admin would see in ``docker inspect``, and the settings problems that stop the
role before it changes anything."""

import json
import pathlib

import yaml

from support import role_files, site  # noqa: F401  (site puts _utils on sys.path)

import ccc_frp
import ccc_patroller
import ccc_pillar
import ccc_service_containers

REPO = pathlib.Path(__file__).resolve().parents[2]
DEFAULTS = yaml.safe_load((REPO / "salt" / "cluster" / "patroller" / "defaults.yaml").read_text())["patroller"]
SCHEMA = role_files.schema("patroller")
CLUSTER = ccc_pillar.cluster_settings({})
DEVICES = {"device_lab": ["GPU-aaaa-0001", "GPU-aaaa-0002"], "device_student": ["GPU-aaaa-0002", "GPU-aaaa-0003"]}


def settings(**changes):
    return ccc_pillar.deep_merge(DEFAULTS, {"proxy_network": "lab-unrestricted", **changes})


def plan(node="gpu1", devices=DEVICES, cluster=CLUSTER, **changes):
    return ccc_patroller.plan(settings(**changes), cluster, node, devices, SCHEMA)


def test_the_gpus_are_the_union_of_the_nodes_device_groups():
    result = plan()
    assert result["problems"] == []
    assert result["claims"]["device_requests"] == [{"driver": "nvidia", "count": 0, "capabilities": [["gpu"]],
                                                     "device_ids": ["GPU-aaaa-0001", "GPU-aaaa-0002", "GPU-aaaa-0003"]}]
    assert result["claims"]["env"]["NVIDIA_VISIBLE_DEVICES"] == "GPU-aaaa-0001,GPU-aaaa-0002,GPU-aaaa-0003"
    assert result["gpus"] == ("Patroller watches 3 GPU(s) of device groups device_lab, device_student: "
                              "GPU-aaaa-0001, GPU-aaaa-0002, GPU-aaaa-0003")


def test_a_node_without_device_groups_gets_no_gpu_and_the_plan_says_so():
    for devices in ({}, None, {"device_lab": []}):
        result = plan(devices=devices)
        assert result["claims"]["device_requests"] == []
        # the image's CUDA base sets NVIDIA_VISIBLE_DEVICES=all: it is overridden, never inherited
        assert result["claims"]["env"]["NVIDIA_VISIBLE_DEVICES"] == "void"
        assert result["gpus"].startswith("Patroller gets no GPU: ccc:node:compute_devices lists none")


def test_all_gpus_only_when_asked():
    result = plan(all_gpus=True, devices={})
    assert result["claims"]["device_requests"] == [{"driver": "nvidia", "device_ids": [], "count": -1,
                                                     "capabilities": [["gpu"]]}]
    assert result["claims"]["env"]["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert plan(all_gpus="yes")["problems"] == ["ccc:patroller:all_gpus must be true or false, got 'yes'"]


def test_the_claims_container_as_an_admin_inspects_it():
    claims = plan(node="gpu7", lease=45)["claims"]
    assert claims["name"] == "claims" and claims["image"] == "vicos/patroller:latest" and claims["role"] == "patroller"
    assert claims["env"] == {"PATROLLER_USER_LABELS": "ccc-user.email", "NVIDIA_VISIBLE_DEVICES": claims["env"]["NVIDIA_VISIBLE_DEVICES"],
                             "PATROLLER_USER_INFO_LABELS": "ccc-user.name,ccc-user.mentor", "PATROLLER_LEASE": "45"}
    # the container's own name resolves anyway: only the other alias is asked for
    assert claims["networks"] == [{"name": "claims", "aliases": ["reservation"]},
                                  {"name": "lab-unrestricted", "aliases": []}]
    renamed = plan(name="gpu-claims")["claims"]["networks"][0]
    assert renamed == {"name": "claims", "aliases": ["claims", "reservation"]}
    assert claims["pid_mode"] == "host" and claims["privileged"] is False
    assert claims["binds"] == [] and claims["docker_api"] == "patroller"  # never docker.sock: its own allowlist proxy
    assert claims["exposed_ports"] == [80] and claims["ports"] == {} and claims["restart"] == "always"
    assert claims["log_config"] == {"type": "json-file", "config": {"max-size": "10m", "max-file": "5", "compress": "true"}}
    assert claims["labels"] == {
        "frp.enabled": "true", "frp.80": "http", "frp.80.http.subdomain": "gpu7-monitor",
        "frp.80.health_check": "false", "frp.80.http.locations": "/",
        "frp.80.http.username": "{{ .Envs.FRP_CCC_MONITOR_USER }}",
        "frp.80.http.password": "{{ .Envs.FRP_CCC_MONITOR_PASSWORD }}"}
    assert claims["secret_env"] == {}
    # the generic state accepts it as it is
    assert ccc_service_containers.normalize(claims)["device_requests"][0]["count"] == 0


def test_the_claims_network_follows_the_cluster_and_may_be_overridden():
    cluster = ccc_pillar.cluster_settings({"cluster": {"claims_network": "gpu-claims"}})
    assert plan(cluster=cluster)["claims"]["networks"][0]["name"] == "gpu-claims"
    assert plan(cluster=cluster, network="reservations")["claims"]["networks"][0]["name"] == "reservations"
    same = plan(proxy_network="claims")["claims"]["networks"]
    assert same == [{"name": "claims", "aliases": ["reservation"]}]
    nothing = ccc_pillar.cluster_settings({"cluster": {"claims_network": None}})
    assert plan(cluster=nothing)["problems"] == [
        "no claims network: set ccc:patroller:network or ccc:cluster:claims_network (compute containers reach Patroller there)"]


def test_wrong_settings_are_problems_and_nothing_is_planned():
    result = plan(proxy_network=None, lease=0, name="bad name", image="")
    assert result["problems"] == [
        "ccc:patroller:proxy_network is required: the frpc-watched network <node>-monitor is published from "
        "(while the role is on)",
        "ccc:patroller:name must be a container name (letters, digits, _ . -), got 'bad name'",
        "ccc:patroller:image must be an image reference, got ''",
        "ccc:patroller:lease must be a whole number of seconds >= 1, got 0"]
    assert result["claims"] is None and result["gpus"] is None
    broken = plan(devices={"device_lab": ["not-a-gpu"]})
    assert broken["problems"] == ["device group 'device_lab': 'not-a-gpu' is not a GPU or MIG UUID"]


def test_the_web_ui_files_and_container():
    result = plan(webui={"enabled": True, "image": "registry.example.org/patroller-webui:2", "subdomain": "gpu-claims",
                         "storage_path": "/srv/patroller-webui", "config": {"nodes": ["gpu1", "gpu2"], "refresh": 60}})
    assert result["problems"] == []
    assert result["webui_files"] == {"folder": "/srv/patroller-webui",
                                     "parquet": "/srv/patroller-webui/occupancy_data.parquet",
                                     "config": "/srv/patroller-webui/web-ui.json"}
    assert json.loads(result["webui_config"]) == {"nodes": ["gpu1", "gpu2"], "refresh": 60}
    webui = result["webui"]
    assert webui["name"] == "patroller-webui" and webui["env"] == {"STREAMLIT_SERVER_PORT": "80"}
    assert webui["binds"] == [
        {"source": "/srv/patroller-webui/occupancy_data.parquet", "target": "/code/occupancy_data.parquet", "read_only": False},
        {"source": "/srv/patroller-webui/web-ui.json", "target": "/etc/patroller/web-ui.json", "read_only": True}]
    assert webui["networks"] == [{"name": "lab-unrestricted", "aliases": []}]
    assert webui["labels"]["frp.80.http.subdomain"] == "gpu-claims"
    assert webui["labels"]["frp.80.http.password"] == ccc_frp.placeholder("FRP_CCC_PATROLLER_WEBUI_PASSWORD")
    assert webui["log_config"] == ccc_patroller.LOG_CONFIG and webui["restart"] == "always"
    assert plan()["webui"] is None and plan()["webui_files"] is None


def test_the_web_ui_is_written_only_under_an_admin_path():
    def problems(**webui):
        return plan(webui={"enabled": True, "image": "webui:1", **webui})["problems"]
    assert problems(image=None) == ["ccc:patroller:webui:image must be set while the web UI is enabled, got None"]
    assert problems(storage_path="relative/dir") == [
        "ccc:patroller:webui:storage_path must be an absolute, normalised folder other than / or null, "
        "got 'relative/dir'"]
    assert problems(storage_path="/srv/../etc")[0].startswith(
        "ccc:patroller:webui:storage_path must be an absolute, normalised")
    users = f"{CLUSTER['mount_points']['nfs']['user_data']}/ana@example.org/webui"
    assert problems(storage_path=users) == [
        f"ccc:patroller:webui:storage_path '{users}' overlaps users' storage ccc:cluster:mount_points:nfs:user_data "
        "(/data/shared/user_data): root writes only to admin paths"]
    assert problems(storage_path="/data")[0].startswith(
        "ccc:patroller:webui:storage_path '/data' overlaps users' storage")
    assert problems(subdomain="Patroller.UI") == [
        "ccc:patroller:webui:subdomain must be a subdomain (a-z, 0-9 and -), got 'Patroller.UI'"]
    assert problems(config=["a"]) == ["ccc:patroller:webui:config must be a mapping of JSON values, got ['a']"]
    assert problems(config={"a": float("nan")})[0].startswith("ccc:patroller:webui:config must be a mapping of JSON")
    assert plan(webui={"enabled": "yes"})["problems"] == [
        "ccc:patroller:webui:enabled must be true or false or null, got 'yes'"]


def test_services_for_status():
    assert ccc_patroller.services(settings(), "gpu1") == [{"kind": "container", "name": "claims", "role": "patroller"}]
    with_ui = settings(webui={"enabled": True, "name": "ui"})
    assert ccc_patroller.services(with_ui, "gpu1") == [{"kind": "container", "name": "claims", "role": "patroller"},
                                                       {"kind": "container", "name": "ui", "role": "patroller"}]
