"""The role-container rules (``ccc_service_containers``): a spec checked and filled, the secret env
wrapped around the image's entrypoint, the env file a shell reads back, what ``docker inspect``
must show, and the differences an admin is told (names only, never values)."""

import subprocess

import pytest

import support.site  # noqa: F401  (puts _utils on the path)

import ccc_service_containers as svc  # noqa: E402

IMAGE_CONFIG = {"Entrypoint": ["/usr/bin/frpc-init"], "Cmd": ["run"], "Env": ["PATH=/usr/bin", "FRPC_LOG_LEVEL=warn"],
                "Labels": {"maintainer": "x"}, "ExposedPorts": {"7400/tcp": {}}}


def spec(**extra):
    return svc.normalize({"name": "frp-lab", "image": "lukacu/frpc:latest", "role": "frp_client", **extra})


def test_defaults_are_filled_and_mistakes_are_named():
    made = spec()
    assert made["restart"] == "always" and made["networks"] == [] and made["secret_env"] == {}
    assert made["privileged"] is False and made["pid_mode"] is None
    with pytest.raises(svc.BadSpec, match="unknown container spec keys: volumes"):
        spec(volumes=[])
    with pytest.raises(svc.BadSpec, match="frp-lab: env: value of PORT must be a string, not int"):
        spec(env={"PORT": 7000})
    with pytest.raises(svc.BadSpec, match="FRPC_AUTH_TOKEN in both env and secret_env"):
        spec(env={"FRPC_AUTH_TOKEN": "x"}, secret_env={"FRPC_AUTH_TOKEN": ["frp", "token"]})
    with pytest.raises(svc.BadSpec, match="restart must be one of always, unless-stopped"):
        spec(restart="no")
    with pytest.raises(svc.BadSpec, match="device_ids or a count, not both"):
        spec(device_requests=[{"device_ids": ["0"], "count": -1}])


def test_secret_env_wraps_the_image_entrypoint_and_binds_the_file_read_only():
    made = spec(secret_env={"FRPC_AUTH_TOKEN": ["frp", "token"]})
    want = svc.wanted(made, IMAGE_CONFIG)
    assert want["entrypoint"] == svc.WRAPPER
    assert want["cmd"] == ["/usr/bin/frpc-init", "run"]
    assert {"source": "/etc/ccc-salt/secrets/containers/frp-lab.env", "target": "/run/ccc-secrets/env",
            "read_only": True} in want["binds"]
    assert "FRPC_AUTH_TOKEN" not in want["env"] and want["env"]["FRPC_LOG_LEVEL"] == "warn"
    own = svc.wanted(spec(command=["sleep", "1d"], secret_env={"T": ["frp", "token"]}), IMAGE_CONFIG)
    assert own["cmd"] == ["/usr/bin/frpc-init", "sleep", "1d"]
    with pytest.raises(svc.BadSpec, match="has no entrypoint or command to run"):
        svc.wanted(spec(secret_env={"T": ["frp", "token"]}), {})


def test_inline_secret_env_goes_into_the_env_without_a_wrapper():
    made = spec(secret_env={"AGENT_SECRET": ["portainer", "agent_secret"]}, secret_env_inline=True)
    want = svc.wanted(made, IMAGE_CONFIG, {"AGENT_SECRET": "s3cret"})
    assert want["entrypoint"] == ["/usr/bin/frpc-init"] and want["cmd"] == ["run"]
    assert want["env"]["AGENT_SECRET"] == "s3cret"
    assert not [b for b in want["binds"] if b["target"] == svc.ENV_TARGET]


def test_the_env_file_reads_back_in_a_real_shell_with_awkward_values():
    values = {"A": "it's $HOME `x` \"q\"", "B": "line1\nline2", "C": "a=b;c"}
    text = svc.env_file_text(values)
    assert svc.env_file_values(text) == values
    shown = subprocess.run(["/bin/sh", "-c", 'set -a; . /dev/stdin; set +a; printf "%s|%s|%s" "$A" "$B" "$C"'],
                           input=text, capture_output=True, text=True, check=True).stdout
    assert shown == "|".join(values[key] for key in "ABC")
    assert svc.changed_keys(svc.env_file_values(text), {**values, "B": "other"}) == ["B"]


def _attrs(want, **over):
    """What ``docker inspect`` shows for a container created from ``want`` (as the engine merges it)."""
    kwargs = svc.create_kwargs(want)
    host = kwargs["host_config"]
    attrs = {
        "Id": "abcdef1234567890", "Name": "/" + want["name"], "Image": "sha256:1",
        "State": {"Running": True},
        "Config": {"Image": want["image"], "Env": kwargs["environment"], "Labels": dict(want["labels"]),
                   "Entrypoint": want["entrypoint"], "Cmd": want["cmd"], "Hostname": want["hostname"] or "abcdef123456",
                   "ExposedPorts": {key: {} for key in want["exposed"]}},
        "HostConfig": {**host, "PidMode": host.get("PidMode", ""), "LogConfig": {"Type": "json-file", "Config": {}}},
        "NetworkSettings": {"Networks": {net["name"]: {"Aliases": net["aliases"] + ["abcdef123456"]}
                                         for net in want["networks"]}},
    }
    for key, value in over.items():
        section, _, field = key.partition("__")
        attrs[section][field] = value
    return attrs


def test_a_container_made_from_the_spec_has_no_differences_and_each_change_is_named():
    made = spec(env={"FRPC_NETWORK": "lab"}, networks=[{"name": "lab", "aliases": ["frpc"]}, "claims"],
                binds=[{"source": "/var/log/frpc", "target": "/var/log/frpc", "read_only": False}], docker_api="frpc",
                ports={"9001/tcp": ["127.0.0.1", 9001]}, device_requests=[{"device_ids": ["0", "1"]}],
                secret_env={"FRPC_AUTH_TOKEN": ["frp", "token"]}, extra_hosts={"gw": "10.0.0.1"})
    want = svc.wanted(made, IMAGE_CONFIG)
    assert svc.differences(_attrs(want), want, "sha256:1") == []
    assert svc.differences(_attrs(want), want, "sha256:2") == ["image lukacu/frpc:latest -> lukacu/frpc:latest"]
    env = [item for item in svc.create_kwargs(want)["environment"] if not item.startswith("FRPC_NETWORK=")]
    assert svc.differences(_attrs(want, Config__Env=env + ["FRPC_NETWORK=old"]), want) == ["env FRPC_NETWORK"]
    assert "/run/ccc-docker-api/frp-lab.sock:/var/run/docker.sock:ro" in svc.create_kwargs(want)["host_config"]["Binds"]
    raw = ["/var/log/frpc:/var/log/frpc:rw", "/var/run/docker.sock:/var/run/docker.sock:ro",
           "/etc/ccc-salt/secrets/containers/frp-lab.env:/run/ccc-secrets/env:ro"]
    assert svc.differences(_attrs(want, HostConfig__Binds=raw), want) == ["binds"]  # an older frpc: recreated
    assert svc.differences(_attrs(want, NetworkSettings__Networks={"lab": {"Aliases": ["frpc"]}}), want) == [
        "networks lab -> lab, claims"]
    assert svc.differences(_attrs(want, HostConfig__DeviceRequests=[]), want) == ["devices"]
    assert svc.differences(_attrs(want, HostConfig__PidMode="host"), want) == ["pid mode host -> private"]


def test_an_inline_secret_change_is_named_without_its_value():
    made = spec(secret_env={"AGENT_SECRET": ["portainer", "agent_secret"]}, secret_env_inline=True)
    old = svc.wanted(made, IMAGE_CONFIG, {"AGENT_SECRET": "old-value"})
    new = svc.wanted(made, IMAGE_CONFIG, {"AGENT_SECRET": "new-value"})
    found = svc.differences(_attrs(old), new, secret_keys={"AGENT_SECRET"})
    assert found == ["secret AGENT_SECRET changed"]
    assert "value" not in " ".join(found)


def test_create_kwargs_give_the_first_network_with_aliases_and_connect_the_rest_later():
    made = spec(networks=[{"name": "claims", "aliases": ["claims", "reservation"]}, {"name": "lab"}],
                pid_mode="host", log_config={"type": "json-file", "config": {"max-size": "10m"}}, restart="unless-stopped")
    kwargs = svc.create_kwargs(svc.wanted(made, IMAGE_CONFIG))
    assert kwargs["host_config"]["NetworkMode"] == "claims"
    assert kwargs["networking_config"] == {"EndpointsConfig": {"claims": {"Aliases": ["claims", "reservation"]}}}
    assert kwargs["host_config"]["PidMode"] == "host"
    assert kwargs["host_config"]["LogConfig"] == {"Type": "json-file", "Config": {"max-size": "10m"}}
    assert kwargs["host_config"]["RestartPolicy"]["Name"] == "unless-stopped"
    assert kwargs["labels"]["ccc.cluster-role"] == "frp_client"
    assert svc.later_networks(svc.wanted(made, IMAGE_CONFIG)) == [{"name": "lab", "aliases": []}]


def test_ours_means_the_role_label_or_a_former_one():
    made = spec(former_roles=["docker-portainer-agent"])
    assert svc.is_ours({"Config": {"Labels": {"ccc.cluster-role": "frp_client"}}}, made)
    assert svc.is_ours({"Config": {"Labels": {"ccc.cluster-role": "docker-portainer-agent"}}}, made)
    assert not svc.is_ours({"Config": {"Labels": {}}}, made)
    assert not svc.is_ours({"Config": {"Labels": {"ccc.cluster-role": "patroller"}}}, made)


def test_an_alias_equal_to_the_containers_own_name_is_no_difference():
    """Docker lists the container's name among its aliases on every network; asking for it as an
    alias too (``claims`` named ``claims``) must not recreate the container on every run."""
    made = spec(name="claims", networks=[{"name": "claims", "aliases": ["claims", "reservation"]}])
    want = svc.wanted(made, IMAGE_CONFIG)
    attrs = _attrs(want)
    attrs["NetworkSettings"]["Networks"]["claims"]["Aliases"] = ["claims", "reservation", "abcdef123456"]
    assert svc.differences(attrs, want) == []
    attrs["NetworkSettings"]["Networks"]["claims"]["Aliases"] = ["claims", "abcdef123456"]
    assert svc.differences(attrs, want) == ["aliases on claims"]
