"""Hostile settings files cost little and say little: every worst case of bench/settings_cost.py
is refused within a time budget with few, short messages and a bounded ``.deploy`` report; user
values are quoted by one helper; apt sources must be signed https/ppa; the last accepted settings
are re-checked against today's rules; every node a container may use reserves its subdomains."""

import importlib.util
import json
import pathlib
import time

import jsonschema
import pytest
import yaml

from support.site import deep_merge, sample_ccc

import ccc_pillar  # noqa: E402
import ccc_resolver  # noqa: E402
import ccc_subdomains  # noqa: E402
import ccc_report  # noqa: E402
import ccc_schema  # noqa: E402
import ccc_settings_file  # noqa: E402
import ccc_quote  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
STACK = "ana-main"
GiB = 1024 ** 3
ADMIN_IMAGE = "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1"
BUDGET_S = 0.5  # per file, generous for slow CI; bench/settings_cost.py measures the real figure
LONGEST_MESSAGE = 2 * ccc_quote.QUOTE_CHARS + 200


def _bench():
    spec = importlib.util.spec_from_file_location("settings_cost", REPO / "bench" / "settings_cost.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


WORST_CASES = _bench().worst_cases()


def resolve(stack=STACK, ccc=None, node="node1", settings=None, last_good=None, taken=None):
    ccc = ccc or sample_ccc(node)
    text = settings if settings is None or isinstance(settings, str) else yaml.safe_dump({stack: settings})
    facts = ccc_resolver.NodeFacts(node, compute_devices=(ccc.get("node") or {}).get("compute_devices"),
                                     docker_gid=998)
    return ccc_resolver.resolve_container(ccc, stack, facts, settings_text=text, last_good=last_good, taken=taken)


# ------------------------------------------------------------------------------------------------
# Bounded cost


@pytest.mark.parametrize("name", list(WORST_CASES))
def test_worst_case_file_is_refused_cheaply_and_briefly(name):
    text = WORST_CASES[name]
    assert len(text.encode()) <= ccc_settings_file.MAX_SETTINGS_BYTES
    ccc = sample_ccc("node1")
    taken = ccc_subdomains.taken_subdomains(ccc, {}, except_stack=STACK)
    start = time.perf_counter()
    result = resolve(ccc=ccc, settings=text, last_good={"SHM_SIZE": "4g"}, taken=taken)
    report, _ = ccc_report.feedback_report(result, "running, unchanged", "2026-01-01 00:00:00")
    elapsed = time.perf_counter() - start
    assert elapsed < BUDGET_S, f"{name}: {elapsed:.3f} s"
    assert result["settings_status"] == "rejected"
    assert result["spec"]["shm_size"] == 4 * GiB  # the last accepted settings are kept
    messages = result["user_messages"]
    assert "NOT applied" in messages[0]
    assert len(messages) <= 1 + ccc_quote.MAX_PROBLEMS + 1
    assert max(map(len, messages)) <= LONGEST_MESSAGE, messages
    assert len(report.encode()) <= 2048


def test_the_issue_file_is_refused_by_the_value_count_before_anything_is_built():
    with pytest.raises(ccc_settings_file.SettingsError, match=r"more than 1024 values .*line 2"):
        ccc_settings_file.parse_settings_text(WORST_CASES["tcp-mixed-64k-flow"], STACK)


@pytest.mark.parametrize("section, fragment", [
    pytest.param({"FRP_PORTS": {"TCP": list(range(1, 18))}}, "FRP_PORTS.TCP: the list is too long (17 items; at most 16)",
                 id="tcp"),
    pytest.param({"FRP_PORTS": {"HTTP": [{"port": 80 + i, "subdomain": f"s{i}"} for i in range(17)]}},
                 "FRP_PORTS.HTTP: the list is too long (17 items; at most 16)", id="http"),
    pytest.param({"DEPLOYMENT_NODES": [f"n{i}" for i in range(65)]}, "DEPLOYMENT_NODES: the list is too long", id="nodes"),
    pytest.param({"USER_NAME": "a" * 33}, "USER_NAME: the value 'aaaa", id="user-name"),
    pytest.param({"FRP_PORTS": {"HTTP": [{"port": 80, "subdomain": "s" * 64}]}}, "subdomain: the value", id="subdomain"),
    pytest.param({"INSTALL_PACKAGES": "a" * 5000}, "(5000 characters) is too long (at most 4096 characters)", id="packages"),
])
def test_size_limits_come_from_the_schema_and_are_checked_first(section, fragment):
    problems = ccc_schema.validate_user_settings(section, STACK, {})
    assert len(problems) == 1 and fragment in problems[0], problems


def test_every_list_and_string_in_the_schema_is_bounded():
    def walk(schema, path):
        if schema.get("type") == "array":
            assert "maxItems" in schema, path
        if schema.get("type") == "string" and "enum" not in schema:
            assert "maxLength" in schema, path
        for key in ("items", "additionalProperties"):
            if isinstance(schema.get(key), dict):
                walk(schema[key], f"{path}.{key}")
        for name, sub in (schema.get("properties") or {}).items():
            walk(sub, f"{path}.{name}")
        for index, sub in enumerate(schema.get("oneOf") or []):
            walk(sub, f"{path}.oneOf{index}")

    walk(ccc_schema.USER_SETTINGS_SCHEMA, "")


def test_many_problems_are_capped_with_a_count():
    problems = ccc_schema.validate_user_settings({f"K{i}": i for i in range(40)}, STACK, {})
    assert len(problems) == ccc_quote.MAX_PROBLEMS + 1
    assert problems[-1] == "… and 35 more problems"


@pytest.mark.parametrize("text, fragment", [
    pytest.param(f"{STACK}:\n  SHM_SIZE: {'1' * 5000}\n", "a value cannot be read", id="int-too-long"),
    pytest.param(f"{STACK}:\n  SHM_SIZE: 2001-13-45\n", "a value cannot be read", id="bad-timestamp"),
    pytest.param(f"{STACK}: " + "[" * 20 + "\n", "nested too deeply (more than 8 levels)", id="deep"),
    pytest.param(f"{STACK}: " + "[" * 5000 + "\n", "nested too deeply", id="deeper-than-libyaml-allows"),
    pytest.param("x: &x {SHM_SIZE: 4g}\n" + f"{STACK}: *x\n", "aliases (*name) are not allowed", id="alias"),
])
def test_unreadable_values_are_settings_errors_not_crashes(text, fragment):
    with pytest.raises(ccc_settings_file.SettingsError) as raised:
        ccc_settings_file.parse_settings_text(text, STACK)
    assert fragment in str(raised.value)
    assert len(str(raised.value)) <= LONGEST_MESSAGE


def test_other_top_level_keys_are_quoted_and_counted():
    text = "".join(f"k{i}: 1\n" for i in range(8)) + "z" * 300 + ": 1\n"
    with pytest.raises(ccc_settings_file.SettingsError) as raised:
        ccc_settings_file.parse_settings_text(text, STACK)
    assert str(raised.value) == (
        f"only the key '{STACK}:' may appear at the top level; found 'k0', 'k1', 'k2', 'k3', 'k4' and 4 more"
    )


# ------------------------------------------------------------------------------------------------
# Quoting user values


@pytest.mark.parametrize("value, expected", [
    pytest.param("ana", "'ana'", id="short-string"),
    pytest.param("x" * 80, repr("x" * 80), id="exactly-the-limit"),
    pytest.param("x" * 81, repr("x" * 80) + "… (81 characters)", id="one-over"),
    pytest.param("é" * 1000, repr("é" * 80) + "… (1000 characters)", id="counts-characters"),
    pytest.param(22, "22", id="number"),
    pytest.param(["a", 1], "['a', 1]", id="short-list"),
])
def test_quote_value(value, expected):
    assert ccc_quote.quote_value(value) == expected


def test_quote_value_bounds_any_value():
    for value in ("a\n" * 10_000, list(range(10_000)), {str(i): i for i in range(1000)}, b"\x00" * 10_000, 10 ** 4000):
        quoted = ccc_quote.quote_value(value)
        assert len(quoted) <= 4 * ccc_quote.QUOTE_CHARS + 40, quoted
        assert "…" in quoted and "characters)" in quoted


def test_messages_quote_long_values_once_with_their_length():
    image = "vicoslab/cc" + "c" * 200  # matches the schema's pattern, outside the image policy
    problems = ccc_schema.validate_user_settings({"CONTAINER_IMAGE": image}, STACK, {"image_prefixes": ["x/"]})
    assert problems == [
        f"CONTAINER_IMAGE: {ccc_quote.quote_value(image)} is not allowed; images must start with one of: x/"
    ]
    assert "(211 characters)" in problems[0]


# ------------------------------------------------------------------------------------------------
# The .deploy report


def test_report_is_bounded_and_says_what_was_left_out():
    resolution = {"stack": STACK, "node": "node1", "placement": ["node1"], "settings_status": "rejected",
                  "user_messages": [f"message {i}: " + "m" * 300 for i in range(100)]}
    text, body = ccc_report.feedback_report(resolution, "running, unchanged", "2026-01-01 00:00:00 UTC")
    assert len(text.encode()) <= ccc_report.MAX_REPORT_BYTES
    assert "message 0: " in body
    shown = body.count("  - message ")
    assert 10 < shown < 100
    assert body.endswith(f"  - … {100 - shown} more message(s) not shown: this report is limited to 8 KiB\n")


def test_report_bound_holds_for_one_huge_message():
    resolution = {"stack": STACK, "node": "node1", "placement": [], "user_messages": ["é" * 100_000]}
    text, _ = ccc_report.feedback_report(resolution, "held", "2026-01-01 00:00:00 UTC")
    assert len(text.encode()) <= ccc_report.MAX_REPORT_BYTES
    assert "1 more message(s) not shown" in text


def test_short_report_is_unchanged_by_the_bound():
    resolution = {"stack": STACK, "node": "node1", "placement": ["node1"], "user_messages": ["one", "two"]}
    _, body = ccc_report.feedback_report(resolution, "running, unchanged", "now")
    assert body == "container: ana-main\nnode: node1\nresult: running, unchanged\nplacement: node1\nmessages:\n  - one\n  - two\n"


# ------------------------------------------------------------------------------------------------
# apt repository sources


@pytest.mark.parametrize("sources, fragment", [
    pytest.param("deb [trusted=yes] https://x.example stable main", "'trusted=yes' turns off apt's signature checks",
                 id="trusted-yes"),
    pytest.param("deb [Trusted=yes] https://x.example stable main", "'Trusted=yes' turns off", id="trusted-case"),
    pytest.param("deb [trusted=no] https://x.example stable main", "'trusted=no' turns off", id="any-trusted"),
    pytest.param("deb [arch=amd64 allow-insecure=yes] https://x.example s m", "'allow-insecure=yes' turns off",
                 id="allow-insecure"),
    pytest.param("deb [allow-weak=yes] https://x.example s m", "'allow-weak=yes' turns off", id="allow-weak"),
    pytest.param("deb [allow-downgrade-to-insecure=yes] https://x.example s m", "'allow-downgrade-to-insecure=yes'",
                 id="allow-downgrade"),
    pytest.param("deb [check-valid-until=no] https://x.example s m", "'check-valid-until=no' is not allowed; allowed:",
                 id="unknown-option"),
    pytest.param("deb http://x.example stable main", "the source 'deb http://x.example stable main' is not allowed;"
                 " sources must be https:// URLs or ppa:owner/name (plain http:// is refused)", id="http-deb"),
    pytest.param("ppa:a/b,http://x.example/ubuntu jammy main", "'http://x.example/ubuntu jammy main'", id="http-bare"),
    pytest.param("deb ftp://x.example stable main", "must be https://", id="ftp"),
])
def test_insecure_sources_are_refused_with_the_reason(sources, fragment):
    problems = ccc_schema.validate_user_settings({"INSTALL_REPOSITORY_SOURCES": sources}, STACK, {})
    assert problems and all(p.startswith("INSTALL_REPOSITORY_SOURCES: ") for p in problems)
    assert any(fragment in problem for problem in problems), problems
    shipped = json.loads((REPO / "schema" / "container-settings.schema.json").read_text())
    with pytest.raises(jsonschema.ValidationError):  # editors see the same policy
        jsonschema.validate({STACK: {"INSTALL_REPOSITORY_SOURCES": sources}}, shipped)


@pytest.mark.parametrize("sources", [
    "ppa:deadsnakes/ppa",
    "deb https://download.docker.com/linux/ubuntu jammy stable",
    "https://x.example/ubuntu jammy main",
    "deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] https://x.example/ubuntu jammy main,ppa:a/b",
    "deb [arch+=i386 lang=en target=Contents-deb pdiffs=no by-hash=yes] https://x.example s m",
])
def test_signed_https_and_ppa_sources_are_accepted(sources):
    assert ccc_schema.validate_user_settings({"INSTALL_REPOSITORY_SOURCES": sources}, STACK, {}) == []


def test_repository_keys_still_need_https():
    problems = ccc_schema.validate_user_settings({"INSTALL_REPOSITORY_KEYS": "http://x.example/k.gpg"}, STACK, {})
    assert problems == ["INSTALL_REPOSITORY_KEYS: the value 'http://x.example/k.gpg' is not allowed here"]


def test_admin_sources_obey_the_same_policy():
    ccc = sample_ccc("node1")
    ccc["containers"][0]["INSTALL_REPOSITORY_SOURCES"] = "deb [trusted=yes] http://x.example s m"
    result = resolve(ccc=ccc)
    assert result["action"] == "hold"
    assert any("trusted=yes" in error for error in result["admin_errors"]), result["admin_errors"]


# ------------------------------------------------------------------------------------------------
# Last accepted settings, re-checked against today's rules


@pytest.mark.parametrize("last_good, dropped, fragment", [
    pytest.param({"CONTAINER_IMAGE": "evil.example.com/miner:1"}, "CONTAINER_IMAGE",
                 "CONTAINER_IMAGE: 'evil.example.com/miner:1' is not allowed", id="image-policy"),
    pytest.param({"SHM_SIZE": "64g"}, "SHM_SIZE", "SHM_SIZE: '64g' is more than the cluster maximum of 32g", id="shm"),
    pytest.param({"DEPLOYMENT_NODES": ["node1", "gone"]}, "DEPLOYMENT_NODES", "you may not use node 'gone'", id="node"),
    pytest.param({"FRP_PORTS": {"HTTP": [{"port": 80, "subdomain": "ana-jupyter"}]}}, "FRP_PORTS",
                 "'ana-jupyter' is already used by another container", id="subdomain-taken"),
    pytest.param({"FRP_PORTS": {"HTTP": [{"port": 80, "subdomain": "metrics"}]}}, "FRP_PORTS",
                 "-metrics' is reserved", id="subdomain-reserved"),
    pytest.param({"INSTALL_REPOSITORY_SOURCES": "deb [trusted=yes] https://x.example s m"}, "INSTALL_REPOSITORY_SOURCES",
                 "'trusted=yes' turns off", id="sources-policy"),
])
def test_rejected_file_keeps_only_last_good_keys_that_still_pass(last_good, dropped, fragment):
    ccc = sample_ccc("node1")
    taken = ccc_subdomains.taken_subdomains(ccc, {}, except_stack=STACK)
    kept = {"INSTALL_PACKAGES": "htop", "SHM_SIZE": "4g"}
    result = resolve(ccc=ccc, settings={"SHM_SIZE": "10t"}, last_good={**kept, **last_good}, taken=taken)
    assert result["settings_status"] == "rejected" and result["settings_to_store"] is None
    spec = result["spec"]
    assert spec["environment"]["INSTALL_PACKAGES"] == "htop"  # a key that still passes is kept
    assert spec["image"] == ADMIN_IMAGE and spec["environment"]["INSTALL_REPOSITORY_SOURCES"] == ""
    assert spec["shm_size"] == (8 * GiB if dropped == "SHM_SIZE" else 4 * GiB)  # admin value for a dropped key
    assert result["placement"] == ["node1"]
    assert spec["labels"].get("frp.6006.http.subdomain") == "node1-ana-tb"  # the admin's FRP_PORTS
    messages = result["user_messages"]
    assert messages[0] == "Your settings were NOT applied; the container keeps your last accepted settings."
    assert "'10t' is more than the cluster maximum" in messages[1]
    notes = [m for m in messages if m.startswith("A last accepted setting is no longer allowed")]
    assert len(notes) == 1 and fragment in notes[0], messages


def test_last_good_that_still_passes_is_kept_whole_and_silently():
    last_good = {"SHM_SIZE": "4g", "INSTALL_PACKAGES": "htop", "DEPLOYMENT_NODES": ["node1"]}
    result = resolve(settings={"SHM_SIZE": "10t"}, last_good=last_good)
    assert result["spec"]["shm_size"] == 4 * GiB
    assert len(result["user_messages"]) == 2


def test_unreadable_last_good_falls_back_to_admin_values():
    result = resolve(settings={"SHM_SIZE": "10t"}, last_good=["not", "a", "mapping"])
    assert result["spec"]["shm_size"] == 8 * GiB
    assert "cannot be read" in result["user_messages"][-1]


@pytest.mark.parametrize("settings, status", [
    pytest.param({"SHM_SIZE": "2g"}, "applied", id="accepted-file-wins"),
    pytest.param(None, "missing", id="missing-file-means-admin-defaults"),
])
def test_last_good_is_not_used_unless_the_file_is_rejected(settings, status):
    result = resolve(settings=settings, last_good={"SHM_SIZE": "64g"})
    assert result["settings_status"] == status
    assert result["spec"]["shm_size"] == (2 if settings else 8) * GiB
    assert not [m for m in result["user_messages"] if "last accepted" in m]


# ------------------------------------------------------------------------------------------------
# Nodes granted through ALLOWED_NODES / DEPLOYMENT_NODES reserve their subdomains


def extra_node_site():
    """cene-thesis may also use gpu9 (ALLOWED_NODES only) and ana-main lists gpu8 in DEPLOYMENT_NODES."""
    ccc = sample_ccc("node1")
    records = {entry["STACK_NAME"]: entry for entry in ccc["containers"]}
    records["cene-thesis"]["ALLOWED_NODES"] = ["gpu9"]
    records["ana-main"]["DEPLOYMENT_NODES"] = ["node1", "gpu8"]
    return ccc


def test_cluster_nodes_include_allowed_and_deployment_nodes_of_containers():
    nodes = ccc_pillar.cluster_nodes(extra_node_site())
    assert nodes[:3] == ["node3", "node1", "node2"]  # the user types' nodes first, as before
    assert {"gpu8", "gpu9"} <= set(nodes)
    assert len(nodes) == len(set(nodes))


def test_user_record_allowed_nodes_count_too():
    ccc = deep_merge(sample_ccc("node1"), {"users": {"bor.kralj@example.org": {"ALLOWED_NODES": ["gpu7"]}}})
    assert "gpu7" in ccc_pillar.cluster_nodes(ccc)


@pytest.mark.parametrize("subdomain, fragment", [
    pytest.param("gpu9-metrics", "'gpu9-metrics' is reserved for cluster services", id="reserved-allowed-node"),
    pytest.param("gpu8-monitor", "'gpu8-monitor' is reserved for cluster services", id="reserved-deployment-node"),
    pytest.param("gpu9-ana-tb", "is already used by another container", id="taken-on-allowed-node"),
])
def test_subdomains_of_extra_nodes_are_reserved_and_taken(subdomain, fragment):
    ccc = extra_node_site()
    taken = ccc_subdomains.taken_subdomains(ccc, {}, except_stack="bor-main")
    assert "gpu9-ana-tb" in taken and "gpu8-ana-tb" in taken
    http = {"port": 80, "subdomain": subdomain, "subdomain_hostname_prefix": False}
    result = resolve("bor-main", ccc=ccc, settings={"FRP_PORTS": {"HTTP": [http]}}, taken=taken)
    assert result["settings_status"] == "rejected"
    assert any(fragment in message for message in result["user_messages"]), result["user_messages"]


# ------------------------------------------------------------------------------------------------
# Hostile values: every message quotes at most QUOTE_CHARS of a value, with "…" and its length


def frp_http(count):
    return {"HTTP": [{"port": 1000 + i, "subdomain": f"w{i}"} for i in range(count)]}


@pytest.mark.parametrize("where", ["settings-file", "last-good", "admin-pillar"])
def test_a_thousand_frp_entries_make_one_short_message(where):
    ccc = sample_ccc("node1")
    settings, last_good = {"SHM_SIZE": "10t"}, {"SHM_SIZE": "4g"}
    if where == "settings-file":
        settings = {"FRP_PORTS": frp_http(1000)}
    elif where == "last-good":
        last_good = {"SHM_SIZE": "4g", "FRP_PORTS": frp_http(1000)}
    else:
        ccc["containers"][0]["FRP_PORTS"] = frp_http(1000)
    result = resolve(ccc=ccc, settings=yaml.safe_dump({STACK: settings}), last_good=last_good)
    report, _ = ccc_report.feedback_report(result, "running, unchanged", "2026-01-01 00:00:00 UTC")
    said = result["user_messages"] + result["admin_errors"]
    expected = "FRP_PORTS.HTTP: the list is too long (1000 items; at most 16)"
    if where == "settings-file":  # 3000 values: the parser stops before anything is built
        expected = "the file holds more than 1024 values"
    assert any(expected in message for message in said), said
    assert max(map(len, said)) <= LONGEST_MESSAGE, said
    assert len(report.encode()) <= 2048
    assert "w999" not in report and "w999" not in " ".join(said)


def test_frp_entries_under_the_value_cap_are_refused_in_one_short_line():
    result = resolve(settings={"FRP_PORTS": frp_http(200)}, last_good={"SHM_SIZE": "4g"})
    assert result["user_messages"][1:] == ["FRP_PORTS.HTTP: the list is too long (200 items; at most 16)"]


@pytest.mark.parametrize("section, start", [
    pytest.param({"INSTALL_PACKAGES": "a" * 4000 + ";"}, "INSTALL_PACKAGES: the value 'aaaa", id="packages-pattern"),
    pytest.param({"K" * 1000: 1}, "'KKKK", id="unknown-key"),
    pytest.param({"INSTALL_REPOSITORY_SOURCES": "http://x.example/" + "p" * 3000},
                 "INSTALL_REPOSITORY_SOURCES: the source 'http://x.example/ppp", id="source"),
    pytest.param({"CONTAINER_IMAGE": "vicoslab/cc" + "c" * 240}, "CONTAINER_IMAGE: 'vicoslab/cccc", id="image"),
    pytest.param({"USER_PUBKEY": "x" * 16000 + "\n"}, "USER_PUBKEY: line 1 is not an OpenSSH public key", id="pubkey"),
])
def test_long_values_are_quoted_with_their_start_and_length(section, start):
    problems = ccc_schema.validate_user_settings(section, STACK, {"image_prefixes": ["x/"]})
    assert len(problems) == 1 and problems[0].startswith(start), problems
    assert len(problems[0]) <= LONGEST_MESSAGE
    (value,) = section.values() if start[0] != "'" else section.keys()
    if len(value) > ccc_quote.QUOTE_CHARS and "line 1" not in start:
        assert f"… ({len(value)} characters)" in problems[0]
        assert repr(value[:ccc_quote.QUOTE_CHARS]) in problems[0]  # the first characters are kept


@pytest.mark.parametrize("error_of", ["github", "image"])
def test_a_long_service_error_is_clipped_in_the_users_message(error_of):
    ccc = sample_ccc("node1")
    error = "upstream said:\n" + "E" * 10_000
    github = (lambda login: ([], error)) if error_of == "github" else None
    image = (lambda ref, credentials: (None, error) if ref != ADMIN_IMAGE else ({"labels": {}}, None))
    facts = ccc_resolver.NodeFacts("node1", compute_devices=ccc["node"]["compute_devices"], docker_gid=998,
                                   image_lookup=image, github_keys=github)
    settings = {"USER_PUBKEY_FROM_GITHUB": "ana-gh"} if error_of == "github" else {"CONTAINER_IMAGE": "vicoslab/ccc:x"}
    result = ccc_resolver.resolve_container(ccc, STACK, facts, settings_text=yaml.safe_dump({STACK: settings}))
    (message,) = result["user_messages"]
    assert "upstream said:\\nEEE" in message and "\n" not in message
    assert f"… ({len(error)} characters)" in message
    assert len(message) <= ccc_quote.ERROR_CHARS + 2 * ccc_quote.QUOTE_CHARS + 100


def test_hostile_admin_values_are_quoted_in_admin_errors():
    ccc = sample_ccc("node1")
    ccc["containers"][0].update(USER_TYPE="t" * 10_000, STORAGE_NAME=["x"] * 5000, ALLOWED_NODES={"a": 1})
    result = resolve(ccc=ccc)
    assert result["action"] == "hold"
    errors = result["admin_errors"]
    assert f"ana-main: USER_TYPE {'t' * 80!r}… (10000 characters) is not defined in ccc:user_types" in errors
    assert any(e.startswith("ana-main: STORAGE_NAME ['x', 'x'") and "… (5000 items, 25000 characters)" in e for e in errors)
    assert max(map(len, errors)) <= LONGEST_MESSAGE


def test_the_report_stays_small_and_line_shaped_for_hostile_resolutions():
    spec = resolve()["spec"]
    spec["environment"]["INSTALL_PACKAGES"] = " ".join(["pkg"] * 1024)[:4096]  # the longest accepted value
    resolution = {"stack": STACK, "node": "node1", "placement": ["node1"], "settings_status": "applied",
                  "spec": spec, "user_messages": [f"m{i}\nresult: forged\x1b[2J" + "x" * 1000 for i in range(10_000)]}
    outcome = "NOT deployed: Docker refused the container: " + "y\n" * 50_000
    text, body = ccc_report.feedback_report(resolution, outcome, "2026-01-01 00:00:00 UTC")
    assert len(text.encode()) <= ccc_report.MAX_REPORT_BYTES
    lines = body.splitlines()
    assert [line.split(":")[0] for line in lines[:10]] == [
        "container", "node", "result", "placement", "settings", "image", "gpus", "shm_size", "packages", "ports"]
    assert len(lines[2]) <= len("result: ") + ccc_report.MAX_LINE_CHARS + 30 and lines[2].endswith("… (100044 characters)")
    assert lines[8] == f"packages: {'pkg ' * 20}… (4095 characters)"
    assert lines[10] == "messages:"
    assert all(line.startswith("  - m") and "\\nresult: forged\\x1b[2J" in line for line in lines[11:-1])
    assert lines[-1].startswith("  - … ") and "more message(s) not shown" in lines[-1]
    assert not [line for line in lines if line.startswith("result: forged")]
