"""The Grafana dashboard and the Prometheus alert rules under ``monitoring/``, checked with
Prometheus' own ``promtool`` (Debian's package, unpacked into the test cache by
``support.prometheus``): the rules load, their unit tests (``ccc-alerts.test.yml``) pass and cover
every alert both firing and silent, every dashboard query parses, and every metric a query or a
rule names is one the GPU exporter really exports: the names come from the exporter's exposition
(what ``--once`` prints) collected with the FAKE NVML of tests/agents/fake_nvml.py (two GPUs, one
GPU process) and a fan controller state file, not from a list kept by hand. The site override
tool (``ccc_alert_rules.py``) is checked by what its rules make Prometheus do."""

import json
import logging
import re
import subprocess
import sys

import pytest
import yaml
from prometheus_client import generate_latest

from support import site  # noqa: F401  (puts _utils on the path)
from support.prometheus import promtool
from support.scripts import load_agent, load_module

import ccc_exporter_config  # noqa: E402
import ccc_fan_state  # noqa: E402
import ccc_nvml  # noqa: E402

REPO = site.REPO
RULES = REPO / "monitoring" / "prometheus" / "ccc-alerts.yml"
RULE_TESTS = REPO / "monitoring" / "prometheus" / "ccc-alerts.test.yml"
TOOL = REPO / "monitoring" / "prometheus" / "ccc_alert_rules.py"
DASHBOARD = REPO / "monitoring" / "grafana" / "ccc-cluster.json"
DOCS = REPO / "docs" / "monitoring.md"
# Series Prometheus makes itself: scrape health and the state of alerts.
PROMETHEUS_SERIES = {"up", "ALERTS", "ALERTS_FOR_STATE"}
# What Grafana puts in for its variables, so that promtool sees the query Prometheus would get.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "30s", "$__range": "1h", "$node": "gpu1-metrics",
                     "$gpu": "0", "${DS_PROMETHEUS}": "prometheus"}
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or",
                "unless", "inf", "nan"}


def rules():
    return yaml.safe_load(RULES.read_text())


def alerts():
    return {rule["alert"]: rule for group in rules()["groups"] for rule in group["rules"] if "alert" in rule}


def dashboard():
    return json.loads(DASHBOARD.read_text())


def dashboard_queries():
    """Every PromQL query of the dashboard as Prometheus receives it: ``{where: query}``."""
    queries = {}
    for panel in dashboard()["panels"]:
        for target in panel.get("targets", []):
            queries[f"panel {panel['title']!r} {target['refId']}"] = target["expr"]
    for variable in dashboard()["templating"]["list"]:
        inner = re.fullmatch(r"label_values\((.*),\s*\w+\)", variable["query"]["query"])
        assert inner, f"variable {variable['name']}: not a label_values(query, label) query"
        queries[f"variable {variable['name']}"] = inner.group(1)
    substituted = {}
    for where, query in queries.items():
        for variable, value in GRAFANA_VARIABLES.items():
            query = query.replace(variable, value)
        assert "$" not in query, f"{where}: a Grafana variable the test does not know: {query}"
        substituted[where] = query
    return substituted


def metric_names(expr):
    """The metric names a PromQL expression selects (strings, label matchers, ranges, label lists
    and function names taken out first)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    found = re.findall(r"(?<![\w.:])([A-Za-z_:][\w:]*)(?![\w:])(?!\s*\()", text)
    return {name for name in found if name not in PROMQL_WORDS}


def test_the_name_reader_finds_the_metrics_of_a_query_and_nothing_else():
    assert metric_names('sum by (instance, stack) (rate(ccc_x_total{job=~"a|b", le="1e3"}[5m] offset 1h)) '
                        '> on() group_left() ccc:alert_threshold:y and up == 1 or vector(2e3)') == \
        {"ccc_x_total", "ccc:alert_threshold:y", "up"}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Metric names in the GPU exporter's exposition, collected as ``--once`` does with the FAKE
    NVML (two GPUs, a process on the first) and a fan controller state file (every family
    appears, with or without samples; Docker does not answer, which changes no family)."""
    fake_nvml = load_module("tests/agents/fake_nvml.py", "fake_nvml_for_alerts")
    exporter = load_agent("ccc_gpu_exporter.py")
    work = tmp_path_factory.mktemp("exporter")
    state = work / "fan-state.json"
    ccc_fan_state.write(str(state), {"mode": "full", "failsafe": False, "max_temperature_c": 55.0,
                                     "zones": {"2": 35}, "updated": 1.0})
    config = dict(ccc_exporter_config.DEFAULTS, fan_state_file=str(state), proc_root=str(work),
                  docker_url=f"unix://{work}/no-docker.sock", docker_timeout=1)

    def nvml():
        fake = fake_nvml.FakeNvml(count=2)
        fake.add_process(0, 4242, 1 << 30)
        return ccc_nvml.load_nvml(fake)

    registry, _ = exporter.build(config, nvml_loader=nvml)
    quiet = [logging.getLogger(name) for name in ("ccc_gpu_exporter", "ccc_container_metrics")]
    levels = [logger.level for logger in quiet]
    for logger in quiet:  # Docker is absent on purpose: no warning about it
        logger.setLevel(logging.ERROR)
    try:
        exposition = generate_latest(registry).decode()
    finally:
        for logger, level in zip(quiet, levels):
            logger.setLevel(level)
    names = set(re.findall(r"^# TYPE (\S+) ", exposition, re.M))
    assert {"nvidia_gpu_temperature_celsius", "ccc_fan_failsafe", "ccc_gpu_process_memory_used_bytes",
            "ccc_gpu_exporter_collection_failures_total"} <= names, exposition  # the fakes worked
    return names


def test_promtool_accepts_the_rules():
    checked = promtool("check", "rules", RULES)
    assert checked.returncode == 0 and f"SUCCESS: {len(alerts()) + 5} rules found" in checked.stdout, \
        checked.stdout + checked.stderr


def test_the_alert_unit_tests_pass():
    tested = promtool("test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr


def test_every_alert_is_tested_firing_and_silent():
    cases = [case for test in yaml.safe_load(RULE_TESTS.read_text())["tests"] for case in test["alert_rule_test"]]
    fires = {case["alertname"] for case in cases if case.get("exp_alerts")}
    silent = {case["alertname"] for case in cases if not case.get("exp_alerts")}
    assert set(alerts()) == fires == silent
    assert all(rule["labels"]["severity"] in ("warning", "critical") for rule in alerts().values())


def test_promtool_parses_every_dashboard_query(tmp_path):
    queries = dashboard_queries()
    assert len(queries) > 30
    rule_file = tmp_path / "dashboard-queries.yml"
    rule_file.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{n}", "expr": query} for n, query in enumerate(queries.values())]}]}))
    checked = promtool("check", "rules", rule_file)
    assert checked.returncode == 0, "\n".join(f"{where}: {query}" for where, query in queries.items()) + \
        "\n" + checked.stdout + checked.stderr


def test_every_metric_named_by_a_rule_or_a_panel_is_exported(exported):
    recorded = {rule["record"] for group in rules()["groups"] for rule in group["rules"] if "record" in rule}
    known = exported | recorded | PROMETHEUS_SERIES
    named = {f"rule {rule.get('alert') or rule['record']}": rule["expr"]
             for group in rules()["groups"] for rule in group["rules"]}
    named.update(dashboard_queries())
    unknown = {where: sorted(metric_names(expr) - known) for where, expr in named.items() if metric_names(expr) - known}
    assert unknown == {}
    used = set().union(*map(metric_names, named.values()))
    # what the issue asks the dashboard and alerts to show is there
    assert {"nvidia_gpu_duty_cycle", "nvidia_gpu_memory_used_bytes", "nvidia_gpu_temperature_celsius",
            "ccc_gpu_process_memory_used_bytes", "ccc_fan_zone_duty_percent", "ccc_fan_failsafe",
            "ccc_gpu_exporter_collection_success", "ccc_container_restarts_total"} <= used


def test_the_dashboard_asks_for_its_datasource_and_has_node_and_gpu_variables():
    board = dashboard()
    assert [(item["name"], item["type"], item["pluginId"]) for item in board["__inputs"]] == \
        [("DS_PROMETHEUS", "datasource", "prometheus")]
    sources = [panel["datasource"] for panel in board["panels"] if "datasource" in panel]
    sources += [target["datasource"] for panel in board["panels"] for target in panel.get("targets", [])]
    sources += [variable["datasource"] for variable in board["templating"]["list"]]
    assert sources and all(source == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"} for source in sources)
    assert [variable["name"] for variable in board["templating"]["list"]] == ["node", "gpu"]
    gpu_queries = [target["expr"] for panel in board["panels"] for target in panel.get("targets", [])
                   if "nvidia_gpu_" in target["expr"] and "minor_number" not in target["expr"].split("(")[0]]
    assert gpu_queries and all('instance=~"$node"' in query for query in gpu_queries)
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))


def test_docs_explain_every_alert():
    text = DOCS.read_text()
    missing = [name for name in alerts() if f"### {name}" not in text]
    assert missing == []


# ---------------------------------------------------------------------------------------------
# Site overrides (ccc_alert_rules.py)


def render(tmp_path, overrides):
    path = tmp_path / "overrides.yml"
    path.write_text(yaml.safe_dump(overrides))
    return subprocess.run([sys.executable, str(TOOL), "--overrides", str(path)], capture_output=True, text=True,
                          timeout=60)


def test_overrides_change_what_fires(tmp_path):
    made = render(tmp_path, {"thresholds": {"gpu_temperature_warning_celsius": 80},
                             "for": {"CCCGpuTooHot": "1m"}, "jobs": {"gpu": "nvidia.exporter", "node": "node"}})
    assert made.returncode == 0, made.stderr
    (tmp_path / "site-alerts.yml").write_text(made.stdout)
    assert promtool("check", "rules", tmp_path / "site-alerts.yml").returncode == 0
    too_hot = {"severity": "warning", "instance": "gpu1", "job": "nvidia.exporter", "minor_number": "0", "name": "A16",
               "uuid": "GPU-a"}
    (tmp_path / "site.test.yml").write_text(yaml.safe_dump({
        "rule_files": ["site-alerts.yml"], "evaluation_interval": "1m", "tests": [{
            "interval": "1m",
            "input_series": [
                {"series": 'nvidia_gpu_temperature_celsius{instance="gpu1", job="nvidia.exporter", minor_number="0", '
                           'name="A16", uuid="GPU-a"}', "values": "82x5"},
                {"series": 'up{instance="gpu1", job="nvidia.exporter"}', "values": "0x5"},
                {"series": 'up{instance="gpu1", job="nvidiaXexporter"}', "values": "0x5"}],
            "alert_rule_test": [
                {"eval_time": "2m", "alertname": "CCCGpuTooHot", "exp_alerts": [{"exp_labels": too_hot, "exp_annotations": {
                    "summary": "GPU 0 of gpu1 is at 82 °C",
                    "description": "GPU 0 (A16, GPU-a) has stayed above the warning threshold. Check the node's air "
                                   "flow and the fan zones on the dashboard (fan duty near 100 % means the fans cannot "
                                   "cool more)."}}]},
                {"eval_time": "4m", "alertname": "CCCExporterDown", "exp_alerts": [{"exp_labels": {
                    "severity": "warning", "instance": "gpu1", "job": "nvidia.exporter"},
                    "exp_annotations": {"summary": "nvidia.exporter exporter of gpu1 does not answer",
                                        "description": alerts()["CCCExporterDown"]["annotations"]["description"]}}]},
            ]}]}, allow_unicode=True))
    tested = promtool("test", "rules", "site.test.yml", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr


@pytest.mark.parametrize("overrides, problem", [
    ({"thresholds": {"gpu_temp": 80}}, "thresholds: unknown threshold 'gpu_temp'"),
    ({"thresholds": {"gpu_temperature_warning_celsius": "hot"}}, "gpu_temperature_warning_celsius must be a number"),
    ({"for": {"CCCFanFailSafe": "1m"}}, "for: unknown alert 'CCCFanFailSafe'"),
    ({"for": {"CCCFanFailsafe": "1 minute"}}, "CCCFanFailsafe must be a Prometheus duration"),
    ({"jobs": {"gpu": "nvidia|.*"}}, "jobs: gpu must be a plain job name"),
    ({"job": {"gpu": "x"}}, "unknown key 'job'"),
])
def test_a_wrong_override_is_refused_by_name(tmp_path, overrides, problem):
    made = render(tmp_path, overrides)
    assert made.returncode == 2 and problem in made.stderr and made.stdout == ""
