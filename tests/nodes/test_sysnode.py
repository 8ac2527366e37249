"""Smoke tests of the systemd test nodes: what the cluster roles' tests will rely on works."""

import subprocess

import pytest

from support.sysnode import HOST_IP, accept_minion

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def node(sysnodes):
    """One node for the whole module: the tests below build on each other's installs."""
    return sysnodes("smoke1")


def test_systemd_is_pid1_and_running(node):
    assert node.exec(["ps", "-o", "comm=", "-p", "1"]).stdout.strip() == "systemd"
    assert node.exec(["systemctl", "is-system-running"]).stdout.strip() == "running"
    assert node.exec(["hostname"]).stdout.strip() == "smoke1"
    # The host kernel's own settings stay out of reach; the node's network ones are its own.
    assert node.exec(["sysctl", "-w", "vm.swappiness=11"], check=False).returncode != 0
    node.exec(["sysctl", "-w", "net.ipv4.ip_forward=0"])
    assert node.exec(["sysctl", "-n", "net.ipv4.ip_forward"]).stdout.strip() == "0"


def test_docker_from_the_local_repository_runs_a_container(node):
    node.add_apt_source()
    node.exec("DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io", timeout=600)
    assert node.exec(["systemctl", "is-enabled", "docker"]).stdout.strip() == "enabled"
    node.exec(["systemctl", "start", "docker"])
    loaded = subprocess.run(f"docker save ccc-test/tiny:1 | docker exec -i {node.container} docker load",
                            shell=True, capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0, loaded.stderr
    out = node.exec(["docker", "run", "--rm", "--entrypoint", "/bin/sh", "ccc-test/tiny:1",
                     "-c", "echo nested-ok"]).stdout
    assert out.strip() == "nested-ok"
    assert "overlay2" in node.exec(["docker", "info", "--format", "{{.Driver}}"]).stdout


def test_iptables_docker_user_chain(node):
    rules = node.exec(["iptables", "-S", "DOCKER-USER"]).stdout
    assert "-N DOCKER-USER" in rules
    node.exec(["iptables", "-I", "DOCKER-USER", "-s", "192.0.2.0/24", "-j", "DROP"])
    assert "-A DOCKER-USER -s 192.0.2.0/24 -j DROP" in node.exec(["iptables", "-S", "DOCKER-USER"]).stdout


def test_restart_is_a_reboot(node):
    node.exec(["docker", "run", "-d", "--name", "keeper", "--restart", "always", "ccc-test/tiny:1"])
    node.exec(["touch", "/run/ccc-before-reboot"])
    node.restart()
    assert node.exec(["test", "-e", "/run/ccc-before-reboot"], check=False).returncode == 1
    assert node.exec(["systemctl", "is-active", "docker"]).stdout.strip() == "active"
    status = node.exec(["docker", "inspect", "--format", "{{.State.Status}}", "keeper"]).stdout.strip()
    assert status == "running"


def test_stand_in_packages_install_and_record(node):
    packages = ["nvidia-container-toolkit", "nvidia-headless-550", "nvidia-utils-550"]
    node.exec("DEBIAN_FRONTEND=noninteractive apt-get install -y -q " + " ".join(packages), timeout=300)
    versions = node.exec(["dpkg-query", "-W", "-f", "${Package}=${Version}\\n", *packages]).stdout.split()
    assert versions == ["nvidia-container-toolkit=1.17.8-1", "nvidia-headless-550=550.127.05-0ubuntu1",
                        "nvidia-utils-550=550.127.05-0ubuntu1"]
    assert node.exec(["nvidia-smi", "-L"], check=False).returncode == 6  # a driver without GPUs
    node.exec(["systemd-run", "--unit", "fake-persistenced", "-p", "Type=forking",
               "-p", "PIDFile=/run/nvidia-persistenced/nvidia-persistenced.pid",
               "/usr/bin/nvidia-persistenced", "--persistence-mode"])
    assert node.exec(["systemctl", "is-active", "fake-persistenced"]).stdout.strip() == "active"
    log = node.exec(["cat", "/var/log/ccc-fake-nvidia.log"]).stdout
    assert "nvidia-smi -L" in log and "nvidia-persistenced --persistence-mode" in log


def test_masterless_salt_call(node):
    node.write_pillar("top.sls", "base:\n  '*':\n    - smoke\n")
    node.write_pillar("smoke.sls", "smoke: from-the-test\n")
    assert node.salt_call("test.ping").data is True
    # Salt 3008 masks pillar values in output unless asked
    assert node.salt_call("pillar.get", "smoke", "unmask=True").data == "from-the-test"
    assert node.salt_call("grains.get", "init").data == "systemd"


def test_minion_answers_the_host_master(sysnodes, node_master):
    minion = sysnodes("smoke2")
    minion.start_minion(HOST_IP, node_master.config["ret_port"], node_master.config["publish_port"])
    accept_minion(node_master, "smoke2")
    ret = node_master.salt_cli(timeout=30).run("grains.get", "host", minion_tgt="smoke2")
    assert ret.data == "smoke2"
