"""USER_PUBKEY_FROM_GITHUB keys are fetched once per login and run, and again only when the node's
copy is ``ccc:cluster:github_keys_max_age`` old (issue 21: every run fetched every container's
keys, one request after another, and a lab's reconciles run into GitHub's rate limit). GitHub is
a real HTTP server on localhost here that counts the requests it answers."""

import http.server
import os
import pathlib
import threading
import time

import pytest

from support.site import deep_merge, node_local, sample_ccc, storage_overrides

import ccc_keys
import ccc_pillar
import ccc_plan
import ccc_resolver

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeSampleKeyForAnaOnly0000000000000000000 ana@laptop"
ANA = "ana.novak@example.org"
IMAGE = "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1"


@pytest.fixture
def github():
    """``(url template, {login: requests answered})`` of a local stand-in for github.com."""
    asked = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the http.server interface
            login = self.path.strip("/").removesuffix(".keys")
            asked[login] = asked.get(login, 0) + 1
            body = f"{KEY}\n".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/{{login}}.keys", asked
    server.shutdown()
    server.server_close()


UNSET = object()


def keys_for(url, cache, max_age=UNSET):
    cluster = {"github_keys_url": url} if max_age is UNSET else {"github_keys_url": url, "github_keys_max_age": max_age}
    return ccc_keys.github_keys_for(cluster, True, str(cache))


def test_a_login_is_fetched_once_per_run_and_again_only_when_its_copy_is_old(github, tmp_path):
    url, asked = github
    cache = tmp_path / "github-keys"
    first = keys_for(url, cache)
    assert [first("ana-gh") for _ in range(3)] == [([KEY], None)] * 3
    assert asked == {"ana-gh": 1}

    assert keys_for(url, cache)("ana-gh") == ([KEY], None)  # the next run, within the default 600 s
    assert asked == {"ana-gh": 1}
    assert keys_for(url, cache)("bor-gh") == ([KEY], None)  # a new login: at once
    assert asked == {"ana-gh": 1, "bor-gh": 1}

    copy = cache / "ana-gh.keys"
    os.utime(copy, (time.time() - 601, time.time() - 601))
    assert keys_for(url, cache)("ana-gh") == ([KEY], None)
    assert asked == {"ana-gh": 2, "bor-gh": 1}
    os.utime(copy, (time.time() + 3600, time.time() + 3600))  # dated ahead: the clock went back
    keys_for(url, cache)("ana-gh")
    assert asked == {"ana-gh": 3, "bor-gh": 1}

    every_run = [keys_for(url, cache, max_age=0) for _ in range(2)]
    assert [run("ana-gh") for run in every_run for _ in range(2)] == [([KEY], None)] * 4
    assert asked == {"ana-gh": 5, "bor-gh": 1}


@pytest.mark.parametrize("value", [-1, "600", True, None, [600]])
def test_a_bad_max_age_gives_the_default_and_the_admins_message(github, tmp_path, value):
    url, asked = github
    keys = keys_for(url, tmp_path, max_age=value)
    assert keys.max_age == 600
    assert keys.problem == (f"ccc:cluster:github_keys_max_age must be a number of seconds (0 or more), got {value!r}; "
                            "using 600")
    assert keys("ana-gh") == ([KEY], None)


def test_a_run_over_many_containers_of_one_login_fetches_once_and_tells_the_admin_of_a_bad_setting(github, tmp_path):
    url, asked = github
    root = tmp_path / "storage"
    ccc = deep_merge(sample_ccc("node1"), {"cluster": dict(storage_overrides(root), github_keys_url=url,
                                                            github_keys_max_age="soon"),
                                           "node": node_local(root, "node1")})
    ccc["containers"] += [{"STACK_NAME": f"gh-{index}", "USER_EMAIL": ANA, "CONTAINER_IMAGE": IMAGE,
                           "USER_PUBKEY_FROM_GITHUB": "ana-gh"} for index in range(5)]
    facts = ccc_plan.node_facts(ccc, "node1", clients=None, pull=False, fetch=True)
    facts = ccc_resolver.NodeFacts("node1", docker_gid=998, host_timezone_files=["/etc/localtime"],
                                   image_lookup=lambda ref, credentials: ({"id": "sha256:x", "labels": {}}, None),
                                   github_keys=facts.github_keys)
    inputs = ccc_plan.Inputs(ccc=ccc, cluster=ccc_pillar.cluster_settings(ccc), node=ccc_pillar.node_settings(ccc, "node1"),
                             facts=facts, stored={}, notices={})
    planned = [ccc_plan.plan(inputs, f"gh-{index}") for index in range(5)]
    assert [KEY in p["spec"]["environment"]["USER_PUBKEY"] for p in planned] == [True] * 5
    assert asked == {"ana-gh": 1}
    message = "ccc:cluster:github_keys_max_age must be a number of seconds (0 or more), got 'soon'; using 600"
    assert all(p["notes"].count(message) == 1 for p in planned), planned[0]["notes"]
    copy = pathlib.Path(inputs.node["state_dir"]) / "github-keys" / "ana-gh.keys"  # the node's own copy
    assert copy.is_relative_to(tmp_path) and copy.read_text() == KEY + "\n"
