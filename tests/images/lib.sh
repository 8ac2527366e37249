# Shared helpers of the test image builders (build.sh, build-node.sh); source it, never run it.
#
# The sourcing script sets $suite (the Debian suite) and $cache_dir before calling anything, and
# keeps its scratch directory in $work, which cleanup() (run on EXIT) unmounts and removes.
# Root filesystems made by debootstrap are cached as tarballs named by a hash of their inputs,
# so a second build (or a build into another daemon) only imports the tarball.

work=

# docker_host_arg [DOCKER_HOST_URL]: the daemon a build script talks to (its one optional argument).
docker_host_arg() {
    if [[ $# -gt 1 ]]; then
        echo "usage: $0 [DOCKER_HOST_URL]" >&2
        exit 2
    fi
    if [[ $# -eq 1 ]]; then
        export DOCKER_HOST=$1
    fi
}

log() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; }

# lock_daemon_builds: hold (until the script exits) a lock per daemon and builder, so two builds
# into one daemon (two pytest-xdist workers, two sessions) run one after the other: the second
# then finds the images current instead of importing them again or removing what the first uses.
lock_daemon_builds() {
    local key
    mkdir -p "$cache_dir"
    key=$(printf '%s %s' "$(basename "$0")" "${DOCKER_HOST:-default}" | sha256sum | cut -c1-16)
    exec {daemon_lock}>"$cache_dir/image-build-$key.lock"
    flock "$daemon_lock"
}
die() { log "$*"; exit 1; }

# Remove the scratch directory, unmounting anything debootstrap left there.
cleanup() {
    [[ -n $work && -d $work ]] || return 0
    awk -v w="$work/" 'index($5, w) == 1 { print $5 }' /proc/self/mountinfo |
        sort -r | while read -r mnt; do umount -l "$mnt" || true; done
    rm -rf --one-file-system "$work"
}
trap cleanup EXIT

# image_current TAG HASH: TAG exists and was built from inputs HASH.
image_current() {
    local have
    have=$(docker image inspect \
        --format '{{index .Config.Labels "ccc-test.inputs"}}' "$1" 2>/dev/null) ||
        return 1
    [[ $have == "$2" ]]
}

# The URI of the configured Debian archive that carries $suite.
debian_mirror() {
    local uri
    if [[ -n ${CCC_DEBIAN_MIRROR:-} ]]; then
        echo "$CCC_DEBIAN_MIRROR"
        return
    fi
    uri=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' \
            'Identifier: Packages' 2>/dev/null |
          awk -v s="$suite" '$2 == s { print $1; exit }') || true
    if [[ -z $uri ]]; then
        # One-line "deb [opts] URI suite ..." and deb822 "URIs:/Suites:".
        uri=$(shopt -s nullglob
              cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
                  2>/dev/null | sed 's/\[[^]]*\]//' |
                  awk -v s="$suite" '$1 == "deb" && $3 == s { print $2; exit }') || true
    fi
    if [[ -z $uri ]]; then
        uri=$(shopt -s nullglob
              for f in /etc/apt/sources.list.d/*.sources; do cat "$f"; echo; done |
              awk -v s="$suite" 'BEGIN { RS = "" } {
                  types = uris = suites = ""; on = 1
                  n = split($0, ln, "\n")
                  for (i = 1; i <= n; i++) {
                      if (ln[i] ~ /^#/) continue
                      if (ln[i] ~ /^Types:/) types = " " ln[i] " "
                      if (ln[i] ~ /^URIs:/) { split(ln[i], u, /[ \t]+/); uris = u[2] }
                      if (ln[i] ~ /^Suites:/) suites = " " ln[i] " "
                      if (ln[i] ~ /^Enabled:[ \t]*no/) on = 0
                  }
                  if (on && types ~ / deb / && suites ~ (" " s " ") && uris != "") {
                      print uris; exit
                  }
              }') || true
    fi
    [[ -n $uri ]] || die "no $suite archive in the apt sources; set CCC_DEBIAN_MIRROR"
    echo "${uri%/}"
}

# debootstrap_rootfs NAME INCLUDE: debootstrap $suite (minbase + INCLUDE) into $work/rootfs,
# with $work a fresh scratch directory under $cache_dir named after NAME.
debootstrap_rootfs() {
    local mirror
    mirror=$(debian_mirror)
    work=$(mktemp -d "$cache_dir/$1-build.XXXXXX")
    log "debootstrap $suite from $mirror (a few minutes)"
    if ! debootstrap --variant=minbase --include="$2" "$suite" \
            "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1; then
        tail -n 30 "$work/debootstrap.log" >&2
        die "debootstrap failed"
    fi
}

# finish_rootfs TARBALL: drop apt caches and logs from $work/rootfs, tar it to TARBALL
# (atomically) and remove the scratch directory.
finish_rootfs() {
    rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb \
        "$work"/rootfs/var/lib/apt/lists/* "$work"/rootfs/var/log/*.log
    tar --numeric-owner -C "$work/rootfs" -cf "$work/rootfs.tar" .
    mv "$work/rootfs.tar" "$1"
    cleanup
    work=
}

# cached_rootfs TARBALL MAKER: run "MAKER TARBALL" unless TARBALL exists; concurrent builds
# wait on a lock and share one run.
cached_rootfs() {
    local lock
    mkdir -p "$cache_dir"
    exec {lock}>"$1.lock"
    flock "$lock"
    if [[ ! -s $1 ]]; then
        "$2" "$1"
    else
        log "using cached $1"
    fi
    exec {lock}>&-
}
