#!/usr/bin/env python3
"""
Write CCC's Prometheus alert rules with a site's thresholds, ``for:`` durations and scrape job
names, so a site changes them without editing (and later merging) ``ccc-alerts.yml``:

    monitoring/prometheus/ccc_alert_rules.py --overrides site-alerts.yml > /etc/prometheus/rules/ccc-alerts.yml

The overrides file (YAML, every key optional; ``docs/monitoring.md``)::

    thresholds: {gpu_temperature_warning_celsius: 80}   # the ccc:alert_threshold:<name> rules
    for: {CCCFanFailsafe: 30s}                          # per alert name
    jobs: {node: node-exporter, gpu: nvidia}            # scrape job names (default ccc-node, ccc-gpu)

A name the rules do not have, a threshold that is not a number or a duration Prometheus would
refuse is an error (exit 2, the message names it): a typo never ships rules silently unchanged.
Only the standard library and PyYAML are needed.
"""

import argparse
import math
import pathlib
import re
import sys

import yaml

RULES = pathlib.Path(__file__).with_name("ccc-alerts.yml")
THRESHOLD_PREFIX = "ccc:alert_threshold:"
DEFAULT_JOBS = {"node": "ccc-node", "gpu": "ccc-gpu"}
JOB_SELECTOR = 'job=~"{node}|{gpu}"'
DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")
JOB_NAME = re.compile(r"^[A-Za-z0-9_.:/-]+$")  # no regex metacharacters that change the match
KNOWN_KEYS = ("thresholds", "for", "jobs")


class OverrideError(ValueError):
    """The overrides cannot be applied (the message names every problem)."""


def _thresholds(groups, wanted, problems):
    rules = {rule["record"][len(THRESHOLD_PREFIX):]: rule for group in groups for rule in group["rules"]
             if rule.get("record", "").startswith(THRESHOLD_PREFIX)}
    for name, value in wanted.items():
        if name not in rules:
            problems.append(f"thresholds: unknown threshold {name!r} (known: {sorted(rules)})")
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            problems.append(f"thresholds: {name} must be a number, got {value!r}")
        else:
            rules[name]["expr"] = f"vector({value})"


def _durations(groups, wanted, problems):
    alerts = {rule["alert"]: rule for group in groups for rule in group["rules"] if "alert" in rule}
    for name, value in wanted.items():
        if name not in alerts:
            problems.append(f"for: unknown alert {name!r} (known: {sorted(alerts)})")
        elif not isinstance(value, str) or not DURATION.match(value):
            problems.append(f"for: {name} must be a Prometheus duration such as 30s or 5m, got {value!r}")
        else:
            alerts[name]["for"] = value


def _regex_literal(name):
    """``name`` as a regex matching itself, written for a double-quoted PromQL string (``\\\\.``)."""
    return name.replace(".", "\\\\.")


def _jobs(groups, wanted, problems):
    unknown = sorted(set(wanted) - set(DEFAULT_JOBS))
    if unknown:
        problems.append(f"jobs: unknown keys {unknown} (known: {sorted(DEFAULT_JOBS)})")
    jobs = dict(DEFAULT_JOBS, **{key: value for key, value in wanted.items() if key in DEFAULT_JOBS})
    for key, value in jobs.items():
        if not isinstance(value, str) or not JOB_NAME.match(value):
            problems.append(f"jobs: {key} must be a plain job name, got {value!r}")
            return
    old, new = JOB_SELECTOR.format(**DEFAULT_JOBS), JOB_SELECTOR.format(**{k: _regex_literal(v) for k, v in jobs.items()})
    for group in groups:
        for rule in group["rules"]:
            rule["expr"] = rule["expr"].replace(old, new)


def apply(rules, overrides):
    """``rules`` (the parsed rule file) with ``overrides`` applied; raises ``OverrideError``."""
    overrides = overrides or {}
    if not isinstance(overrides, dict):
        raise OverrideError("the overrides must be a mapping")
    problems = [f"unknown key {key!r} (known: {list(KNOWN_KEYS)})" for key in overrides if key not in KNOWN_KEYS]
    for key in KNOWN_KEYS:
        if not isinstance(overrides.get(key) or {}, dict):
            problems.append(f"{key} must be a mapping")
    if not problems:
        groups = rules["groups"]
        _thresholds(groups, overrides.get("thresholds") or {}, problems)
        _durations(groups, overrides.get("for") or {}, problems)
        _jobs(groups, overrides.get("jobs") or {}, problems)
    if problems:
        raise OverrideError("; ".join(problems))
    return rules


def main(argv=None):
    parser = argparse.ArgumentParser(description="CCC alert rules with a site's overrides, to stdout")
    parser.add_argument("--overrides", help="YAML file: thresholds, for, jobs (docs/monitoring.md)")
    parser.add_argument("--rules", default=str(RULES), help="the rule file to start from (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        rules = yaml.safe_load(pathlib.Path(args.rules).read_text())
        overrides = yaml.safe_load(pathlib.Path(args.overrides).read_text()) if args.overrides else {}
        result = apply(rules, overrides)
    except (OSError, yaml.YAMLError, OverrideError) as exc:
        print(f"ccc_alert_rules: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(f"# Generated by ccc_alert_rules.py from {args.rules} with overrides {args.overrides or '(none)'}\n")
    sys.stdout.write(yaml.safe_dump(result, sort_keys=False, allow_unicode=True, width=120))
    return 0


if __name__ == "__main__":
    sys.exit(main())
