#!/usr/bin/env bash
# Build the local test images into a Docker daemon; nothing is pulled.
#
#   tests/images/build.sh [DOCKER_HOST_URL]
#
# The daemon is the argument, else $DOCKER_HOST, else the docker default.
#   ccc-test/sshd:1  Debian bookworm minbase + openssh-server, entrypoint
#                    sshd/ccc-entrypoint (CCC image env contract subset)
#   ccc-test/tiny:1  the host's static busybox; sleeps until SIGTERM
# Both carry the labels frp.enabled=true and frp.22=tcp, expose 22, and a
# label ccc-test.inputs=<hash of the build inputs>.  An image is skipped when
# its tag exists with the current hash.  The sshd root filesystem is cached as
# ${CCC_CACHE_DIR:-$HOME/.cache/ccc-salt}/sshd-rootfs-<hash>.tar, so building
# it into another daemon takes seconds; making it runs debootstrap (as root)
# against the Debian mirror apt is configured with (override with
# CCC_DEBIAN_MIRROR).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_dir=${CCC_CACHE_DIR:-$HOME/.cache/ccc-salt}
recipe=1   # bump when a recipe below changes in a way the hashes miss
suite=bookworm
include=openssh-server,ca-certificates
busybox=/bin/busybox
sys_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
tiny_entrypoint='["/bin/sh","-c","trap \"exit 0\" TERM; while :; do sleep 3600 & wait $!; done"]'
. "$here/lib.sh"
docker_host_arg "$@"
lock_daemon_builds

# import_image TAG HASH ENTRYPOINT_JSON PATH_ENV TAR ("-" for stdin)
import_image() {
    docker import \
        --change "ENTRYPOINT $3" \
        --change "ENV PATH=$4" \
        --change 'EXPOSE 22' \
        --change "LABEL frp.enabled=true frp.22=tcp ccc-test.inputs=$2" \
        --message "ccc-salt test image ($2)" \
        "$5" "$1" >/dev/null
}

# Create the cached sshd root filesystem tarball $1 with debootstrap.
make_sshd_rootfs() {
    debootstrap_rootfs sshd "$include"
    install -m 755 "$here/sshd/ccc-entrypoint" \
        "$work/rootfs/usr/local/sbin/ccc-entrypoint"
    install -m 644 "$here/sshd/sshd_config" "$work/rootfs/etc/ssh/sshd_config"
    # Host keys belong on the /home/.sshd volume, never in the image.
    rm -f "$work"/rootfs/etc/ssh/ssh_host_*
    finish_rootfs "$1"
}

build_sshd() {
    local tag=ccc-test/sshd:1 hash tarball
    hash=$( { echo "recipe=$recipe suite=$suite variant=minbase include=$include"
              dpkg --print-architecture
              cd "$here/sshd" && find . -type f | LC_ALL=C sort | xargs sha256sum
            } | sha256sum | cut -c1-16)
    if image_current "$tag" "$hash"; then
        log "$tag is up to date"
        return
    fi
    tarball=$cache_dir/sshd-rootfs-$hash.tar
    cached_rootfs "$tarball" make_sshd_rootfs
    import_image "$tag" "$hash" '["/usr/local/sbin/ccc-entrypoint"]' \
        "$sys_path" "$tarball"
    log "built $tag"
}

build_tiny() {
    local tag=ccc-test/tiny:1 hash cmd
    [[ -x $busybox ]] || die "$busybox missing (install busybox-static)"
    if ldd "$busybox" >/dev/null 2>&1; then
        die "$busybox is dynamically linked (install busybox-static)"
    fi
    hash=$( { echo "recipe=$recipe $tiny_entrypoint"; sha256sum <"$busybox"; } |
            sha256sum | cut -c1-16)
    if image_current "$tag" "$hash"; then
        log "$tag is up to date"
        return
    fi
    work=$(mktemp -d)
    mkdir -p "$work"/rootfs/{bin,etc,root,proc,sys,dev}
    install -d -m 1777 "$work/rootfs/tmp"
    cp "$busybox" "$work/rootfs/bin/busybox"
    for cmd in sh sleep env id cat ls stat mkdir touch; do
        ln -s busybox "$work/rootfs/bin/$cmd"
    done
    echo 'root:x:0:0:root:/root:/bin/sh' >"$work/rootfs/etc/passwd"
    echo 'root:x:0:' >"$work/rootfs/etc/group"
    tar --numeric-owner --owner=0 --group=0 -C "$work/rootfs" -c . |
        import_image "$tag" "$hash" "$tiny_entrypoint" /bin -
    cleanup
    work=
    log "built $tag"
}

build_tiny
build_sshd
