"""The fail2ban role's rules (``_utils/ccc_fail2ban.py``): pillar checks, the jail file as
fail2ban itself reads it, and the shipped never-ban-my-country script.

Fakes: fail2ban runs from Debian's package unpacked in the test cache (``support.fail2ban_check``,
nothing installed); ``geoiplookup``/``geoiplookup6`` are recording fake scripts on PATH (no GeoIP
database here)."""

import os
import pathlib
import subprocess

import pytest

from support import fail2ban_check, role_files, site  # noqa: F401  (site puts _utils on sys.path)

import ccc_fail2ban

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "salt" / "cluster" / "fail2ban" / "files" / "ignore-country"
DEFAULTS = {"sshd_enabled": True, "port": "ssh", "backend": "systemd", "ignoreip": ["127.0.0.1/8", "::1"],
            "maxretry": 3, "findtime": 60, "bantime": 600, "ignore_country": None}


SCHEMA = role_files.schema("fail2ban")


def settings(**changes):
    return dict(DEFAULTS, **changes)


def test_defaults_pass_and_networks_are_normalised():
    jail, problems = ccc_fail2ban.check(settings(ignoreip="127.0.0.1/8 ::1, 10.1.2.3 192.168.10.7/24"), SCHEMA)
    assert problems == []
    assert jail["ignoreip"] == ["127.0.0.0/8", "::1/128", "10.1.2.3/32", "192.168.10.0/24"]


@pytest.mark.parametrize("key, value, words", [
    ("maxretry", "3", "maxretry must be a whole number"),
    ("maxretry", True, "maxretry must be a whole number"),
    ("maxretry", 0, "maxretry must be a whole number >= 1"),
    ("findtime", 2.5, "findtime"),
    ("bantime", 0, "bantime must be -1 (forever)"),
    ("ignoreip", ["10.0.0.0/8", "10.0.0.1; rm -rf /"], "'10.0.0.1; rm -rf /' is not an IP address"),
    ("ignoreip", {"a": 1}, "ignoreip must be a list"),
    ("ignore_country", "SVN", "two-letter ISO country code"),
    ("ignore_country", "S;", "two-letter ISO country code"),
    ("port", "ssh; reboot", "port must be a service name"),
    ("backend", "gamin", "backend must be one of"),
])
def test_wrong_values_are_named(key, value, words):
    _, problems = ccc_fail2ban.check(settings(**{key: value}), SCHEMA)
    assert len(problems) == 1 and words in problems[0]


def test_forever_bans_and_country_codes_are_accepted():
    jail, problems = ccc_fail2ban.check(settings(bantime=-1, ignore_country="si", port=2222), SCHEMA)
    assert problems == []
    assert (jail["bantime"], jail["ignore_country"], jail["port"]) == (-1, "SI", "2222")
    assert f"ignorecommand = {ccc_fail2ban.IGNORE_SCRIPT} <ip> SI\n" in ccc_fail2ban.jail_text(jail)


def test_fail2ban_reads_the_jail_as_written(tmp_path):
    jail, _ = ccc_fail2ban.check(settings(ignoreip=["127.0.0.1/8", "192.168.10.0/24"], maxretry=5, findtime=600,
                                          bantime=3600, ignore_country="SI"), SCHEMA)
    config = fail2ban_check.config_with_jail(tmp_path, ccc_fail2ban.jail_text(jail))
    checked = fail2ban_check.client(config, "-t")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    dump = fail2ban_check.client(config, "-d").stdout
    assert "['add', 'sshd', 'systemd']" in dump  # ours wins over Debian's defaults-debian.conf
    for line in ("['set', 'sshd', 'maxretry', 5]", "['set', 'sshd', 'findtime', '600']",
                 "['set', 'sshd', 'bantime', '3600']", "['set', 'sshd', 'addignoreip', '127.0.0.0/8', '192.168.10.0/24']",
                 f"['set', 'sshd', 'ignorecommand', '{ccc_fail2ban.IGNORE_SCRIPT} <ip> SI']", "['start', 'sshd']"):
        assert line in dump


def test_fail2ban_refuses_a_broken_jail(tmp_path):
    """The checker above can fail: a jail with an unknown filter is refused."""
    config = fail2ban_check.config_with_jail(tmp_path, "[sshd]\nenabled = true\nfilter = no-such-filter\n")
    assert fail2ban_check.client(config, "-t").returncode != 0


@pytest.fixture
def fake_geoip(tmp_path):
    """FAKE geoiplookup/geoiplookup6: record their argv, answer with $FAKE_GEOIP_ANSWER."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("geoiplookup", "geoiplookup6"):
        fake = bin_dir / name
        fake.write_text(f'#!/bin/sh\necho "{name} $*" >> "{tmp_path}/calls"\necho "$FAKE_GEOIP_ANSWER"\n')
        fake.chmod(0o755)
    return tmp_path


def run_script(fake, *args, answer="GeoIP Country Edition: SI, Slovenia"):
    env = dict(os.environ, PATH=f"{fake / 'bin'}:/usr/bin:/bin", FAKE_GEOIP_ANSWER=answer)
    return subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, text=True).returncode


def test_country_script_ignores_only_the_configured_country(fake_geoip):
    assert run_script(fake_geoip, "193.2.1.66", "SI") == 0
    assert run_script(fake_geoip, "193.2.1.66", "DE") == 1
    assert run_script(fake_geoip, "2001:db8::1", "SI", answer="GeoIP Country V6 Edition: SI, Slovenia") == 0
    assert run_script(fake_geoip, "8.8.8.8", "SI", answer="GeoIP Country Edition: IP Address not found") == 1
    assert (fake_geoip / "calls").read_text().splitlines() == [
        "geoiplookup 193.2.1.66", "geoiplookup 193.2.1.66", "geoiplookup6 2001:db8::1", "geoiplookup 8.8.8.8"]


def test_country_script_never_passes_odd_input_on(fake_geoip):
    for args in (("$(reboot)", "SI"), ("1.2.3.4", "si"), ("1.2.3.4",), ("-f", "SI")):
        assert run_script(fake_geoip, *args) == 1
    assert not (fake_geoip / "calls").exists()
    assert oct(SCRIPT.stat().st_mode & 0o777) == "0o755"
