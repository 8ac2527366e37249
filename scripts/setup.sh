#!/usr/bin/env bash
# Prepare a Debian/Ubuntu machine (as root) for ccc-salt: apt packages, the project venv in
# .venv, a Docker engine that answers, and shared mount propagation on / (Docker needs it for
# the rslave bind of /storage/private; systemd hosts have it already).
#   scripts/setup.sh [--test]   --test also installs the test dependencies
set -euo pipefail
cd "$(dirname "$0")/.."
with_tests=0
[[ "${1:-}" == "--test" ]] && with_tests=1

need_apt=()
command -v dockerd >/dev/null || need_apt+=(docker.io)
command -v debootstrap >/dev/null || need_apt+=(debootstrap)
command -v ssh-keygen >/dev/null || need_apt+=(openssh-client)
command -v gpg >/dev/null || need_apt+=(gnupg)   # Salt's gpg renderer (ccc:secrets, docs/secrets.md)
[[ -x /bin/busybox ]] || need_apt+=(busybox-static)
command -v apt-ftparchive >/dev/null || need_apt+=(apt-utils)   # test apt repository (tests/support/aptrepo.py)
command -v ip >/dev/null || need_apt+=(iproute2)
command -v iptables >/dev/null || need_apt+=(iptables)
command -v netplan >/dev/null || [[ -x /usr/sbin/netplan ]] || need_apt+=(netplan.io)   # the netplan role's tests validate with netplan generate
if ((with_tests)) && ! command -v ansible-vault >/dev/null; then need_apt+=(ansible-core); fi   # the migration tests read vaults ansible-vault writes
if ((with_tests)) && ! [[ -x /usr/sbin/haproxy ]]; then need_apt+=(haproxy); fi   # the role containers' Docker API proxy (tests/unit/test_docker_api_proxy.py)
python3 -c 'import venv, ensurepip' 2>/dev/null || need_apt+=(python3-venv)
if ((${#need_apt[@]})); then
    echo "== apt-get install ${need_apt[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

if [[ ! -x .venv/bin/python ]]; then
    echo "== creating .venv"
    python3 -m venv .venv
fi
stamp=".venv/.ccc-installed-$(sha256sum pyproject.toml | cut -c1-16)-$with_tests"
if [[ ! -e "$stamp" ]]; then
    echo "== installing Python dependencies into .venv"
    .venv/bin/pip install -q --upgrade pip >/dev/null
    if ((with_tests)); then .venv/bin/pip install -q ".[test]"; else .venv/bin/pip install -q .; fi
    rm -f .venv/.ccc-installed-*
    touch "$stamp"
fi

if ! docker info >/dev/null 2>&1; then
    echo "== starting dockerd (log: /var/log/ccc-dockerd.log)"
    # /run is not always a tmpfs: a pidfile left by an engine killed before a reboot may name a
    # pid the kernel has since given to another process, and the engine (or its containerd) then
    # refuses to start. Such a file goes; one naming a live engine stays, and the start reports it.
    for stale in /run/docker.pid:dockerd /run/docker/containerd/containerd.pid:containerd; do
        file=${stale%%:*} prog=${stale##*:}
        [[ -f $file ]] || continue
        pid=$(<"$file")
        argv0=$(tr '\0' '\n' 2>/dev/null <"/proc/$pid/cmdline" | head -1) || argv0=
        [[ ${argv0##*/} == "$prog" ]] || rm -f "$file"
    done
    # its own session: a caller that cleans up its process group (a CI step, a job runner) must
    # not take the engine down with it
    setsid nohup dockerd >/var/log/ccc-dockerd.log 2>&1 </dev/null &
    for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null 2>&1 || { tail -20 /var/log/ccc-dockerd.log; echo "dockerd did not start" >&2; exit 1; }
fi

if [[ "$(findmnt -n -o PROPAGATION /)" == private ]]; then
    echo "== making / a shared mount (as systemd does at boot)"
    mount --make-rshared /
fi

# The test nodes (tests/nodes/) run systemd, whose inotify instances count against root on the
# host: Debian's default of 128 runs out with a few nodes and the beacon tests side by side.
if ((with_tests)) && (( $(cat /proc/sys/fs/inotify/max_user_instances) < 1024 )); then
    echo "== raising fs.inotify.max_user_instances to 1024 for the test nodes"
    sysctl -qw fs.inotify.max_user_instances=1024
fi
