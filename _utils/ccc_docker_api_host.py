"""
The node side of a role container's Docker API proxy (``ccc_docker_api``): the two template
units, the container's haproxy configuration, and its socket unit enabled and started; or all of
it gone. Called by the execution module ``_modules/ccc_service_container.py`` (the one place
that acts for role containers); ``run`` is Salt's ``cmd.run_all`` (argv list), so systemd is
asked, never guessed.
"""

import os
import stat

import ccc_docker_api as api
import ccc_safefs

UNIT_FILES = {f"{api.UNIT}@.socket": api.SOCKET_UNIT_TEXT, f"{api.UNIT}@.service": api.SERVICE_UNIT_TEXT}


class ProxyFailed(RuntimeError):
    """systemd did not start the proxy, or its socket is not there: the container is not made."""


def _write(directory, name, text, mode):
    """Root-owned and world-readable (haproxy reads its configuration as user haproxy; nothing
    in it is secret), replaced atomically."""
    os.makedirs(directory, mode=0o755, exist_ok=True)
    os.chmod(directory, 0o755)
    fd = ccc_safefs.open_root(directory)
    try:
        ccc_safefs.write_file_at(fd, name, text.encode(), mode)
    finally:
        os.close(fd)


def _systemctl(run, *args, check=True):
    done = run(["systemctl", *args], python_shell=False, ignore_retcode=True)
    if check and done["retcode"] != 0:
        said = (done.get("stderr") or done.get("stdout") or "").strip()
        raise ProxyFailed(f"systemctl {' '.join(args)} failed: {said}")
    return done


def _is_socket(path):
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def pending(name, profile, docker_url, run):
    """What ``ensure`` would change, as a list of phrases (empty: the proxy is as wanted)."""
    found = [f"unit {unit} written" for unit, text in UNIT_FILES.items()
             if ccc_safefs.read_text(os.path.join(api.UNIT_DIR, unit)) != text]
    if ccc_safefs.read_text(api.config_path(name)) != api.config_text(name, profile, docker_url):
        found.append(f"Docker API allowlist {profile} written")
    socket = api.socket_unit(name)
    if _systemctl(run, "is-enabled", "--quiet", socket, check=False)["retcode"] != 0 \
            or _systemctl(run, "is-active", "--quiet", socket, check=False)["retcode"] != 0 \
            or not _is_socket(api.socket_path(name)):
        found.append(f"{socket} enabled and started")
    return found


def ensure(name, profile, docker_url, run):
    """Units, configuration and socket in place (``pending``'s phrases returned as the changes);
    a changed allowlist restarts a running proxy (the socket, and so the bind, stays)."""
    found = pending(name, profile, docker_url, run)
    units_changed = False
    for unit, text in UNIT_FILES.items():
        if ccc_safefs.read_text(os.path.join(api.UNIT_DIR, unit)) != text:
            _write(api.UNIT_DIR, unit, text, 0o644)
            units_changed = True
    if units_changed:
        _systemctl(run, "daemon-reload")
    config = api.config_text(name, profile, docker_url)
    config_changed = ccc_safefs.read_text(api.config_path(name)) != config
    if config_changed:
        _write(api.CONFIG_DIR, os.path.basename(api.config_path(name)), config, 0o644)
    _systemctl(run, "enable", "--now", api.socket_unit(name))
    if config_changed or units_changed:
        _systemctl(run, "try-restart", api.service_unit(name))
    if not _is_socket(api.socket_path(name)):
        raise ProxyFailed(f"{api.socket_unit(name)} is active but {api.socket_path(name)} is not a socket")
    return found


def stale(name, pid):
    """True when running container ``name`` (process ``pid``) holds another inode at
    ``/var/run/docker.sock`` than its proxy socket now is (the socket unit was restarted by
    hand): its bind is dead until the container is made again."""
    try:
        inside = os.stat(f"/proc/{int(pid)}/root{api.TARGET}")
        now = os.stat(api.socket_path(name))
    except (OSError, ValueError):
        return False
    return (inside.st_dev, inside.st_ino) != (now.st_dev, now.st_ino)


def present(name):
    """True when the node has a proxy (configuration or socket) for role container ``name``."""
    return os.path.lexists(api.config_path(name)) or os.path.lexists(api.socket_path(name))


def remove(name, run):
    """Stop and disable the container's proxy units and remove its configuration."""
    _systemctl(run, "disable", "--now", api.socket_unit(name), api.service_unit(name), check=False)
    for path in (api.config_path(name), api.socket_path(name)):
        if os.path.lexists(path):
            os.unlink(path)
