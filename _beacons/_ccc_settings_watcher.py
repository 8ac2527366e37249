"""
``SettingsWatcher``: the ``ccc_settings`` beacon's watching logic, plain Python (no Salt), so
that it is tested with a fake clock and real files. The beacon (``ccc_settings.py``) wraps it;
how it watches is described there.
"""

import errno
import logging
import os
import time

try:
    import inotify_simple

    HAS_INOTIFY = True
except ImportError:  # pragma: no cover - the minion lacks the package
    inotify_simple = None
    HAS_INOTIFY = False

log = logging.getLogger(__name__)

# Tunables (seconds) and their defaults; a beacon configuration or ccc:cluster:beacon sets them.
DEFAULTS = {"quiet_period": 0.15, "poll_interval": 30.0, "max_delay": 10.0}

if HAS_INOTIFY:
    _F = inotify_simple.flags
    DIR_MASK = (_F.CLOSE_WRITE | _F.MOVED_TO | _F.CREATE | _F.DELETE | _F.MOVED_FROM | _F.ATTRIB
                | _F.DELETE_SELF | _F.MOVE_SELF | _F.DONT_FOLLOW | _F.ONLYDIR)
    SELF_GONE = _F.DELETE_SELF | _F.MOVE_SELF | _F.IGNORED | _F.UNMOUNT
    OVERFLOW = _F.Q_OVERFLOW
else:  # pragma: no cover
    DIR_MASK = SELF_GONE = OVERFLOW = 0

UNKNOWN = object()  # lstat failed for another reason than "not there": decide later


def signature(path):
    """``(mtime_ns, ctime_ns, size, inode)`` of ``path`` itself (never through a symlink),
    ``None`` when it does not exist, ``UNKNOWN`` on any other error. The ctime: the user sets the
    mtime (``touch -d``), so a save of the same size with the mtime set back would otherwise look
    unchanged; every change moves the ctime (the NFS server's, the same on every client)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return UNKNOWN
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def version(sig):
    """
    A settled change's file version as event data: ``"<mtime_ns>:<ctime_ns>:<size>:<inode>"``, or
    ``"deleted"``. Every node that watches the (shared) file sees the same version, so the
    master applies one edit once however many nodes report it.
    """
    return "deleted" if sig is None else ":".join(str(part) for part in sig)


class SettingsWatcher:
    """
    Watch settings files and report settled changes.

    ``files``: ``[{"stack": ..., "path": ...}]`` (or a ``{stack: path}`` mapping).
    ``poll()`` never blocks and returns ``[{"stack", "change", "version"}]``. ``clock`` is a
    monotonic clock in seconds; ``notifier_factory`` builds the inotify object (tests pass one
    that sees nothing, to exercise the stat poll alone). Not thread-safe: a caller that polls
    from two threads holds one lock around every call.
    """

    def __init__(self, files, quiet_period=DEFAULTS["quiet_period"], poll_interval=DEFAULTS["poll_interval"],
                 max_delay=DEFAULTS["max_delay"], clock=time.monotonic, notifier_factory=None):
        self.quiet_period = quiet_period
        self.poll_interval = poll_interval
        self.max_delay = max_delay
        self.clock = clock
        self._factory = notifier_factory or inotify_simple.INotify
        self._notifier = None
        self._closed = False
        self.files = {}        # stack -> path
        self.dirs = {}         # dir -> {file name: stack}
        self.wds = {}          # wd -> dir
        self.dir_wd = {}       # dir -> wd (watched dirs only)
        self.seen = {}         # stack -> last signature
        self.pending = {}      # stack -> [first change, last change]
        self.next_poll = self.clock() + self.poll_interval
        self.set_files(files)

    # -- configuration ---------------------------------------------------------------------

    @staticmethod
    def _normalise(files):
        if isinstance(files, dict):
            return {str(stack): os.path.normpath(path) for stack, path in files.items()}
        return {str(item["stack"]): os.path.normpath(item["path"]) for item in files or []}

    def set_files(self, files):
        """Apply a new file list; returns True when it differed. New files are seen, not fired."""
        wanted = self._normalise(files)
        if wanted == self.files:
            return False
        for stack in list(self.files):
            if wanted.get(stack) != self.files[stack]:
                self.seen.pop(stack, None)
                self.pending.pop(stack, None)
        self.files = wanted
        self.dirs = {}
        for stack, path in wanted.items():
            self.dirs.setdefault(os.path.dirname(path), {})[os.path.basename(path)] = stack
        for directory in [d for d in self.dir_wd if d not in self.dirs]:
            self._unwatch(directory)
        for directory in self.dirs:
            if directory not in self.dir_wd:
                self._watch(directory)
        for stack, path in wanted.items():
            if stack not in self.seen:
                self.seen[stack] = signature(path)
        return True

    @property
    def watched_dirs(self):
        return sorted(self.dir_wd)

    @property
    def missing_dirs(self):
        return sorted(d for d in self.dirs if d not in self.dir_wd)

    def fileno(self):
        """The inotify descriptor to wait on (``None`` while nothing is watched)."""
        return None if self._notifier is None else self._notifier.fileno()

    def next_due(self):
        """Seconds until the next pending change may settle; ``None`` when none is pending."""
        if not self.pending:
            return None
        due = min(min(last + self.quiet_period, first + self.max_delay) for first, last in self.pending.values())
        return max(0.0, due - self.clock())

    # -- inotify ---------------------------------------------------------------------------

    def _inotify(self):
        if self._notifier is None:
            self._notifier = self._factory()
        return self._notifier

    def _watch(self, directory):
        """Watch ``directory`` (a real directory, not a symlink); False when it cannot be."""
        try:
            wd = self._inotify().add_watch(directory, DIR_MASK)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                log.warning("ccc_settings: cannot watch %s (%s); it is polled instead", directory, exc)
            return False
        self.dir_wd[directory] = wd
        self.wds[wd] = directory
        return True

    def _unwatch(self, directory):
        wd = self.dir_wd.pop(directory, None)
        if wd is None:
            return
        if self.wds.get(wd) == directory:
            del self.wds[wd]
        if wd not in self.wds and self._notifier is not None:
            try:
                self._notifier.rm_watch(wd)
            except OSError:
                pass  # already gone with its directory

    def _touch(self, stack, now):
        entry = self.pending.get(stack)
        if entry is None:
            self.pending[stack] = [now, now]
        else:
            entry[1] = now

    def _touch_dir(self, directory, now):
        for stack in self.dirs.get(directory, {}).values():
            self._touch(stack, now)

    def _drain(self, now):
        if self._notifier is None:
            return
        try:
            events = self._notifier.read(timeout=0)
        except OSError as exc:
            log.warning("ccc_settings: reading inotify failed (%s)", exc)
            return
        lost = set()
        for event in events:
            if event.mask & OVERFLOW:
                for stack in self.files:
                    self._touch(stack, now)
                continue
            directory = self.wds.get(event.wd)
            if directory is None:
                continue
            if event.mask & SELF_GONE:
                lost.add(directory)
                continue
            stack = self.dirs.get(directory, {}).get(event.name)
            if stack is not None:
                self._touch(stack, now)
        for directory in lost:
            # Deleted, moved away or unmounted: its files may be gone. Re-arm on the path now
            # or, if it is not back, at the next poll.
            self._unwatch(directory)
            self._touch_dir(directory, now)
            self._watch(directory)

    # -- the poll --------------------------------------------------------------------------

    def _stat_poll(self, now):
        for directory in self.missing_dirs:
            if self._watch(directory):
                self._touch_dir(directory, now)  # files made before the watch existed
        for stack, path in self.files.items():
            if stack not in self.pending and signature(path) != self.seen.get(stack):
                self._touch(stack, now)

    def poll(self, stat=True):
        """
        Return the settled changes since the last call; never blocks. ``stat=False`` leaves the
        ``poll_interval`` stat poll to a later call (a caller woken by inotify alone).
        """
        if self._closed:
            return []
        now = self.clock()
        self._drain(now)
        if stat and now >= self.next_poll:
            self.next_poll = now + self.poll_interval
            self._stat_poll(now)
        if not self.pending:
            return []
        events = []
        for stack in sorted(self.pending):
            first, last = self.pending[stack]
            if now - last < self.quiet_period and now - first < self.max_delay:
                continue
            del self.pending[stack]
            current = signature(self.files[stack])
            before = self.seen.get(stack)
            if current is UNKNOWN or current == before:
                continue
            self.seen[stack] = current
            if before is None:
                change = "created"
            elif current is None:
                change = "deleted"
            else:
                change = "modified"
            events.append({"stack": stack, "change": change, "version": version(current)})
        return events

    def inherit(self, old):
        """
        Take over what an older watcher of the same files knew (last signatures, pending
        changes) and close it. The next ``poll`` stat-checks every file, so a change made while
        no watcher was looking still fires, and a file this watcher has never seen still does not.
        """
        for stack, path in self.files.items():
            if old.files.get(stack) == path:
                if stack in old.seen:
                    self.seen[stack] = old.seen[stack]
                if stack in old.pending:
                    self.pending[stack] = list(old.pending[stack])
        old.close()
        self.next_poll = self.clock()

    def close(self):
        self._closed = True
        if self._notifier is not None:
            try:
                self._notifier.close()
            finally:
                self._notifier = None
        self.dir_wd.clear()
        self.wds.clear()

    @property
    def closed(self):
        return self._closed
