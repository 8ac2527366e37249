"""
Images as the resolver sees them (``NodeFacts.image_lookup``): looked up on the node's engine,
pulled when missing, each reference pulled at most once per run however many containers use it.

User-chosen images are pulled anonymously (``credentials`` false), so users cannot borrow the
node's registry logins. One ``ImageLookup`` serves a whole run, from any number of threads:
a reference's first caller looks it up (and pulls it), the others wait for that answer.
"""

import threading

import ccc_engine

NOT_PULLED = "not on this node yet; a deploy pulls it"


class ImageLookup:
    """``lookup(ref, credentials) -> (info, error)`` with one answer per reference and run."""

    def __init__(self, clients, pull):
        self._clients = clients  # ``clients()`` -> this thread's Docker client
        self._pull = pull
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
        try:
            image = client.images.get(ref)
        except errors.ImageNotFound:
            if not self._pull:
                return {"id": None, "labels": {}, "env": [], "note": NOT_PULLED}, None
            try:
                repository, tag = split_reference(ref)
                image = client.images.pull(repository, tag=tag, auth_config=None if credentials else {})
            except errors.APIError as exc:
                return None, f"pull failed: {exc.explanation or exc}"
        except errors.APIError as exc:
            return None, f"image lookup failed: {exc.explanation or exc}"
        except ccc_engine.ENGINE_ERRORS:
            return None, ccc_engine.ENGINE_DOWN
        config = image.attrs.get("Config") or {}
        return {"id": image.id, "labels": config.get("Labels") or {}, "env": config.get("Env") or []}, None


def split_reference(ref):
    """``(repository, tag or digest)`` of an image reference, ``latest`` when it has none."""
    if "@" in ref:
        return tuple(ref.split("@", 1))
    name, _, tag = ref.rpartition(":")
    if name and "/" not in tag:
        return name, tag
    return ref, "latest"
