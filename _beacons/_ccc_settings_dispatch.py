"""
The ``ccc_settings`` beacon's ``immediate`` mode: a settled change is fired when its quiet
period ends, not at the beacon's next call.

Salt 3008's minion calls its beacons from a fixed one-second periodic callback, so a change that
settles just after a call waits almost a second more (and a change first seen at a call settles
one call later at the earliest): about a second of every redeploy. The ``Dispatcher`` thread
waits on the watcher's inotify descriptor and a wake-up pipe, without a timeout while nothing is
pending and until the next change may settle while one is, so an idle node pays nothing for it.
A settled change goes to ``deliver`` (the beacon fires it exactly as Salt fires a beacon's
events). Everything else stays with the beacon's own calls: the stat poll, the file list, the
pillar's health, and returning what the thread could not deliver.

The thread delivers only while Salt keeps calling the beacon (``heartbeat``): a disabled or
removed beacon is no longer called, and then nothing is fired behind its back; the next call
returns whatever settled meanwhile.
"""

import errno
import logging
import os
import select
import threading
import time

log = logging.getLogger(__name__)

STALE_MIN = 3.0  # s: the beacon counts as no longer called after max(this, 2.5 of its intervals)
# s between two looks at the watcher: a user writing other files in their settings folder in a
# loop wakes the thread at most this often (the beacon's calls drained inotify once a second).
REST = 0.05
_BAD = select.POLLERR | select.POLLHUP | select.POLLNVAL


class Dispatcher:
    """
    Fire ``watcher``'s settled changes as they settle, through ``deliver(events)``.

    ``lock`` guards the watcher: the beacon holds it around its own calls of the watcher.
    ``clock`` is a monotonic clock in seconds (the heartbeat's).
    """

    def __init__(self, watcher, lock, deliver, name="ccc_settings", clock=time.monotonic):
        self.watcher, self.lock, self.deliver, self.clock = watcher, lock, deliver, clock
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._stopped = False
        self._parked = True     # not waiting on inotify (not called lately, or nothing to watch)
        self._fd = None         # the inotify descriptor the thread waits on
        self._bad_fd = None     # a descriptor poll() reported broken: never waited on again
        self.last_call = None   # the beacon's last call
        self.gap = None         # between its last two calls
        self.thread = threading.Thread(target=self._run, name=f"{name}-dispatch", daemon=True)
        self.thread.start()

    def heartbeat(self):
        """Salt called the beacon: the thread may deliver. Wakes it when it is parked or when
        the watcher's descriptor changed (the first directory watched, say)."""
        if not self.thread.is_alive():
            return
        now = self.clock()
        if self.last_call is not None:
            self.gap = now - self.last_call
        self.last_call = now
        if self._parked or self._fd != self.watcher.fileno():
            self.wake()

    def alive(self, now):
        """Whether Salt still calls the beacon (its last call is recent enough)."""
        if self.last_call is None:
            return False
        return now - self.last_call <= (max(STALE_MIN, 2.5 * self.gap) if self.gap else STALE_MIN)

    def wake(self):
        try:
            os.write(self._wake_w, b"!")
        except (BlockingIOError, OSError):
            pass  # full (a wake-up is pending anyway) or closed (stopped)

    def stop(self):
        """Stop the thread (before its watcher closes its descriptor) and release the pipe."""
        self._stopped = True
        self.wake()
        if self.thread is not threading.current_thread():
            self.thread.join(timeout=5)
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    @property
    def stopped(self):
        return self._stopped

    def _plan(self):
        """(descriptor to wait on, timeout in s) for the next wait; parked: no descriptor."""
        with self.lock:
            alive = self.alive(self.clock()) and not self.watcher.closed
            fd = self.watcher.fileno() if alive else None
            timeout = self.watcher.next_due() if alive else None
        if fd == self._bad_fd:
            fd = None
        return fd, (timeout if fd is not None else None)

    def _wait(self, poller, fd, timeout):
        """Wait for inotify, a wake-up or the timeout; False when ``fd`` turned out broken."""
        if fd != self._fd:
            if self._fd is not None:
                poller.unregister(self._fd)
            if fd is not None:
                poller.register(fd, select.POLLIN)
            self._fd = fd
        self._parked = fd is None
        try:
            ready = poller.poll(None if timeout is None else timeout * 1000.0 + 1)
        except InterruptedError:
            return True
        for ready_fd, mask in ready:
            if ready_fd == self._wake_r:
                try:
                    while os.read(self._wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            elif mask & _BAD:
                self._bad_fd = ready_fd
                return False
        return True

    def _run(self):
        poller, rest = select.poll(), select.poll()
        poller.register(self._wake_r, select.POLLIN)
        rest.register(self._wake_r, select.POLLIN)
        while not self._stopped:
            try:
                fd, timeout = self._plan()
                if not self._wait(poller, fd, timeout) or self._stopped or fd is None:
                    continue
                with self.lock:
                    events = self.watcher.poll(stat=False)
                if events:
                    self.deliver(events)
                rest.poll(REST * 1000.0)  # only stop() or a heartbeat cuts it short
            except OSError as exc:
                if exc.errno == errno.EBADF and self._stopped:
                    break
                log.warning("ccc_settings: the dispatch thread failed (%s); changes fire at the beacon's calls", exc)
                self._parked = True
                break
            except Exception:  # noqa: BLE001 - never take the minion down; the beacon's calls still fire
                log.exception("ccc_settings: the dispatch thread failed; changes fire at the beacon's calls")
                self._parked = True
                break
