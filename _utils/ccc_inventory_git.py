"""
Read a lab's inventory repository on the master with the ``git`` command: resolve a revision to
its commit id, read a file's bytes at that commit, fetch from a remote. Every call is an
argument list (never a shell), with a timeout and no terminal prompt; files are read from git's
objects (``cat-file``), so no working tree is checked out or trusted, and a commit is read as
one immutable snapshot even while ccc-manager pushes the next one.
"""

import os
import subprocess

TIMEOUT = 60  # seconds; a fetch over a slow link included
ENV = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
# No hook or file-system monitor runs as root from a read or fetch (git's own ownership check
# already refuses a repository another user owns: its config could name programs to run).
HARDENING = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")


class GitError(Exception):
    """git failed (no repository, unknown revision, network): the message says why."""


def _git(repo, *args, check=True):
    if not os.path.isdir(repo):
        raise GitError(f"{repo}: no such repository")
    try:
        proc = subprocess.run(["git", *HARDENING, "-C", repo, *args], capture_output=True, timeout=TIMEOUT, env=ENV,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git {args[0]} in {repo}: {exc}") from None
    if check and proc.returncode:
        message = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {args[0]} in {repo}: {message[-1] if message else f'exit {proc.returncode}'}")
    return proc


def resolve(repo, rev):
    """The commit id ``rev`` (a branch, tag, ``HEAD``, ``origin/main``) names in ``repo``."""
    proc = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}", check=False)
    commit = proc.stdout.decode("ascii", "replace").strip()
    if proc.returncode or not commit:
        said = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"{repo}: {said[0] if said else f'{rev} names no commit'}")
    return commit


def read(repo, commit, path):
    """The text of ``path`` at ``commit``; ``None`` when the commit has no such file."""
    kind = _git(repo, "cat-file", "-t", f"{commit}:{path}", check=False)
    if kind.returncode or kind.stdout.strip() != b"blob":
        return None
    data = _git(repo, "cat-file", "blob", f"{commit}:{path}").stdout
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise GitError(f"{path} at {commit[:12]}: not UTF-8 text") from None


def fetch(repo, remote):
    """Fetch ``remote`` into ``repo``'s remote-tracking branches."""
    _git(repo, "fetch", "--quiet", "--prune", "--no-tags", "--end-of-options", remote)
