"""
What went wrong with a compute container, in words for its user and the admins: it exited with
an error, Docker keeps restarting it, or the CCC image's boot status file
(``~/.containers/<STACK>.status``, companions A.6) says its boot failed; with the last lines of
its log, bounded, on one line each, every secret value of the node's pillar masked.

Why here: the README's open TODO of the original ("redirect container logging output to the
user") - users only saw a silent container. The decisions (``container_problem``,
``boot_problem``, ``leave_stopped``, ``log_lines``) are pure; ``read_boot_status`` and
``read_log`` are the two bounded reads, the first by descriptor without following links (the
file is the user's: a FIFO or a symlink there is ignored, never opened), and ``observe`` puts
them together for ``ccc_apply`` (the ``.deploy`` report) and ``ccc_stack_overview``
(``salt-run ccc.status``).
"""

import datetime
import os
import re

import ccc_safefs
import ccc_secrets
import ccc_userdirs

STATUS_MAX_BYTES = 256  # the status file holds one short line
LOG_LINES = 30
LOG_BYTES = 4096  # of log lines in a report
LOG_READ_MAX = 256 * 1024  # read from Docker at most (30 long lines must not cost more)
LINE_CHARS = 240
BOOT_ATTEMPTS_FAILED = 2  # "booting N" with N above this: the image's recovery gives up on new settings (A.6)
RECENT_S = 600  # a container restarted by Docker within this long (s) is reported even while it runs
RESTARTS_REPORTED = 3
# Exit codes of a container stopped from outside, not a crash: docker stop, dockerd shutting down
# (0, SIGKILL, SIGTERM), and 255, what dockerd records for a container whose task was gone when it
# started again (its own crash, a reboot): the reconcile after an engine restart starts those.
STOP_EXIT_CODES = (0, 137, 143, 255)
FAILED_BOOT_LINE = "failed boot - running with last known working ENVs"
_BOOTING = re.compile(r"booting ([0-9]{1,9})")
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|[\x00-\x08\x0b-\x1f\x7f\u0080-\u009f\u2028\u2029]")
NEVER = "0001-01-01T00:00:00Z"


def parse_boot_status(data):
    """``(state, attempt)`` from the bytes of a status file: ``("booting", N)``, ``("running",
    None)``, ``("failed", None)`` (recovered env), ``("other", None)``; None without a file."""
    if data is None:
        return None
    line = data.decode("utf-8", errors="replace").strip()
    found = _BOOTING.fullmatch(line)
    if found:
        return "booting", int(found.group(1))
    if line == "running":
        return "running", None
    if line.startswith("failed boot"):
        return "failed", None
    return "other", None


def boot_problem(status):
    """One sentence when the boot status reports a failure, else None."""
    if not status:
        return None
    state, attempt = status
    if state == "booting" and attempt > BOOT_ATTEMPTS_FAILED:
        return (f"its boot keeps failing: the image reports boot attempt {attempt} "
                f"(status file: 'booting {attempt}')")
    if state == "failed":
        return ("its last boot failed with your current settings: it runs with the last settings that "
                f"worked (status file: '{FAILED_BOOT_LINE}')")
    return None


def docker_time(text):
    """A Docker timestamp (nanoseconds, ``Z``) as an aware datetime; None for none."""
    if not text or text == NEVER:
        return None
    text = re.sub(r"(\.[0-9]{1,6})[0-9]*", r"\1", text.replace("Z", "+00:00"))
    try:
        return datetime.datetime.fromisoformat(text)
    except ValueError:
        return None


def crashed(attrs):
    """The container is not running because it ended on its own with an error (or was killed for
    memory), not because someone or dockerd stopped it."""
    state = (attrs or {}).get("State") or {}
    if not attrs or state.get("Running") or state.get("Status") == "created":
        return False
    if state.get("Error"):
        # Docker could not start it (e.g. after a reboot its pinned bind sources are gone): the
        # program never ran, and the apply that pins the folders again must start it.
        return False
    return bool(state.get("OOMKilled")) or state.get("ExitCode", 0) not in STOP_EXIT_CODES


def leave_stopped(attrs, retry_since=0):
    """
    A stopped container whose spec did not change stays stopped when it crashed, so a reconcile
    does not start a crash loop again every time; ``retry_since``: when the user last saved the
    settings file (epoch s): a save after the crash asks for one more try.
    """
    if not crashed(attrs):
        return False
    finished = docker_time((attrs.get("State") or {}).get("FinishedAt"))
    return not (retry_since and finished and retry_since > finished.timestamp())


def container_problem(attrs, now=None):
    """One sentence when Docker's state of the container shows a problem, else None."""
    if not attrs:
        return None
    state = attrs.get("State") or {}
    restarts, code = attrs.get("RestartCount") or 0, state.get("ExitCode")
    if state.get("OOMKilled"):
        return f"it was killed for using too much memory (Docker restarted it {restarts} time(s))"
    if state.get("Restarting"):
        return f"it keeps crashing: it exited with code {code} and Docker restarted it {restarts} time(s) so far"
    if crashed(attrs):
        return f"it stopped: it exited with code {code} (at {state.get('FinishedAt', '?')[:19]}Z)"
    started = docker_time(state.get("StartedAt"))
    now = now or datetime.datetime.now(datetime.timezone.utc)
    if state.get("Running") and restarts >= RESTARTS_REPORTED and started and (now - started).total_seconds() < RECENT_S:
        return f"it crashed and was restarted by Docker {restarts} times; it runs again since {state['StartedAt'][:19]}Z"
    return None


def log_lines(raw, secrets, max_lines=LOG_LINES, max_bytes=LOG_BYTES):
    """
    The last lines of a container's log for a report: decoded, every secret masked (before
    anything is cut, so no cut leaves part of one), control characters and terminal escapes
    removed, each line at most ``LINE_CHARS`` characters, at most ``max_lines`` lines and
    ``max_bytes`` bytes (the newest kept).
    """
    text = ccc_secrets.mask((raw or b"").decode("utf-8", errors="replace"), secrets)
    lines = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = _CONTROL.sub("", line).replace("\t", "    ").rstrip()
        if line:
            lines.append(line if len(line) <= LINE_CHARS else line[:LINE_CHARS - 1] + "…")
    kept, used = [], 0
    for line in reversed(lines[-max_lines:]):
        used += len(line.encode()) + 1
        if used > max_bytes:
            break
        kept.append(line)
    return kept[::-1]


def advice(stack, problem_kind):
    """What the user can do, one sentence."""
    settings = f"~/.containers/{stack}.yml"
    if problem_kind == "boot":
        return (f"read ~/.containers/logs/ and the log lines below; fix or undo your last change in {settings} "
                "(INSTALL_PACKAGES, repositories, image) and save it: the container is recreated with it; "
                "if it keeps failing, ask the admins")
    return (f"read the log lines below; fix or undo your last change in {settings} (image, packages, "
            "repositories) and save it: the container is recreated with it (saving it unchanged starts a "
            "stopped container once more); it is not recreated on its own. If it keeps failing, ask the admins")


# --------------------------------------------------------------------------------------------
# reads


def read_boot_status(folder, stack):
    """``(parse_boot_status result, note)`` of ``<stack>.status`` in the user's settings folder
    (``ccc_userdirs`` entry): a regular file of at most ``STATUS_MAX_BYTES`` only, opened by
    descriptor without following a link; anything else gives a note and no status."""
    try:
        fd = ccc_userdirs.open_folder(folder)
    except OSError as exc:
        return None, f"status file not read: {exc.strerror or exc}"
    if fd is None:
        return None, None
    try:
        return parse_boot_status(ccc_safefs.read_regular_at(fd, f"{stack}.status", STATUS_MAX_BYTES)), None
    except ccc_safefs.UnsafePath as exc:
        return None, f"status file ignored: {exc.strerror}"
    except OSError as exc:
        return None, f"status file not read: {exc.strerror or exc}"
    finally:
        os.close(fd)


def read_log(client, container_id, lines=LOG_LINES):
    """The last ``lines`` lines of a container's log (stdout and stderr) as bytes, at most
    ``LOG_READ_MAX`` read; empty when Docker has none (a logging driver that keeps nothing)."""
    try:
        # follow=False said explicitly: the SDK follows a streamed log by default, which never ends
        stream = client.api.logs(container_id, stdout=True, stderr=True, tail=lines, stream=True, follow=False)
    except Exception:  # noqa: BLE001 - no log is no reason to fail the report
        return b""
    chunks, size = [], 0
    try:
        for chunk in stream:
            chunks.append(chunk)
            size += len(chunk)
            if size >= LOG_READ_MAX:
                break
    except Exception:  # noqa: BLE001 - a log cut short still helps
        pass
    finally:
        close = getattr(stream, "close", None)
        if close:
            close()
    return b"".join(chunks)[:LOG_READ_MAX]


def observe(client, attrs, folder, stack, secrets, now=None, with_log=True):
    """
    The problem of one container, or None: ``{"summary", "advice", "log": [lines], "note"}``
    (``note``: why the status file was ignored). ``folder``: the user's settings folder
    (``ccc_userdirs`` entry) or None; ``secrets``: values to mask (``ccc_secrets.values``).
    """
    status, note = read_boot_status(folder, stack) if folder else (None, None)
    found = container_problem(attrs, now)
    kind = "container"
    if found is None:
        found, kind = boot_problem(status), "boot"
    if found is None:
        return {"summary": None, "note": note} if note else None
    log = log_lines(read_log(client, attrs["Id"]), secrets) if with_log and attrs else []
    return {"summary": ccc_secrets.mask(found, secrets), "advice": advice(stack, kind), "log": log, "note": note}
