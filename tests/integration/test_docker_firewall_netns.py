"""The egress firewall state (``_states/ccc_docker_firewall.py``) and the restore script the boot
unit runs (``salt/cluster/docker/files/ccc-docker-firewall``) against a real iptables, inside a
throwaway network namespace of the host (the host's own rules are never touched).

Boundary: ``iptables``/``iptables-restore`` on PATH are two-line wrappers that run the real
binaries in the namespace (``ip netns exec``); nothing else is faked. What an admin sees: the
chain in order, the jump first in DOCKER-USER, a second run with no changes, drift repaired, the
script alone restoring everything after dockerd's chains were rebuilt (as after a restart or a
reboot), and ``absent`` removing chain, jump and file."""

import importlib.util
import os
import pathlib
import shutil
import subprocess

import pytest

import ccc_docker_firewall as fw

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "salt" / "cluster" / "docker" / "files" / "ccc-docker-firewall"
NETWORKS = {
    "lab-unrestricted": {"subnet": "172.30.0.0/24", "bridge_name": "ccc-lab"},
    "student-restricted": {"subnet": "172.30.1.0/24", "bridge_name": "ccc-student",
                           "restricted_access": ["anywhere"], "allowed_access": ["172.30.2.0/24"]},
}


@pytest.fixture
def netns(tmp_path, monkeypatch):
    """A network namespace and iptables wrappers on PATH that act inside it."""
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("iptables"):
        pytest.skip("needs root, ip and iptables")
    name = f"ccc-fw-test-{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", name], capture_output=True).returncode != 0:
        pytest.skip("cannot create a network namespace here")
    wrappers = tmp_path / "bin"
    wrappers.mkdir()
    for tool in ("iptables", "iptables-restore"):
        real = shutil.which(tool)
        (wrappers / tool).write_text(f'#!/bin/sh\nexec ip netns exec {name} {real} "$@"\n')
        (wrappers / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrappers}:{os.environ['PATH']}")
    yield name
    subprocess.run(["ip", "netns", "del", name], check=False)


def iptables(*args):
    return subprocess.run(["iptables", "-w", *args], capture_output=True, text=True, check=True).stdout


def state(test=False, networks=NETWORKS):
    spec = importlib.util.spec_from_file_location("ccc_docker_firewall_state", REPO / "_states" / "ccc_docker_firewall.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.__pillar__ = {"ccc": {"cluster": {"networks": networks}}}
    module.__opts__ = {"test": test}
    return module


def apply(rules_file, test=False, networks=NETWORKS):
    return state(test, networks).managed("chain", rules_file=str(rules_file), script=str(SCRIPT))


def user_chain():
    return [line for line in iptables("-S", "DOCKER-USER").splitlines() if line.startswith("-A ")]


def test_apply_then_nothing_to_do_then_drift_repaired(netns, tmp_path):
    rules_file = tmp_path / "etc" / "docker-firewall.rules"
    wanted = fw.chain_rules(NETWORKS)
    preview = apply(rules_file, test=True)
    assert preview["result"] is None and preview["changes"]["chain"] == {"added": wanted}
    assert preview["changes"]["jump"] == "-I DOCKER-USER 1 -j CCC-EGRESS" and not rules_file.exists()

    first = apply(rules_file)
    assert first["result"] is True, first
    assert first["comment"] == "4 rule(s) in CCC-EGRESS for restricted networks applied"
    assert iptables("-S", "CCC-EGRESS").splitlines()[1:] == [
        "-A CCC-EGRESS -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN",
        "-A CCC-EGRESS -i ccc-student -o ccc-student -j RETURN",
        "-A CCC-EGRESS -s 172.30.1.0/24 -d 172.30.2.0/24 -i ccc-student -j ACCEPT",
        "-A CCC-EGRESS -s 172.30.1.0/24 -i ccc-student -j DROP",
    ] == wanted
    assert user_chain() == ["-A DOCKER-USER -j CCC-EGRESS"]
    assert rules_file.read_text() == fw.restore_text(wanted) and oct(rules_file.stat().st_mode & 0o777) == "0o644"

    again = apply(rules_file)
    assert (again["result"], again["changes"]) == (True, {})
    assert again["comment"] == "4 rule(s) in CCC-EGRESS for restricted networks in place"

    iptables("-D", "CCC-EGRESS", "4")  # someone deleted the DROP by hand
    iptables("-I", "DOCKER-USER", "1", "-j", "RETURN")
    repaired = apply(rules_file)
    assert repaired["result"] is True
    assert repaired["changes"]["chain"] == {"added": [wanted[-1]]} and "jump" in repaired["changes"]
    assert iptables("-S", "CCC-EGRESS").splitlines()[1:] == wanted
    assert user_chain()[0] == "-A DOCKER-USER -j CCC-EGRESS"


def test_the_boot_script_restores_rules_after_dockerd_rebuilt_its_chains(netns, tmp_path):
    rules_file = tmp_path / "docker-firewall.rules"
    assert apply(rules_file)["result"] is True
    # What a reboot leaves: no chain of ours; dockerd then creates DOCKER-USER with its RETURN.
    iptables("-D", "DOCKER-USER", "-j", "CCC-EGRESS")
    iptables("-F", "CCC-EGRESS")
    iptables("-X", "CCC-EGRESS")
    iptables("-A", "DOCKER-USER", "-j", "RETURN")
    for _ in range(2):  # run twice: the second run adds no second jump
        proc = subprocess.run([str(SCRIPT), str(rules_file)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    assert iptables("-S", "CCC-EGRESS").splitlines()[1:] == fw.chain_rules(NETWORKS)
    assert user_chain() == ["-A DOCKER-USER -j CCC-EGRESS", "-A DOCKER-USER -j RETURN"]


def test_before_dockerd_ever_started_the_script_creates_docker_user(netns, tmp_path):
    rules_file = tmp_path / "docker-firewall.rules"
    rules_file.write_text(fw.restore_text(fw.chain_rules(NETWORKS)))
    proc = subprocess.run([str(SCRIPT), str(rules_file)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert user_chain() == ["-A DOCKER-USER -j CCC-EGRESS"]
    missing = subprocess.run([str(SCRIPT), str(tmp_path / "none.rules")], capture_output=True, text=True)
    assert missing.returncode == 0 and "no egress rules to apply" in missing.stderr


def test_absent_and_no_restricted_network_remove_chain_jump_and_file(netns, tmp_path):
    rules_file = tmp_path / "docker-firewall.rules"
    assert apply(rules_file)["result"] is True
    unrestricted = {"lab-unrestricted": NETWORKS["lab-unrestricted"]}
    preview = apply(rules_file, test=True, networks=unrestricted)
    assert preview["result"] is None and preview["changes"] == {"jump": "removed", "chain": "removed",
                                                                 "rules file": "removed"}
    gone = apply(rules_file, networks=unrestricted)
    assert gone["result"] is True and gone["comment"] == "egress chain CCC-EGRESS removed"
    assert user_chain() == [] and not rules_file.exists()
    assert subprocess.run(["iptables", "-w", "-S", "CCC-EGRESS"], capture_output=True).returncode != 0
    assert state().absent("x", rules_file=str(rules_file)) == {
        "name": "x", "result": True, "changes": {}, "comment": "no egress chain CCC-EGRESS"}


def test_a_bad_definition_fails_and_changes_nothing(netns, tmp_path):
    bad = {"student": dict(NETWORKS["student-restricted"], restricted_access=["300.1.1.1"])}
    result = apply(tmp_path / "r.rules", networks=bad)
    assert result["result"] is False and result["changes"] == {}
    assert result["comment"].startswith("egress rules not applied: ccc:cluster:networks:student:restricted_access[0]")
    assert subprocess.run(["iptables", "-w", "-S", "CCC-EGRESS"], capture_output=True).returncode != 0
