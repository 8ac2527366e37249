#!/usr/bin/env bash
# Build the test node image ccc-test/node:1 into a Docker daemon; nothing is pulled.
#
#   tests/images/build-node.sh [DOCKER_HOST_URL]
#
# A Debian bookworm node that boots systemd as PID 1 in a (nearly) privileged container (see
# tests/support/sysnode.py), for tests of the cluster roles: systemd, dbus, iptables, openssh
# (fail2ban's sshd), tzdata, gnupg, and the shared libraries the project's pyenv Python needs
# (the node runs Salt from the host's .venv, bind-mounted read-only at its own path). No Docker
# engine and no apt sources: roles install Docker from the test apt repository they are given.
# Units that cannot work in a container (gettys, kernel file systems, udev triggers) are masked.
# PID 1 is node/ccc-node-init, which prepares /sys, the cgroups and /proc/sys, then execs systemd.
# The SSH host keys made by debootstrap are in the image, so every test node shares them.
# The root filesystem is cached as ${CCC_CACHE_DIR:-$HOME/.cache/ccc-salt}/node-rootfs-<hash>.tar
# (hash of the package and unit lists, $rootfs_recipe and the architecture); the image carries the
# label ccc-test.inputs=<hash of that and the image settings> and is skipped when current.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_dir=${CCC_CACHE_DIR:-$HOME/.cache/ccc-salt}
suite=bookworm
tag=ccc-test/node:1
rootfs_recipe=1   # bump when make_node_rootfs changes
# systemd's signal for a clean shutdown; container=docker tells systemd where it runs;
# node/ccc-node-init prepares the mounts and becomes systemd.
dockerfile='COPY ccc-node-init /usr/local/sbin/ccc-node-init
STOPSIGNAL SIGRTMIN+3
ENV container=docker
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ENTRYPOINT ["/usr/local/sbin/ccc-node-init"]'
include=systemd,systemd-sysv,dbus,iptables,procps,kmod,iproute2,ca-certificates,gnupg,tzdata
include+=,openssh-server,less
# What the pyenv Python and its extension modules link against (ldd of lib-dynload).
include+=,libssl3,libffi8,libsqlite3-0,libbz2-1.0,libreadline8,libexpat1,libncursesw6,libnsl2
masked=(
    getty@.service serial-getty@.service console-getty.service container-getty@.service
    getty.target systemd-udevd.service systemd-udev-trigger.service systemd-udev-settle.service
    dev-hugepages.mount sys-kernel-config.mount sys-kernel-debug.mount sys-kernel-tracing.mount
    sys-fs-fuse-connections.mount systemd-remount-fs.service systemd-firstboot.service
    systemd-modules-load.service proc-sys-fs-binfmt_misc.automount
    systemd-binfmt.service e2scrub_reap.service apt-daily.timer apt-daily-upgrade.timer
)

. "$here/lib.sh"
docker_host_arg "$@"
lock_daemon_builds

# Create the cached node root filesystem tarball $1.
make_node_rootfs() {
    local unit root
    debootstrap_rootfs node "$include"
    root=$work/rootfs
    for unit in "${masked[@]}"; do
        ln -sf /dev/null "$root/etc/systemd/system/$unit"
    done
    # No apt sources: a node reaches no archive, only the repository a test hands it.
    rm -f "$root/etc/apt/sources.list"
    # A fresh machine id on every boot of every node.
    : >"$root/etc/machine-id"
    rm -f "$root/var/lib/dbus/machine-id"
    echo 'ccc-test-node' >"$root/etc/hostname"
    finish_rootfs "$1"
}

rootfs_hash=$( { echo "recipe=$rootfs_recipe suite=$suite variant=minbase include=$include"
                 echo "masked=${masked[*]}"; dpkg --print-architecture; } | sha256sum | cut -c1-16)
image_hash=$( { printf '%s\n' "$rootfs_hash" "$dockerfile"
               cd "$here/node" && find . -type f | LC_ALL=C sort | xargs sha256sum
             } | sha256sum | cut -c1-16)
if image_current "$tag" "$image_hash"; then
    log "$tag is up to date"
    exit 0
fi
tarball=$cache_dir/node-rootfs-$rootfs_hash.tar
cached_rootfs "$tarball" make_node_rootfs
# docker import cannot set STOPSIGNAL, so a local build (no pull) adds the image settings.
docker import --message "ccc-salt test node rootfs ($rootfs_hash)" \
    "$tarball" "ccc-test/node-rootfs:$rootfs_hash" >/dev/null
printf "FROM ccc-test/node-rootfs:%s\n%s\nLABEL ccc-test.inputs=%s\n" \
        "$rootfs_hash" "$dockerfile" "$image_hash" |
    docker build --quiet --tag "$tag" --file - "$here/node" >/dev/null 2>"$cache_dir/node-build.err" ||
    { cat "$cache_dir/node-build.err" >&2; die "docker build failed"; }
docker rmi "ccc-test/node-rootfs:$rootfs_hash" >/dev/null
log "built $tag"
