"""The frp_client role rendered for sample node1 (masterless salt-call against sample-pillar/, its
DEMO-key GPG secrets, nothing applied) and ``test=True`` against node1's private test dockerd: an
frpc container per watched network, with its secrets asked for by pillar key only, and what an
admin is told when the token is missing."""

import json

import pytest

from support import site

pytestmark = pytest.mark.docker
LAB, STUDENT = "frp-lab-client-service", "frp-student-client-service"


def _args(state):
    return {k: v for item in state[next(k for k in state if not k.startswith("__"))] if isinstance(item, dict)
            for k, v in item.items()}


@pytest.fixture(scope="module")
def salt(tmp_path_factory, node1_dockerd):
    tmp = tmp_path_factory.mktemp("frp-client-render")
    extra = {"cluster": {"networks": site.network_overrides("node1")}}
    return site.SaltNode(tmp / "work", "node1", node1_dockerd.url, tmp / "storage", extra_ccc=extra)


def test_one_frpc_per_network_with_secrets_by_key_and_nothing_secret_rendered(salt):
    rendered, _ = salt.salt_call("state.show_sls", "cluster.frp_client")
    assert sorted(rendered) == ["ccc-cluster-frp_client-container-" + LAB, "ccc-cluster-frp_client-container-" + STUDENT,
                                "ccc-cluster-frp_client-haproxy", "ccc-cluster-frp_client-log-dir",
                                "ccc-cluster-frp_client-prune"]
    lab = _args(rendered["ccc-cluster-frp_client-container-" + LAB])["spec"]
    assert lab["docker_api"] == "frpc" and "docker.sock" not in json.dumps(lab["binds"])
    assert lab["env"]["FRPC_PREFIX"] == "node1" and lab["env"]["FRPC_NETWORK"] == "lab-unrestricted"
    assert lab["env"]["FRPC_SERVER_PORT"] == "7000" and lab["env"]["FRPC_LOGFILE"] == "/var/log/frpc/lab.log"
    assert lab["secret_env"]["FRPC_AUTH_TOKEN"] == ["frp", "token"]
    assert lab["secret_env"]["FRP_CCC_MONITOR_PASSWORD"] == ["basic_auth", "monitor", "password"]  # in the sample secrets
    assert _args(rendered["ccc-cluster-frp_client-prune"])["keep"] == [LAB, STUDENT]
    text = json.dumps(rendered)
    assert "demo-frp-token" not in text and "PGP" not in text and "demo-monitor" not in text


def test_dry_run_says_what_would_be_created_and_a_missing_token_fails_clearly(salt):
    output, _ = salt.salt_call("state.apply", "cluster.frp_client", "test=True", check=False)
    results = {key.split("_|-")[1]: value for key, value in output.items()}
    for name in (LAB, STUDENT):
        state = results["ccc-cluster-frp_client-container-" + name]
        assert state["result"] is None, state
        assert state["comment"] == f"{name} would be created once image lukacu/frpc:latest is pulled"
    assert "demo-frp-token" not in json.dumps(output)

    salt.write_pillar(dict(salt.extra_ccc, secrets={"frp": None}))
    output, _ = salt.salt_call("state.apply", "cluster.frp_client", "test=True", check=False)
    state = output[next(key for key in output if LAB in key)]
    assert state["result"] is False
    assert state["comment"].startswith("secret ccc:secrets:frp:token is not in this node's pillar")
