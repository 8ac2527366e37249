"""
The inventory pillar (runner ``ccc_inventory``): a lab that keeps its users and containers in
its Ansible inventory repository, edited with ccc-manager, keeps that repository as the source
of truth (docs/pillar.md, "The lab's inventory repository").

``refresh`` (on the master's schedule) fetches the repository when configured to, reads the
files at the configured revision, maps them with the migration's mapping
(``ccc_migrate_records``) against the site pillar, and stores what the external pillar
``ccc_inventory`` serves (``ccc_inventory_state``); the pillar watch sees the stored file change
and brings the new pillar to the nodes. ``report`` shows the mapping report of the current
revision. Master config (``scripts/master_config.py --inventory-repo``)::

    ccc_inventory:
      repo: /srv/ccc-inventory        # a clone or bare repository on the master
      rev: HEAD                       # or origin/main with fetch: origin
      fetch: null                     # a remote to fetch before each read
      folder: group_vars/ccc-cluster
      files: [user-list.yml, user-containers.yml]
"""

import logging
import posixpath

import ccc_inventory_git as git
import ccc_inventory_state as state_store
import ccc_migrate_records as records
import ccc_pillar_watch
import salt.pillar

__virtualname__ = "ccc_inventory"
log = logging.getLogger(__name__)

DEFAULTS = {"repo": None, "rev": "HEAD", "fetch": None, "folder": "group_vars/ccc-cluster",
            "files": ["user-list.yml", "user-containers.yml"]}


def __virtual__():
    return __virtualname__


def _config():
    config = {**DEFAULTS, **(__opts__.get("ccc_inventory") or {})}
    return config if config["repo"] else None


def _site_ccc():
    """The site's ``ccc`` pillar without this source (the checks read its user types and cluster
    settings), compiled for the master's id; raises ValueError when it does not render."""
    opts = dict(__opts__, ext_pillar=[])
    minion_id = opts.get("id") or "master"
    pillar = salt.pillar.get_pillar(opts, {"id": minion_id}, minion_id, saltenv="base").compile_pillar()
    if pillar.get("_errors"):
        raise ValueError(f"the site pillar does not render: {'; '.join(map(str, pillar['_errors']))}")
    ccc = pillar.get("ccc") or {}
    return {key: value for key, value in ccc.items() if key not in ("users", "containers", "secrets")}


def _read(config, commit):
    texts = {}
    for name in config["files"]:
        path = posixpath.join(config["folder"], name)
        texts[path] = git.read(config["repo"], commit, path)
    return records.read_vars(texts)


def _failed(state, revision, site, problem, retry=False):
    """The state after a revision that does not load: what was served stays. ``retry``: git
    failed (it may not next time), so the revision is read again at the next run."""
    served_from = state.get("loaded_revision")
    kept = f"revision {served_from[:12]} stays in use" if served_from else "nothing is served yet"
    return {**state, "revision": state.get("revision") if retry else revision, "site": site,
            "report": {"revision": revision, "loaded": False, "served_revision": served_from,
                       "problem": f"{problem}: {kept}"}}


def _examine(config, state, site_fingerprint):
    """The new state for the repository's current revision (``None``: nothing to do)."""
    if config["fetch"]:
        try:
            git.fetch(config["repo"], config["fetch"])
        except git.GitError as exc:
            log.warning("ccc_inventory: %s (the revision already fetched is used)", exc)
    try:
        revision = git.resolve(config["repo"], config["rev"])
    except git.GitError as exc:
        return _failed(state, None, site_fingerprint, str(exc))
    if revision == state.get("revision") and site_fingerprint == state.get("site"):
        return None
    try:
        found = _read(config, revision)
        site = _site_ccc()
    except git.GitError as exc:
        return _failed(state, revision, site_fingerprint, str(exc), retry=True)
    except (records.SourceError, ValueError) as exc:
        return _failed(state, revision, site_fingerprint, str(exc))
    served, last_good, report = records.map_revision(found, site, state.get("last_good") or {}, revision)
    return {"revision": revision, "site": site_fingerprint, "loaded_revision": revision, "served": served,
            "last_good": last_good,
            "report": {"revision": revision, "loaded": True, "served_revision": revision, "problem": None,
                       **report.as_dict()}}


def refresh(force=False):
    """
    Read the inventory repository's current revision and store what the ``ccc_inventory``
    external pillar serves. Nothing is read again while the revision and the site pillar's
    files stay the same (``force``: read anyway). A revision that does not load keeps the last
    good one in use; a refused entry keeps its last good version. Scheduled on the master
    (``scripts/master_config.py``); the pillar watch brings the result to the nodes.

    CLI Example:

    .. code-block:: bash

        salt-run ccc_inventory.refresh
    """
    config = _config()
    if config is None:
        return {"configured": False}
    cachedir = __opts__["cachedir"]
    with state_store.locked(cachedir):
        state = state_store.read(cachedir)
        site_fingerprint = ccc_pillar_watch.tree_fingerprint(ccc_pillar_watch.pillar_roots(__opts__))
        if force:
            state = {**state, "revision": None}
        new = _examine(config, state, site_fingerprint)
        written = new is not None and state_store.write(cachedir, new)
        current = new or state
    report = current.get("report") or {}
    if written and not report.get("loaded"):
        log.warning("ccc_inventory: revision %s not loaded: %s", report.get("revision"), report.get("problem"))
    elif written:
        log.info("ccc_inventory: revision %s mapped: %s", report.get("revision"), report.get("summary"))
    return {"configured": True, "revision": report.get("revision"), "loaded": report.get("loaded"),
            "served_revision": report.get("served_revision"), "changed": written}


def report(full=False):
    """
    The mapping report of the inventory repository's current revision: its commit id, whether
    it loaded (and why not), which revision is served, and each entry mapped, changed, not
    mapped or refused with the reason; ``full`` adds the deliberate differences of the deployed
    containers (as in the migration report).

    CLI Example:

    .. code-block:: bash

        salt-run ccc_inventory.report
    """
    if _config() is None:
        return {"configured": False}
    stored = state_store.read(__opts__["cachedir"]).get("report")
    if not stored:
        return {"configured": True, "revision": None, "problem": "not read yet: salt-run ccc_inventory.refresh"}
    shown = {key: value for key, value in stored.items() if full or key not in ("differences", "written")}
    return {"configured": True, **shown}
