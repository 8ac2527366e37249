#!/usr/bin/env python3
"""Benchmark: the cost of a hostile ``~/.containers/<STACK>.yml`` (not a test: prints figures).

Builds worst-case settings files (64 KiB of mixed TCP items, deep nesting, long strings, many
HTTP entries, many unknown keys, aliases, unreadable values...) and, for each, measures over
repeats (p50 / max, milliseconds):

* check: read the file + ``parse_settings_text`` + ``validate_user_settings`` (no cluster rules);
* resolve: read + ``resolve_container`` for ana-main of the sample site (cluster rules, taken
  subdomains) + the ``.deploy`` report;

and the size of what the user gets: number of messages, longest message, report bytes.
Target: every case at most 50 ms. ``tests/unit/test_settings_bounds.py`` runs the same cases
under a looser budget.

    .venv/bin/python bench/settings_cost.py [--repeats 20] [--case-seconds 2] [--modules DIR]

Smallest (the suite's smoke test): ``--repeats 1``, a second.

``--modules DIR`` loads ccc_settings/ccc_containers from DIR instead (e.g. an older version
extracted with ``git show``), for a before/after comparison; a case is repeated only while its
runs total under ``--case-seconds``.
"""

import argparse
import pathlib
import statistics
import sys
import tempfile
import time
import types

import yaml

REPO = pathlib.Path(__file__).resolve().parent.parent
STACK = "ana-main"
KIB = 1024
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeSampleKeyForAnaOnly0000000000000000000 ana@laptop"


def _fill(head, item, tail="", size=64 * KIB - 16):
    """``head`` + as many ``item(i)`` as fit in ``size`` bytes + ``tail``."""
    parts, used, index = [head], len(head) + len(tail), 0
    while True:
        piece = item(index)
        if used + len(piece) > size:
            break
        parts.append(piece)
        used += len(piece)
        index += 1
    return "".join(parts) + tail


def _section(body):
    return yaml.safe_dump({STACK: body}, width=10 ** 6)


def _http(index, **fields):
    entry = {"port": 1000 + index, "subdomain": f"w{index}", "pass": "p" * 8, "user": "ana",
             "health_check": "false", "https_without_pass": False, "subdomain_hostname_prefix": True}
    entry.update(fields)
    return entry


def worst_cases():
    """{name: settings file text} of hostile files, each at most 64 KiB and each one the
    deployment must refuse."""
    def mixed(i):  # integers and strings alternate: jsonschema's uniqueItems is then quadratic
        return f"{i % 65535 + 1}, " if i % 2 else f'"{i % 65535 + 1}", '

    return {
        "tcp-mixed-64k-flow": _fill(f"{STACK}:\n  FRP_PORTS: {{TCP: [", mixed, "1]}\n"),
        "tcp-mixed-64k-block": _fill(f"{STACK}:\n  FRP_PORTS:\n    TCP:\n",
                                     lambda i: f"    - {i % 65535 + 1}\n" if i % 2 else f"    - '{i}'\n"),
        "tcp-1000-under-value-cap": _section({"FRP_PORTS": {"TCP": [i if i % 2 else str(i) for i in range(1, 1001)]}}),
        "http-60-entries-under-cap": _section({"FRP_PORTS": {"HTTP": [_http(i) for i in range(60)]}}),
        "http-16-entries-all-wrong": _section({"FRP_PORTS": {"HTTP": [
            {"port": [i], "subdomain": {"x": i}, "pass": "", "user": "A B", "health_check": "maybe",
             "https_without_pass": "no", "subdomain_hostname_prefix": 1, "extra": i} for i in range(16)]},
            "DEPLOYMENT_NODES": [f"bad node {i}" for i in range(64)]}),
        "http-16-entries-taken-reserved": _section({"FRP_PORTS": {"HTTP": [
            _http(i, subdomain=["ana-jupyter", "portainer", "metrics", "ana-tb"][i % 4] if i else "w0")
            for i in range(16)]}}),
        "deployment-nodes-64-not-allowed": _section({"DEPLOYMENT_NODES": [f"gpu{i}" for i in range(64)]}),
        "deep-flow-nesting-64k": f"{STACK}: " + "[" * (64 * KIB - 32) + "\n",
        "deep-block-nesting": _fill(f"{STACK}:\n", lambda i: "  " * (i + 1) + "a:\n", size=8 * KIB),
        "long-packages-64k": _section({"INSTALL_PACKAGES": "a " * (32 * KIB - 32)}),
        "packages-4096-near-match": _section({"INSTALL_PACKAGES": ("abc " * 1024)[:4095] + ";"}),
        "sources-4096-near-match": _section({"INSTALL_REPOSITORY_SOURCES": ",".join(
            ["deb [arch=amd64 signed-by=/k.gpg] https://x.example/a b c"] * 72)[:4095] + "$"}),
        "sources-trusted-http-many": _section({"INSTALL_REPOSITORY_SOURCES": ",".join(
            ["deb [trusted=yes] http://x.example s"] * 110)}),
        "keys-4096-near-match": _section({"INSTALL_REPOSITORY_KEYS": ",".join(["https://k.example/a.gpg"] * 170)
                                          [:4095] + " "}),
        "image-255-near-match": _section({"CONTAINER_IMAGE": "vicoslab/ccc:" + "a-" * 120 + "-"}),
        "pubkey-16k-bad-lines": _section({"USER_PUBKEY": "\n".join([KEY] * 31 + ["x"] * 8000)[:16384]}),
        "long-unknown-keys": _section({f"K{i}-" + "x" * 1000: i for i in range(60)}),
        "unknown-keys-under-cap": _section({f"UNKNOWN_SETTING_{i}": i for i in range(500)}),
        "top-level-keys": "".join(f"k{i}: {i}\n" for i in range(900)),
        "billion-laughs": "\n".join(
            ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
            + [f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]
            + [f"{STACK}:", "  INSTALL_PACKAGES: *i"]) + "\n",
        "alias-after-64k": _fill(f"{STACK}:\n  USER_PUBKEY: &k \"", lambda i: "A", "\"\n  USER_NAME: *k\n"),
        "control-chars-everywhere": _section({"FRP_PORTS": {"HTTP": [_http(i, **{"pass": "x\n[evil]"}) for i in range(16)]},
                                              "INSTALL_PACKAGES": "htop\x1b[2J"}),
        "huge-integer": f"{STACK}:\n  SHM_SIZE: {'9' * (60 * KIB)}\n",
        "bad-timestamp": f"{STACK}:\n  SHM_SIZE: 2001-13-45\n",
        "binary-tag-60k": f"{STACK}:\n  USER_NAME: !!binary {'QUFB' * (15 * KIB)}\n",
    }


def _load_modules(directory):
    """The shared modules from ``directory`` (default ``_utils/``), as one namespace per side."""
    sys.path[:0] = [str(directory), str(REPO / "tests")]
    import ccc_report
    import ccc_resolver
    import ccc_schema
    import ccc_settings_file
    import ccc_subdomains
    from support.site import sample_ccc
    settings = types.SimpleNamespace(read_settings_file=ccc_settings_file.read_settings_file,
                                     parse_settings_text=ccc_settings_file.parse_settings_text,
                                     SettingsError=ccc_settings_file.SettingsError,
                                     validate_user_settings=ccc_schema.validate_user_settings)
    containers = types.SimpleNamespace(resolve_container=ccc_resolver.resolve_container,
                                       NodeFacts=ccc_resolver.NodeFacts,
                                       taken_subdomains=ccc_subdomains.taken_subdomains,
                                       feedback_report=ccc_report.feedback_report)
    return settings, containers, sample_ccc


def _measure(run, repeats, case_seconds):
    """Run ``run`` up to ``repeats`` times (fewer once ``case_seconds`` are spent); returns the
    times and the last result, or the exception it raised (older code may crash)."""
    times, spent, result = [], 0.0, None
    while len(times) < repeats and (not times or spent < case_seconds):
        start = time.perf_counter()
        try:
            result = run()
        except Exception as exc:  # noqa: BLE001 - reported in the table
            result = exc
        times.append(time.perf_counter() - start)
        spent += times[-1]
    return times, result


def _case_row(settings, containers, site, path, args):
    ccc, facts, taken = site

    def check():
        try:
            section = settings.parse_settings_text(settings.read_settings_file(str(path)), STACK)
        except settings.SettingsError as exc:
            return [str(exc)]
        return settings.validate_user_settings(section, STACK, {})

    def resolve():
        try:
            content, error = settings.read_settings_file(str(path)), None
        except settings.SettingsError as exc:
            content, error = None, str(exc)
        resolution = containers.resolve_container(
            ccc, STACK, facts, settings_text=content, settings_error=error, last_good={"SHM_SIZE": "4g"}, taken=taken)
        return resolution, containers.feedback_report(resolution, "running, unchanged", "now")[0]

    check_times, _ = _measure(check, args.repeats, args.case_seconds)
    resolve_times, result = _measure(resolve, args.repeats, args.case_seconds)
    if isinstance(result, Exception):
        outcome, messages, report = f"CRASH {type(result).__name__}", [""], ""
    else:
        (resolution, report), messages = result, result[0]["user_messages"] or [""]
        outcome = resolution["settings_status"]
    return check_times, resolve_times, outcome, messages, report


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--case-seconds", type=float, default=2.0)
    parser.add_argument("--modules", default=str(REPO / "_utils"))
    args = parser.parse_args()
    settings, containers, sample_ccc = _load_modules(args.modules)
    ccc = sample_ccc("node1")
    facts = containers.NodeFacts("node1", compute_devices=ccc["node"].get("compute_devices"), docker_gid=998)
    site = (ccc, facts, containers.taken_subdomains(ccc, {}, except_stack=STACK))
    print(f"yaml loader: {'libyaml' if yaml.__with_libyaml__ else 'pure Python'}; modules: {args.modules}")
    print(f"{'case':32s} {'bytes':>6s} {'check p50/max ms':>19s} {'resolve p50/max ms':>19s} {'settings':>9s}"
          f" {'msgs':>4s} {'longest':>7s} {'report':>7s}")
    def ms(values):
        return f"{statistics.median(values) * 1e3:8.2f}/{max(values) * 1e3:<9.2f}"

    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / f"{STACK}.yml"
        for name, text in worst_cases().items():
            path.write_text(text)
            check_times, resolve_times, outcome, messages, report = _case_row(settings, containers, site, path, args)
            worst = max(worst, max(check_times), max(resolve_times))
            print(f"{name:32s} {len(text.encode()):6d} {ms(check_times):>19s} {ms(resolve_times):>19s} {outcome:>9s}"
                  f" {len(messages):4d} {max(map(len, messages)):7d} {len(report.encode()):7d}")
    print(f"worst case: {worst * 1e3:.2f} ms (target 50 ms)")


if __name__ == "__main__":
    main()
