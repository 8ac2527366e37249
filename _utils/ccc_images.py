"""
Images as the resolver sees them (``NodeFacts.image_lookup``): looked up on the node's engine,
pulled when missing, each reference pulled at most once per run however many containers use it.

``ccc:cluster:image_policy:pull``: ``missing`` (or true, the default) pulls only an image the
node lacks; ``always`` (the original's ``compute_container_image_pull_always``) pulls every
image once per deploy run too, and the answer carries the id the tag points to then
(``current_id``), which the apply compares with the id the container runs: a container is
recreated only when that id changed. A re-pull that fails (no registry reachable, a tag that
exists only on this node) keeps the local image and says so in ``note``. ``never`` (or false)
pulls nothing: a missing image fails its container.

User-chosen images are pulled anonymously (``credentials`` false), so users cannot borrow the
node's registry logins. One ``ImageLookup`` serves a whole run, from any number of threads:
a reference's first caller looks it up (and pulls it), the others wait for that answer.
"""

import threading

import ccc_engine

NOT_PULLED = "not on this node yet; a deploy pulls it"
PULL_MODES = {True: "missing", "missing": "missing", "always": "always", False: "never", "never": "never"}


def pull_mode(policy):
    """``ccc:cluster:image_policy:pull`` as ``missing``, ``always`` or ``never``; ``ValueError``
    naming the choices for anything else."""
    value = (policy or {}).get("pull", "missing")
    if isinstance(value, (bool, str)) and value in PULL_MODES:
        return PULL_MODES[value]
    raise ValueError(f"ccc:cluster:image_policy:pull must be missing, always or never (true/false), got {value!r}")


def short_id(image_id):
    """An image id as ``docker images`` shows it (12 hex digits, no ``sha256:``)."""
    return (image_id or "").removeprefix("sha256:")[:12] or "none"


class ImageLookup:
    """``lookup(ref, credentials) -> (info, error)`` with one answer per reference and run."""

    def __init__(self, clients, pull, mode="missing"):
        self._clients = clients  # ``clients()`` -> this thread's Docker client
        self._pull = pull and mode != "never"  # a run that may pull (a deploy) under a policy that lets it
        self._always = mode == "always"
        self._never = mode == "never"
        self._missing = "not on this node, and ccc:cluster:image_policy:pull is never"
        self._lock = threading.Lock()
        self._answers = {}  # (ref, credentials) -> [threading.Event, (info, error)]

    def __call__(self, ref, credentials):
        key = (ref, bool(credentials))
        with self._lock:
            entry = self._answers.get(key)
            mine = entry is None
            if mine:
                entry = self._answers[key] = [threading.Event(), None]
        if mine:
            try:
                entry[1] = self._look_up(ref, credentials)
            finally:
                entry[0].set()
        entry[0].wait()
        return entry[1] or (None, "image lookup failed")

    def _look_up(self, ref, credentials):
        client = self._clients()
        errors = ccc_engine.docker.errors
        note = None
        try:
            if self._always and self._pull:
                image, note = self._repull(client, ref, credentials)
            else:
                image = self._local_or_pulled(client, ref, credentials)
            if image is None:
                return {"id": None, "labels": {}, "env": [], "note": NOT_PULLED}, None
        except errors.ImageNotFound:
            return None, self._missing
        except _PullFailed as exc:
            return None, f"pull failed: {exc}"
        except errors.APIError as exc:
            return None, f"image lookup failed: {exc.explanation or exc}"
        except ccc_engine.ENGINE_ERRORS:
            return None, ccc_engine.ENGINE_DOWN
        config = image.attrs.get("Config") or {}
        info = {"id": image.id, "labels": config.get("Labels") or {}, "env": config.get("Env") or []}
        if self._always:
            info["current_id"] = image.id  # what the tag is now: a container on another id is outdated
        if note:
            info["note"] = note
        return info, None

    def _local_or_pulled(self, client, ref, credentials):
        """The node's copy, pulled when missing and this run may pull; None: missing in a test run."""
        try:
            return client.images.get(ref)
        except ccc_engine.docker.errors.ImageNotFound:
            if not self._pull:
                if self._never:
                    raise
                return None
        return _pull(client, ref, credentials)

    def _repull(self, client, ref, credentials):
        """``always``: pull, and when the pull fails keep the node's own copy (the pull's error
        when there is none), with a note saying why it was not refreshed."""
        try:
            return _pull(client, ref, credentials), None
        except _PullFailed as exc:
            try:
                image = client.images.get(ref)
            except ccc_engine.docker.errors.ImageNotFound:
                raise exc from None
            return image, f"could not be re-pulled ({exc}); the copy on this node is used"


class _PullFailed(Exception):
    """A pull the registry (or the way to it) refused; the message is Docker's explanation."""


def _pull(client, ref, credentials):
    repository, tag = split_reference(ref)
    try:
        return client.images.pull(repository, tag=tag, auth_config=None if credentials else {})
    except ccc_engine.docker.errors.APIError as exc:
        raise _PullFailed(exc.explanation or str(exc)) from exc


def split_reference(ref):
    """``(repository, tag or digest)`` of an image reference, ``latest`` when it has none."""
    if "@" in ref:
        return tuple(ref.split("@", 1))
    name, _, tag = ref.rpartition(":")
    if name and "/" not in tag:
        return name, tag
    return ref, "latest"
