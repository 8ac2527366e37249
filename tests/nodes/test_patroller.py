"""The patroller role applied for real on a systemd test node (tests/support/sysnode.py), after the
docker role: the claims container and the web UI run as configured (env, networks and aliases,
host PID namespace, not privileged, the node's GPUs from its device groups, FRP labels with
placeholders only, log limits), a compute container on the claims network resolves ``claims``
and ``reservation`` and reaches the API by name, a second apply changes nothing, the web UI's
data is never truncated, and ``ccc:roles:patroller: absent`` removes both containers and keeps
the web UI's folder. Patroller never gets docker.sock: from inside the claims container, the
calls it makes (ping, version, the container list and inspect) pass its own proxy, every write
or leaking read is answered 403 and changes nothing (``docker_api_support``).

Stand-ins and fakes (nothing can be pulled, the machine has no GPU):

* Patroller and the web UI are ``ccc-test/tiny:1``'s busybox re-imported under the configured
  names (``docker import``: no labels or ports of the test image leak in). The Patroller stand-in
  carries ``NVIDIA_VISIBLE_DEVICES=all`` as the real image's CUDA base does, and serves on port 80
  a ``/devices`` page naming the GPUs its process was given; the web UI stand-in serves its
  mounted ``web-ui.json`` and appends a line to the mounted occupancy file at each start.
* GPUs: the docker role installs the test repository's ``nvidia-container-toolkit`` stand-in,
  whose ``nvidia-container-runtime-hook`` is a recording fake (tests/support/aptrepo.py). With it
  on PATH the node's real dockerd registers its ``nvidia`` device driver, so the device request
  Salt sends is handled by Docker itself: Docker sets ``NVIDIA_VISIBLE_DEVICES`` in the process
  environment from the request and runs the hook at start, which records ``prestart``. No device
  or library is injected."""

import json
import subprocess

import pytest

from support.sysnode import failed as _failed

from . import docker_api_support as api

pytestmark = pytest.mark.docker

PATROLLER_IMAGE = "registry.example.org/vicos/patroller:v1"
WEBUI_IMAGE = "registry.example.org/vicos/patroller-webui:v1"
COMPUTE_IMAGE = "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1"  # the sample's image, ccc-test/sshd:1 stands in
GPUS = {"device_lab": ["GPU-7a2b3c4d-0000-4000-8000-000000000201", "GPU-7a2b3c4d-0000-4000-8000-000000000202"],
        "device_student": ["GPU-7a2b3c4d-0000-4000-8000-000000000202", "GPU-7a2b3c4d-0000-4000-8000-000000000203"]}
UNION = ["GPU-7a2b3c4d-0000-4000-8000-000000000201", "GPU-7a2b3c4d-0000-4000-8000-000000000202",
         "GPU-7a2b3c4d-0000-4000-8000-000000000203"]
STORAGE = "/var/lib/ccc-patroller-webui"
HOOK_LOG = "/var/log/ccc-fake-nvidia.log"
PATROLLER_STANDIN = ('mkdir -p /www && echo "{\\"visible\\": \\"$NVIDIA_VISIBLE_DEVICES\\"}" >/www/devices'
                     ' && exec httpd -f -p 80 -h /www')
WEBUI_STANDIN = 'echo "started" >>/code/occupancy_data.parquet && exec httpd -f -p 80 -h /etc/patroller'


def _pillar(role=True):
    return {"ccc": {
        "roles": {"docker": True, "patroller": role},
        "only_roles": "docker,patroller",
        "node": {"compute_devices": GPUS},
        # Plain values stand in for the GPG pillar here (tests/nodes/test_frp_client.py decrypts
        # real ones): role containers whose FRP labels ask for a credential need it to exist.
        "secrets": {"basic_auth": {"monitor": {"user": "monitor", "password": "monitor-pass-5e1d"},
                                   "patroller_webui": {"user": "webui", "password": "webui-pass-31c9"}}},
        "cluster": {"networks": {"lab-unrestricted": {"subnet": "172.31.0.0/24", "gateway": "172.31.0.1",
                                                      "bridge_name": "ccc-lab"},
                                 "claims": {"subnet": "172.31.2.0/24", "gateway": "172.31.2.1", "bridge_name": "ccc-claims"}}},
        "docker": {"nvidia_toolkit": {"enabled": True}, "registries": [], "daemon": {}},
        "patroller": {"image": PATROLLER_IMAGE, "lease": 45, "proxy_network": "lab-unrestricted",
                      "webui": {"enabled": True, "image": WEBUI_IMAGE, "storage_path": STORAGE,
                                "config": {"title": "GPU claims", "nodes": ["patroller"]}}},
    }}


def _apply(node, sls="cluster"):
    call = node.salt_call("state.apply", sls, check=False)
    return call.states()


def _standin(node, image, script, env=()):
    """``ccc-test/tiny:1``'s files re-imported as ``image`` with ``script`` as its entrypoint."""
    changes = ["--change", f"ENTRYPOINT {json.dumps(['/bin/sh', '-c', script])}", "--change", "EXPOSE 80"]
    for item in env:
        changes += ["--change", f"ENV {item}"]
    created = node.exec(["docker", "create", "ccc-test/tiny:1"]).stdout.strip()
    node.exec(["docker", "export", "-o", "/tmp/standin.tar", created])
    node.exec(["docker", "import", *changes, "/tmp/standin.tar", image])
    node.exec(["sh", "-c", f"docker rm {created} && rm /tmp/standin.tar"])


def _load(node, image):
    saved = subprocess.run(["docker", "save", image], capture_output=True, check=True).stdout
    subprocess.run(["docker", "exec", "-i", node.container, "docker", "load"], input=saved, capture_output=True, check=True)


@pytest.fixture(scope="module")
def node(sysnodes):
    made = sysnodes("patroller")
    made.add_apt_source()  # the site's Debian mirror, standing in for the one every node has
    # the sample site's NFS share and local disks
    made.exec("mkdir -p /srv/ccc/shared/user_data /srv/ccc/shared/group_data /srv/ccc/shared/apps "
              "/srv/ccc/shared/datasets /srv/ccc/shared/private_data /srv/ccc/local/hdd /srv/ccc/local/ssd "
              "/srv/ccc/local/sshd")
    made.write_pillar("site/nodes/patroller.sls", json.dumps(_pillar()))
    made.salt_call("saltutil.sync_all")
    docker = _apply(made, "cluster.docker")
    assert _failed(docker) == {}, _failed(docker)
    for image in ("ccc-test/tiny:1", "ccc-test/sshd:1"):
        _load(made, image)
    _standin(made, PATROLLER_IMAGE, PATROLLER_STANDIN, env=["NVIDIA_VISIBLE_DEVICES=all"])
    _standin(made, WEBUI_IMAGE, WEBUI_STANDIN)
    return made


@pytest.fixture(scope="module")
def first(node):
    states = _apply(node)
    assert _failed(states) == {}, "\n".join(f"{k}: {v}" for k, v in _failed(states).items())
    return states


def _inspect(node, name):
    return json.loads(node.exec(["docker", "inspect", name]).stdout)[0]


def test_the_claims_container_runs_as_configured(node, first):
    assert first["ccc-cluster-patroller-gpus"]["name"] == (
        "Patroller watches 3 GPU(s) of device groups device_lab, device_student: " + ", ".join(UNION))
    claims = _inspect(node, "claims")
    env = dict(item.split("=", 1) for item in claims["Config"]["Env"])
    assert {key: env[key] for key in ("PATROLLER_USER_LABELS", "PATROLLER_USER_INFO_LABELS", "PATROLLER_LEASE")} == {
        "PATROLLER_USER_LABELS": "ccc-user.email", "PATROLLER_USER_INFO_LABELS": "ccc-user.name,ccc-user.mentor",
        "PATROLLER_LEASE": "45"}
    host = claims["HostConfig"]
    assert host["PidMode"] == "host" and host["Privileged"] is False
    assert host["Binds"] == ["/run/ccc-docker-api/claims.sock:/var/run/docker.sock:ro"]
    assert host["RestartPolicy"]["Name"] == "always"
    assert host["LogConfig"] == {"Type": "json-file", "Config": {"max-size": "10m", "max-file": "5", "compress": "true"}}
    assert [(r["Driver"], r["Count"], r["DeviceIDs"], r["Capabilities"]) for r in host["DeviceRequests"]] == [
        ("nvidia", 0, UNION, [["gpu"]])]
    networks = claims["NetworkSettings"]["Networks"]
    assert sorted(networks) == ["claims", "lab-unrestricted"]  # no default bridge
    assert "reservation" in networks["claims"]["Aliases"]  # "claims" is the container's own name
    assert list(claims["Config"]["ExposedPorts"]) == ["80/tcp"] and host["PortBindings"] in ({}, None)
    assert claims["Config"]["Labels"] == {
        "ccc.cluster-role": "patroller", "frp.enabled": "true", "frp.80": "http", "frp.80.health_check": "false",
        "frp.80.http.subdomain": "patroller-monitor", "frp.80.http.locations": "/",
        "frp.80.http.username": "{{ .Envs.FRP_CCC_MONITOR_USER }}",
        "frp.80.http.password": "{{ .Envs.FRP_CCC_MONITOR_PASSWORD }}"}
    shown = json.dumps([claims, _inspect(node, "patroller-webui")])
    assert "monitor-pass-5e1d" not in shown and "webui-pass-31c9" not in shown


def test_patroller_reads_containers_through_its_proxy_and_nothing_else(node, first):
    api.assert_no_engine_socket(node, "claims")
    webui = _inspect(node, "patroller-webui")["Id"]
    answers = api.assert_needs_pass(node, "claims", [
        ("HEAD", "/_ping"), ("GET", "/version"), ("GET", "/v1.41/containers/json"),
        ("GET", f"/v1.41/containers/{webui}/json")])
    assert answers[2]["body"].startswith('[{"Id":"') and answers[3]["body"].startswith('{"Id":"' + webui)
    api.assert_attacks_refused(node, "claims", webui)
    for path in ("/v1.41/info", "/v1.41/networks", "/v1.41/events"):  # frpc's, not Patroller's
        assert api.probe(node, "claims", [("GET", path, None)])[0]["status"] == 403


def test_docker_hands_the_process_exactly_the_nodes_gpus(node, first):
    """The image says "all"; the process sees only the union of the device groups, set by Docker
    from the device request, and the NVIDIA hook ran for the claims container."""
    pid = node.exec(["docker", "inspect", "-f", "{{.State.Pid}}", "claims"]).stdout.strip()
    environ = node.exec(["cat", f"/proc/{pid}/environ"]).stdout.split("\0")
    visible = {item.split("=", 1)[1] for item in environ if item.startswith("NVIDIA_VISIBLE_DEVICES=")}
    assert visible == {",".join(UNION)}
    assert "nvidia-container-runtime-hook prestart" in node.exec(["cat", HOOK_LOG]).stdout


def test_a_container_on_the_claims_network_reaches_the_api_by_name(node, first):
    page = node.exec(["docker", "run", "--rm", "--network", "claims", "--entrypoint", "/bin/busybox", "ccc-test/tiny:1",
                      "wget", "-qO-", "http://claims/devices"]).stdout
    assert json.loads(page) == {"visible": ",".join(UNION)}


def test_a_deployed_compute_container_resolves_claims(node, first):
    """The real containers path: a sample user's container placed on this node by pillar joins
    the claims network and finds Patroller under both names."""
    pillar = _pillar()
    pillar["ccc"]["containers"] = [{"STACK_NAME": "ana-claims", "USER_EMAIL": "ana.novak@example.org",
                                    "CONTAINER_IMAGE": COMPUTE_IMAGE, "DEPLOYMENT_NODES": ["patroller"],
                                    "ALLOWED_NODES": ["patroller"]}]
    node.write_pillar("site/nodes/patroller.sls", json.dumps(pillar))
    node.exec(["docker", "tag", "ccc-test/sshd:1", COMPUTE_IMAGE])
    try:
        deployed = _apply(node, "containers")
        assert _failed(deployed) == {}, _failed(deployed)
        claims_ip = node.exec(["docker", "inspect", "-f", '{{(index .NetworkSettings.Networks "claims").IPAddress}}',
                               "claims"]).stdout.strip()
        for name in ("claims", "reservation"):
            found = node.exec(["docker", "exec", "ana-claims", "getent", "hosts", name]).stdout.split()
            assert found[:2] == [claims_ip, name]
    finally:
        node.exec(["docker", "rm", "-f", "ana-claims"], check=False)
        node.write_pillar("site/nodes/patroller.sls", json.dumps(_pillar()))


def test_the_web_ui_gets_its_files_and_network(node, first):
    assert node.exec(["stat", "-c", "%U %a", STORAGE]).stdout.split() == ["root", "755"]
    assert json.loads(node.exec(["cat", f"{STORAGE}/web-ui.json"]).stdout) == {"title": "GPU claims", "nodes": ["patroller"]}
    webui = _inspect(node, "patroller-webui")
    assert sorted(webui["NetworkSettings"]["Networks"]) == ["lab-unrestricted"]
    assert sorted(webui["HostConfig"]["Binds"]) == [f"{STORAGE}/occupancy_data.parquet:/code/occupancy_data.parquet:rw",
                                                   f"{STORAGE}/web-ui.json:/etc/patroller/web-ui.json:ro"]
    assert "STREAMLIT_SERVER_PORT=80" in webui["Config"]["Env"]
    assert webui["Config"]["Labels"]["frp.80.http.subdomain"] == "patroller"
    assert webui["HostConfig"]["DeviceRequests"] in (None, [])
    page = node.exec(["docker", "run", "--rm", "--network", "lab-unrestricted", "--entrypoint", "/bin/busybox",
                      "ccc-test/tiny:1", "wget", "-qO-", "http://patroller-webui/web-ui.json"]).stdout
    assert json.loads(page)["title"] == "GPU claims"


def test_a_second_apply_changes_nothing_and_keeps_the_web_ui_data(node, first):
    claims_id = _inspect(node, "claims")["Id"]
    node.exec(f"echo 'claims history' >>{STORAGE}/occupancy_data.parquet")
    second = _apply(node)
    assert _failed(second) == {}
    assert {key: value["changes"] for key, value in second.items() if value["changes"]} == {}
    assert _inspect(node, "claims")["Id"] == claims_id
    assert node.exec(["cat", f"{STORAGE}/occupancy_data.parquet"]).stdout == "started\nclaims history\n"


def test_a_node_without_device_groups_gives_patroller_no_gpu(node, first):
    pillar = _pillar()
    pillar["ccc"]["node"]["compute_devices"] = {}
    node.write_pillar("site/nodes/patroller.sls", json.dumps(pillar))
    try:
        states = _apply(node)
        assert _failed(states) == {}
        assert states["ccc-cluster-patroller-gpus"]["name"].startswith("Patroller gets no GPU")
        assert states["ccc-cluster-patroller-claims-container"]["changes"]["differences"] == [
            "env NVIDIA_VISIBLE_DEVICES", "devices"]
        assert _inspect(node, "claims")["HostConfig"]["DeviceRequests"] in (None, [])
        page = node.exec(["docker", "run", "--rm", "--network", "claims", "--entrypoint", "/bin/busybox",
                          "ccc-test/tiny:1", "wget", "-qO-", "http://claims/devices"]).stdout
        assert json.loads(page) == {"visible": "void"}  # never the image's "all"
    finally:
        node.write_pillar("site/nodes/patroller.sls", json.dumps(_pillar()))


def test_role_absent_removes_both_containers_and_keeps_the_data(node, first):
    node.write_pillar("site/nodes/patroller.sls", json.dumps(_pillar(role="absent")))
    states = _apply(node)
    assert _failed(states) == {}
    assert states["ccc-cluster-patroller-clean-claims-container"]["changes"] == {
        "removed": "claims", "docker api proxy removed": "ccc-docker-api@claims.socket"}
    assert states["ccc-cluster-patroller-clean-webui-container"]["changes"] == {"removed": "patroller-webui"}
    assert node.exec("docker ps -a --format '{{.Names}}'").stdout.split() == []
    assert states["ccc-cluster-patroller-clean-claims-container"]["comment"] == "claims removed"
    assert node.exec("ls -A /etc/ccc-docker-api; ls -A /run/ccc-docker-api", check=False).stdout.split() == []
    assert "claims history" in node.exec(["cat", f"{STORAGE}/occupancy_data.parquet"]).stdout
    again = _apply(node)
    assert {key: value["changes"] for key, value in again.items() if value["changes"]} == {}
