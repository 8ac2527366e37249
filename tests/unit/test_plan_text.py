"""``ccc_report.plan_text``: what an admin reads from ``salt-call ccc_containers.resolve <STACK>``,
on real resolutions of the sample site. Every test asserts lines of the text: placement and why,
action, image, GPUs by group, mounts as ``source -> target (ro)`` (pinned folders by their real
folder), FRP ports, networks, folders with octal modes, hardening, messages; never a secret."""

import json

import yaml

from support.site import deep_merge, sample_ccc

import ccc_quote  # noqa: E402
import ccc_report  # noqa: E402
import ccc_resolver  # noqa: E402
import ccc_subdomains  # noqa: E402

ANA, BOR = "ana.novak@example.org", "bor.kralj@example.org"
SHARED, LOCAL = "/srv/ccc/shared", "/srv/ccc/local"
ADMIN_IMAGE = "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1"
LAB1, LAB2, STU1 = (f"GPU-5f1c2a64-8a1e-4b7e-9d1e-0c0a1111000{i}" for i in (1, 2, 3))
NODE2_LAB = [f"GPU-7a2b3c4d-0000-4000-8000-00000000020{i}" for i in (1, 2, 3, 4)]


def resolve(stack="ana-main", node="node1", ccc=None, settings=None, last_good=None):
    ccc = ccc or sample_ccc(node)
    text = None if settings is None else yaml.safe_dump({stack: settings})
    facts = ccc_resolver.NodeFacts(node, compute_devices=(ccc.get("node") or {}).get("compute_devices"),
                                   docker_gid=998, host_timezone_files=["/etc/localtime"])
    taken = ccc_subdomains.taken_subdomains(ccc, {}, except_stack=stack)
    return ccc_resolver.resolve_container(ccc, stack, facts, settings_text=text, last_good=last_good, taken=taken)


def plan_lines(**kwargs):
    return ccc_report.plan_text(resolve(**kwargs)).splitlines()


def section(lines, title):
    """The ``  - item`` lines under ``title:``."""
    start = lines.index(f"{title}:") + 1
    items = []
    for line in lines[start:]:
        if not line.startswith("  - "):
            break
        items.append(line[4:])
    return items


def test_a_container_that_runs_here_reads_like_the_report():
    lines = plan_lines()
    assert lines[:5] == [
        f"container: ana-main (user {ANA})",
        "node: node1",
        "action: run here (created, or recreated when its spec hash changed)",
        "placement: node1 (from the user type's default_nodes; allowed: node1, node2, node3)",
        "settings: no settings file yet: the admin's values apply",
    ]
    assert f"image: {ADMIN_IMAGE}" in lines
    assert lines[lines.index("gpus: 2") + 1] == f"  - device_lab: {LAB1}, {LAB2}"
    assert "shm_size: 8g" in lines and "packages: none" in lines and "ssh keys: 1" in lines
    assert "networks: lab-unrestricted, claims" in lines
    assert "security: no-new-privileges; drops MKNOD, NET_RAW, SETFCAP; at most 16384 processes" in lines
    assert lines[-1].startswith("spec hash: ") and len(lines[-1]) == len("spec hash: ") + 20
    assert not [line for line in lines if line.startswith("messages for")]


def test_mounts_are_source_arrow_target_with_flags():
    mounts = section(plan_lines(), "mounts")
    user_dir = f"{SHARED}/user_data/{ANA}"
    assert mounts == [
        f"{user_dir}/ana-main -> /home/ana",
        f"{user_dir}/container-settings -> /home/ana/.containers",
        f"{SHARED}/apps -> /opt/apps (ro)",
        f"{user_dir} -> /storage/user",
        f"{SHARED}/group_data -> /storage/group",
        f"{SHARED}/datasets -> /storage/datasets",
        f"{LOCAL}/hdd/{ANA} -> /storage/local/hdd",
        f"{LOCAL}/ssd/{ANA} -> /storage/local/ssd",
        f"{LOCAL}/sshd/stacks/ana-main -> /home/.sshd (ro)",
        f"{user_dir}/private -> /storage/private (rslave)",
        f"{SHARED}/private_data/lab -> /storage/private/lab",
    ]


def test_pinned_mounts_show_the_real_folder_not_the_pin():
    resolution = resolve()
    for mount in resolution["spec"]["mounts"]:  # as the node hands them to Docker (ccc_pins)
        if mount.get("pin"):
            mount["source"] = f"/run/ccc-salt/binds/ana-main/0123abcd/{mount['pin']['name']}"
    text = ccc_report.plan_text(resolution)
    assert "/run/ccc-salt/binds" not in text
    assert f"  - {SHARED}/user_data/{ANA}/ana-main -> /home/ana\n" in text
    assert f"  - {SHARED}/private_data/lab -> /storage/private/lab\n" in text


def test_folders_show_owner_and_octal_modes():
    folders = section(plan_lines(), "folders created when missing")
    assert folders[:2] == [f"{SHARED}/user_data/{ANA} (owner 1000:1000, mode 0755)",
                           f"{SHARED}/user_data/{ANA}/ana-main (owner 1000:1000, mode 0750)"]
    assert f"{SHARED}/private_data/lab-shared (owner 1000:1000, mode 0755)" in folders
    text = "\n".join(plan_lines())
    assert "493" not in text and "488" not in text


def test_ports_show_frp_kind_subdomain_and_whether_a_password_is_asked():
    settings = {"FRP_PORTS": {"TCP": [2222], "HTTP": [
        {"port": 6006, "subdomain": "ana-tb", "pass": "s3cret-pass"},
        {"port": 7007, "subdomain": "ana-open", "https_without_pass": True, "subdomain_hostname_prefix": False},
        {"port": 8008, "subdomain": "ana-nb", "pass": "other-secret", "user": "viewer"},
        {"port": 9009, "subdomain": "ana-free"},
    ]}}
    lines = plan_lines(settings=settings)
    assert section(lines, "ports") == [
        "2222: TCP",
        "6006: HTTP at subdomain node1-ana-tb (password for user ana)",
        "7007: HTTPS at subdomain ana-open (no password)",
        "8008: HTTP at subdomain node1-ana-nb (password for user viewer)",
        "9009: HTTP at subdomain node1-ana-free (no password)",
    ]
    assert "settings: the user's settings file is accepted" in lines
    text = "\n".join(lines)
    assert "s3cret-pass" not in text and "other-secret" not in text


def test_no_secret_reaches_the_plan():
    ccc = deep_merge(sample_ccc("node1"), {})
    ccc["containers"][0]["EXTRA_ENVS"] = {"WANDB_API_KEY": "tok-1234567890", "THREADS": 8}
    resolution = resolve(ccc=ccc)
    assert resolution["spec"]["labels"]["frp.6006.http.password"] == "change-me"  # the sample's admin pass
    text = ccc_report.plan_text(resolution)
    assert "change-me" not in text and "tok-1234567890" not in text
    assert "extra environment: THREADS, WANDB_API_KEY (values hidden)\n" in text


def test_gpu_groups_the_node_lacks_are_shown_and_told_to_the_admin():
    lines = plan_lines(stack="bor-main", node="node2")
    gpus = lines.index("gpus: 4")
    assert lines[gpus + 1:gpus + 3] == [f"  - device_lab: {', '.join(NODE2_LAB)}", "  - device_student: none on node2"]
    assert section(lines, "messages for the admin") == ["device group 'device_student' has no GPUs on node2"]
    assert "placement: node1, node2 (from DEPLOYMENT_NODES; allowed: node1, node2, node3)" in lines
    assert "packages: htop nano" in lines


def test_no_gpu_means_none_never_all():
    ccc = deep_merge(sample_ccc("node1"), {"user_types": {"researcher": {"allowed_device_groups": []}}})
    lines = plan_lines(ccc=ccc)
    assert "gpus: none (NVIDIA_VISIBLE_DEVICES=void)" in lines
    assert not [line for line in lines if line.startswith("  - device_")]


def test_a_container_placed_elsewhere_is_removed_here_without_a_spec():
    lines = plan_lines(node="node2")
    assert lines == [
        f"container: ana-main (user {ANA})",
        "node: node2",
        "action: remove from this node (placed on node1)",
        "placement: node1 (from the user type's default_nodes; allowed: node1, node2, node3)",
        "settings: no settings file yet: the admin's values apply",
    ]


def test_the_users_file_moves_the_container_and_the_plan_says_so():
    lines = plan_lines(settings={"DEPLOYMENT_NODES": ["node2", "node3"]})
    assert "action: remove from this node (placed on node2, node3)" in lines
    assert "placement: node2, node3 (from the user's settings; allowed: node1, node2, node3)" in lines


def test_a_rejected_file_lists_the_users_messages():
    lines = plan_lines(stack="cene-thesis", settings={"DEPLOYMENT_NODES": ["node1"]})
    assert "settings: the user's settings file is REJECTED (see the messages for the user)" in lines
    assert section(lines, "messages for the user") == [
        "Your settings were NOT applied; the administrator's defaults are used.",
        "DEPLOYMENT_NODES: you may not use node 'node1'; allowed: node3",
    ]
    assert "placement: node3 (from the user type's default_nodes; allowed: node3)" in lines


def test_disabled_with_purge_says_what_is_deleted_and_what_is_kept():
    ccc = sample_ccc("node1")
    ccc["containers"][0].update(DISABLED=True, PURGE_USER_DATA=True)
    lines = plan_lines(ccc=ccc)
    assert "action: remove from this node (DISABLED by the administrators)" in lines
    assert ("data: PURGE_USER_DATA deletes this stack's data, but not its home folder ana-main:"
            " another active container uses it") in lines  # ana-jupyter shares STORAGE_NAME ana-main


def test_an_invalid_admin_record_holds_and_quotes_the_bad_value():
    ccc = sample_ccc("node1")
    ccc["containers"][0]["USER_TYPE"] = "wizard-" + "x" * 500
    lines = plan_lines(ccc=ccc)
    assert lines[:4] == [
        "container: ana-main",
        "node: node1",
        "action: hold: change nothing here (the admin configuration of this container is invalid)",
        "placement: none",
    ]
    (message,) = section(lines, "messages for the admin")
    assert message == f"ana-main: USER_TYPE {ccc_quote.quote_value('wizard-' + 'x' * 500)} is not defined in ccc:user_types"
    assert "… (507 characters)" in message and "'wizard-xxx" in message and len(message) < 200


def test_privileged_and_docker_access_are_spelled_out():
    ccc = sample_ccc("node1")
    ccc["containers"][0].update(RUN_PRIVILEGED=True, ENABLE_DOCKER_ACCESS=True)
    lines = plan_lines(ccc=ccc)
    assert "security: PRIVILEGED (RUN_PRIVILEGED): no hardening, seccomp unconfined" in lines
    assert "docker access: the node's Docker socket, group docker=998" in lines
    assert "/var/run/docker.sock -> /var/run/docker.sock" in section(lines, "mounts")
    assert "packages: docker-ce-cli" in lines
    assert "repositories: https://download.docker.com/linux/ubuntu stable" in lines


def test_the_displayed_json_copy_reads_the_same():
    resolution = resolve(stack="bor-main")
    assert ccc_report.plan_text(json.loads(json.dumps(resolution))) == ccc_report.plan_text(resolution)


def test_hostile_messages_stay_on_their_line():
    resolution = resolve()
    resolution["user_messages"] = ["bad\nsettings: your settings file was accepted", "tab\there\x1b[2J"]
    lines = ccc_report.plan_text(resolution).splitlines()
    assert section(lines, "messages for the user") == [
        "bad\\nsettings: your settings file was accepted", "tab\\there\\x1b[2J"]
    assert not [line for line in lines if line.startswith("settings: your")]
