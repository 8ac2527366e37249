"""
Map the original's cluster variables (``group_vars/ccc-cluster/cluster-vars.yml``, and the same
keys set per host in ``host_vars``) to ccc-salt pillar: ``ccc:cluster``, the role switches
``ccc:roles`` and each role's settings. Pure: values in, a ``ccc`` tree and report entries out.
"""

from . import networks, paths

# original key -> ccc path, copied as they are
SIMPLE = {
    "timezone_setting": "timezone:name",
    "docker_nvidia_plugin": "docker:nvidia_toolkit:enabled",
    "docker_registries": "docker:registries",
    "docker_daemon_vars": "docker:daemon",
    "docker_swarm_leader": "swarm:leader",
    "docker_swarm_leader_addr": "swarm:leader_addr",
    "docker_swarm_manager": "swarm:manager",
    "frpc_server": "frp_client:server_address",
    "frpc_port": "frp_client:server_port",
    "frpc_image_version": "frp_client:image",
    "patroller_image_version": "patroller:image",
    "patroller_lease": "patroller:lease",
    "patroller_network": "patroller:network",
    "patroller_proxy_network": "patroller:proxy_network",
    "patroller_webui": "patroller:webui:enabled",
    "patroller_webui_image_version": "patroller:webui:image",
    "patroller_webui_storage_path": "patroller:webui:storage_path",
    "patroller_webui_config": "patroller:webui:config",
    "cachefilesd_cache_folder": "cachefilesd:cache_dir",
    "cachefilesd_daemon_opts": "cachefilesd:daemon_opts",
    **{f"cachefilesd_{k}": f"cachefilesd:{k}" for k in ("brun", "bcull", "bstop", "frun", "fcull", "fstop")},
    "mount_points": "cluster:mount_points",
    "nfs_user_name": "cluster:nfs_user:name",
    "nfs_user_id": "cluster:nfs_user:uid",
    "superfan_gpu_fan_settings": "fans:curve",
    "monitoring_agent_enabled_gpu": "monitoring:gpu",
    "monitoring_agent_docker_network": "monitoring:network",
    "compute_container_runtime": "cluster:runtime",
    "fail2ban_sshd_enabled": "fail2ban:sshd_enabled",
    "fail2ban_sshd_maxretry": "fail2ban:maxretry",
    "fail2ban_sshd_bantime": "fail2ban:bantime",
    "fail2ban_sshd_findtime": "fail2ban:findtime",
    "fail2ban_sshd_ignorebycountry": "fail2ban:ignore_country",
    "inotify_max_user_watches": "inotify:max_user_watches",
    "inotify_max_user_instances": "inotify:max_user_instances",
    "inotify_max_queued_events": "inotify:max_queued_events",
    "zfs_performance_tuning": "zfs:module_parameters",
    "netplan_name": "netplan:name",
    "portainer_agent_image": "docker:portainer_agent:image",
    "portainer_agent_name": "docker:portainer_agent:name",
    "portainer_agent_publish_ip": "docker:portainer_agent:publish_ip",
    "portainer_agent_publish_port": "docker:portainer_agent:publish_port",
    "portainer_ui_name": "docker:portainer_ui:name",
    "portainer_ui_image": "docker:portainer_ui:image",
    "portainer_ui_storage_path": "docker:portainer_ui:storage_path",
    "portainer_ui_publish_port": "docker:portainer_ui:publish_port",
    "portainer_network_overlay": "docker:portainer_agent:overlay",
}
# original on/off variable -> role
SWITCHES = {
    "nvidia_enabled": "nvidia", "docker_swarm_enabled": "swarm", "patroller_enabled": "patroller",
    "superfan_gpu_enabled": "superfan_gpu", "monitoring_agent_enabled": "monitoring_agent", "zfs_enabled": "zfs",
    "portainer_agent": "docker:portainer_agent:enabled",
    "portainer_ui": "docker:portainer_ui:enabled",
}
NOT_MAPPED = {
    "docker_version": "ccc-salt installs Debian's docker.io; to keep Docker CE set ccc:docker:repositories, "
                      "engine.packages and engine.version (docs/pillar.md ccc:docker)",
    "docker_portainer_agent": "stale in the original (no role read it)",
    "docker_portainer_publish_ip": "stale in the original (no role read it)",
    "patroller_publish_ip": "stale in the original (no role read it)",
    "portainer_network_lockfile": "not needed: the swarm leader alone creates the agents' overlay, no lock file "
                                  "(set ccc:docker:portainer_agent:swarm for the agents' swarm mode)",
    "fail2ban_enabled": "unused in the original; ccc:roles:fail2ban switches the role",
    "mellanox_enabled": "the mellanox role runs only when ccc:only_roles names it, as the original's mellanox-driver",
    "inotify_sysctl_file": "ccc-salt writes /etc/sysctl.d/60-ccc-inotify.conf",
    "cachefilesd_start_time": "systemd starts cachefilesd", "cachefilesd_die_time": "systemd stops cachefilesd",
}
NIGHTWATCH = "there is no nightwatch: the settings beacon and the master's reactor redeploy (README, docs/migration.md)"
PORTAINER_UI = "not a setting of the original's portainer role"


def map_var(key, value, tree, report, source, where="site"):
    """Map one cluster variable into ``tree`` (a ``ccc`` mapping); False when it is not one."""
    if key in SIMPLE:
        paths.put(tree, SIMPLE[key], str(value) if key == "timezone_setting" else value)
        report.mapped(source, key, paths.shown(SIMPLE[key], where))
    elif key == "nvidia_driver_version":
        paths.put(tree, "nvidia:driver_version", str(value))
        report.mapped(source, key, paths.shown("nvidia:driver_version", where))
    elif key in SWITCHES:
        target = SWITCHES[key] if ":" in SWITCHES[key] else f"roles:{SWITCHES[key]}"
        paths.put(tree, target, bool(value))
        report.mapped(source, key, paths.shown(target, where))
    elif key in HANDLERS:
        HANDLERS[key](value, tree, report, source, where)
    elif key in NOT_MAPPED:
        report.not_mapped(source, key, NOT_MAPPED[key])
    elif key.startswith("compute_container_nightwatch"):
        report.not_mapped(source, key, NIGHTWATCH)
    elif key.startswith("portainer_ui"):
        report.not_mapped(source, key, PORTAINER_UI)
    else:
        return False
    return True


def _cachefilesd_state(value, tree, report, source, where):
    paths.put(tree, "roles:cachefilesd", True)
    paths.put(tree, "cachefilesd:state", "stopped" if value == "stopped" else "started")
    report.mapped(source, "cachefilesd_state", paths.shown("cachefilesd:state", where))


def _pull_always(value, tree, report, source, where):
    mode = "always" if value else "missing"
    paths.put(tree, "cluster:image_policy:pull", mode)
    report.changed(source, "compute_container_image_pull_always", paths.shown("cluster:image_policy:pull", where),
                   f"{value!r} becomes {mode!r}; 'always' recreates a container only when its image's id changed")


def _ui_publish_ip(value, tree, report, source, where):
    paths.put(tree, "docker:portainer_ui:publish_ip", value)
    report.changed(source, "portainer_ui_publish_ip", paths.shown("docker:portainer_ui:publish_ip", where),
                   "the UI is published on this address (the original used portainer_agent_publish_ip for it)")


def _ui_network(value, tree, report, source, where):
    network = None if value in (None, "", "bridge", "default") else value
    paths.put(tree, "docker:portainer_ui:network", network)
    report.mapped(source, "portainer_ui_network", paths.shown("docker:portainer_ui:network", where))


def _ignoreip(value, tree, report, source, where):
    listed = value.split() if isinstance(value, str) else list(value or [])
    paths.put(tree, "fail2ban:ignoreip", listed)
    report.changed(source, "fail2ban_sshd_ignoreip", paths.shown("fail2ban:ignoreip", where),
                   "a space-separated string becomes a list")


def _apps(value, tree, report, source, where):
    paths.put(tree, "cluster:apps", list(value or []))
    if value is None:
        report.changed(source, "compute_container_apps", paths.shown("cluster:apps", where),
                       "null (which broke every container in the original) becomes []")
    else:
        report.mapped(source, "compute_container_apps", paths.shown("cluster:apps", where))


HANDLERS = {"cachefilesd_state": _cachefilesd_state, "fail2ban_sshd_ignoreip": _ignoreip,
            "compute_container_image_pull_always": _pull_always, "portainer_ui_publish_ip": _ui_publish_ip,
            "portainer_ui_network": _ui_network,
            "compute_container_apps": _apps, **networks.HANDLERS}

