"""
Root-only ccc-salt folders hidden inside containers that mount a folder above them.

The cluster state dir (``ccc:cluster:state_dir``, by default ``<user_data>/.ccc-salt``: move
markers, deploy records, last accepted settings and, by default, every stack's SSH host key set)
must be on the shared storage (it follows a container from node to node) and lies below the
user-data root, which ``ADMIN_USER_ACCESS`` containers mount read-write. Where a container's bind
holds such a folder, the container gets an empty read-only tmpfs at the folder's place inside
the bind (Docker mounts by destination, so the tmpfs lands on the bind): it sees an empty folder,
cannot write there, and cannot unmount the tmpfs (no ``CAP_SYS_ADMIN``). ``RUN_PRIVILEGED``
containers are host root anyway and are not contained by this.

One rule for every container: the resolver adds ``covers`` (container paths) to the spec when
there are any, so only containers with such a bind get a new spec hash. Pure.
"""

import os

SIZE = 4096  # bytes: nothing is ever written into a read-only tmpfs
MODE = 0o700


def root_only_folders(cluster):
    """The root-only ccc-salt folders on storage that containers may mount: the state dir and a
    host key store the admin set (``host_keys:store_dir``), each once, none below another."""
    folders = [cluster["state_dir"]]
    configured = (cluster.get("host_keys") or {}).get("store_dir")
    if configured and os.path.isabs(str(configured)):
        folders.append(str(configured))
    folders = sorted({os.path.normpath(folder) for folder in folders})
    return [folder for folder in folders if not any(_below(folder, other) for other in folders)]


def _below(path, root):
    """True when ``path`` lies strictly below ``root`` (normalised paths)."""
    return path.startswith(root.rstrip("/") + "/")


def covers(cluster, mounts):
    """
    For each bind in ``mounts`` (as the resolver builds them, sources before pinning) whose source
    holds a root-only folder strictly below it: ``{"target", "root", "parts"}``, ``target`` the
    folder's path in the container, ``root``/``parts`` the folder on the host (created root-only
    by descriptor before the container, so Docker never makes the mount point itself).
    """
    found = []
    for mount in mounts:
        source = os.path.normpath(mount["source"])
        for folder in root_only_folders(cluster):
            if _below(folder, source):
                parts = os.path.relpath(folder, source).split("/")
                found.append({"target": os.path.join(mount["target"], *parts), "root": source, "parts": parts})
    return sorted(found, key=lambda cover: cover["target"])


def folders(covered):
    """The ``ccc_userdirs`` folder entries of ``covered``: root's, 0700, made when missing."""
    return [{"root": cover["root"], "parts": list(cover["parts"]), "owner": (0, 0), "mode": MODE,
             "path": os.path.join(cover["root"], *cover["parts"])} for cover in covered]
