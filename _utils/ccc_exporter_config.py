"""
The GPU exporter's configuration: its defaults (the only place they are written), its checks,
and what pillar makes of it. ``agents/ccc_gpu_exporter.py`` reads its YAML file through
``load_file``; ``salt-call ccc_gpu.exporter_config`` and ``agents/config/gpu-exporter.yaml.jinja``
(which renders it) use ``from_pillar``.

Pillar ``ccc:monitoring:gpu_exporter`` sets any key but ``proc_root`` (a test hook); the Docker
endpoint defaults to the node's (``ccc:node:docker_url``), the fan state file to the fan
controller's (``ccc:fans:state_file``) and the listen address to the monitoring_agent role's
(``ccc_monitoring.pillar_host_address``: the host side of ``ccc:monitoring:network``). Meanings: ``docs/pillar.md``.
"""

import os

import ccc_fan_config
import ccc_monitoring
import ccc_pillar
import ccc_rules
import yaml

DEFAULTS = {
    # Local only. From pillar: the host side of ccc:monitoring:network, where the monitoring_agent
    # role's forwarder reaches it for FRP (<node>-metrics/nvidia); never the whole LAN by default.
    "listen_address": "127.0.0.1",
    # The port of the original CCC nvidia exporter (mindprince).
    "port": 9445,
    "docker_url": ccc_pillar.NODE_DEFAULTS["docker_url"],
    "fan_state_file": ccc_fan_config.DEFAULTS["state_file"],
    "proc_root": "/proc",
    "docker_timeout": 5,
    "log_level": "info",
    # The port answers anyone who reaches the node: e-mails (personal data) only on opt-in.
    "user_labels": False,
}
PILLAR_KEYS = tuple(key for key in DEFAULTS if key != "proc_root")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


class ConfigError(ValueError):
    """The configuration is unusable (the message names every problem)."""


def _problems(config, known):
    problems = []
    unknown = sorted(set(config) - set(known), key=str)
    if unknown:
        problems.append(f"unknown settings {unknown} (known: {sorted(known)})")
    if not isinstance(config.get("listen_address"), str) or not config["listen_address"]:
        problems.append("listen_address must be an address, e.g. 0.0.0.0 or 127.0.0.1")
    port = config.get("port")
    if not ccc_rules.is_whole(port, 0, 65535):
        problems.append(f"port must be 0..65535, got {port!r}")
    for key in ("docker_url", "proc_root"):
        if key in known and (not isinstance(config.get(key), str) or not config[key]):
            problems.append(f"{key} must be a non-empty string")
    state_file = config.get("fan_state_file")
    if state_file is not None and (not isinstance(state_file, str) or not os.path.isabs(state_file)):
        problems.append(f"fan_state_file must be an absolute path or null, got {state_file!r}")
    timeout = config.get("docker_timeout")
    if not ccc_rules.is_number(timeout) or timeout <= 0:
        problems.append(f"docker_timeout must be a positive number of seconds, got {timeout!r}")
    if not isinstance(config.get("user_labels"), bool):
        problems.append(f"user_labels must be true or false, got {config.get('user_labels')!r}")
    if str(config.get("log_level", "")).upper() not in LOG_LEVELS:
        problems.append("log_level must be debug, info, warning or error")
    return problems


def check(config, known=DEFAULTS):
    """``config`` if every key is known and usable; else ``ConfigError`` naming every problem."""
    problems = _problems(config, known)
    if problems:
        raise ConfigError("; ".join(problems))
    return config


def load_file(path=None):
    """The configuration: ``DEFAULTS`` updated from the YAML file at ``path`` (if given), checked."""
    config = dict(DEFAULTS)
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                loaded = yaml.safe_load(handle)
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from exc
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: must be a mapping of settings")
        config.update(loaded)
    return check(config)


def from_pillar(ccc):
    """
    The exporter configuration pillar ``ccc`` (plain data) asks for, checked, with the keys
    pillar may set (``PILLAR_KEYS``): what the configuration template writes.
    """
    ccc = ccc or {}
    exporter = dict((ccc.get("monitoring") or {}).get("gpu_exporter") or {})
    fans = ccc.get("fans") or {}
    config = {key: DEFAULTS[key] for key in PILLAR_KEYS}
    config["docker_url"] = ccc_pillar.node_settings(ccc, None)["docker_url"]
    config["fan_state_file"] = fans.get("state_file") or DEFAULTS["fan_state_file"]
    try:
        config["listen_address"] = ccc_monitoring.pillar_host_address(ccc) or config["listen_address"]
    except ValueError as exc:
        if not exporter.get("listen_address"):
            raise ConfigError(f"listen_address: {exc}") from None
    config.update({key: value for key, value in exporter.items() if value is not None})
    return check(config, known=PILLAR_KEYS)
