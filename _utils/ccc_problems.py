"""
What went wrong with a compute container, in words for its user and the admins: it exited with
an error, Docker keeps restarting it, or the CCC image's boot status file
(``~/.containers/<STACK>.status``, companions A.6) says its boot failed; with the last lines of
its log, bounded, on one line each, the secret values that container was given masked
(``ccc_redact.given_secrets``). Only those: the container prints what it likes, so masking any
other secret of the node would answer "is this guess a secret?" (docs/security.md).

Log lines are masked in their normal form (``screen_line``: what a terminal shows of the line),
so escapes, carriage returns, backspaces or NULs inside a value do not hide it from the mask.
A value split over lines or encoded is not masked: the container holds its values and can
always show them somehow; the mask keeps a program's echo of its settings out of the report.

The log is read again only for a new or changed problem (``log_due``), and for a boot problem
(the status file is the user's to write) at most every ``BOOT_LOG_INTERVAL_S``; otherwise the
lines last read (root's deploy record, ``ccc_feedback.last_log``) are shown with their time.

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
import unicodedata

import ccc_rules
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
# Terminal escape sequences: CSI (ESC [ or 8-bit CSI), OSC/DCS/SOS/PM/APC strings up to BEL or
# ESC backslash (or the line's end), and the two-character escapes. A terminal shows none of them.
_ESCAPE = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?|\x1b[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[ -/]*[0-~]?")
# Characters a terminal does not show: controls, line/paragraph separators, format characters
# (zero-width spaces and joiners, bidi overrides, soft hyphen, BOM).
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
TAB = "    "
BOOT_LOG_INTERVAL_S = 600  # a boot problem (the user's status file) reads the log at most this often
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


def screen_line(text):
    """
    The normal form of one log line: what a terminal shows of it, one column per character.
    Escape sequences and invisible characters (``_HIDDEN_CATEGORIES``: NUL, bell, zero-width,
    bidi controls...) are dropped, a carriage return goes back to the line's start and a
    backspace one character back, later characters overwriting earlier ones; a tab is
    ``TAB``. Trailing blanks are removed.
    """
    if text.isascii() and text.isprintable():
        return text.rstrip()
    cells, column = [], 0
    for char in _ESCAPE.sub("", text):
        if char == "\r":
            column = 0
            continue
        if char == "\b":
            column = max(0, column - 1)
            continue
        if char == "\t":
            char = TAB
        elif unicodedata.category(char) in _HIDDEN_CATEGORIES:
            continue
        for cell in char:
            if column < len(cells):
                cells[column] = cell
            else:
                cells.append(cell)
            column += 1
    return "".join(cells).rstrip()


def log_lines(raw, secrets, max_lines=LOG_LINES, max_bytes=LOG_BYTES):
    """
    The last lines of a container's log for a report: decoded, each line in its normal form
    (``screen_line``), then every value of ``secrets`` masked (the values that container was
    given, ``ccc_redact.given_secrets``: after normalising, so no escape or control character
    inside a value hides it; before anything is cut, so no cut leaves part of one), each line
    at most ``LINE_CHARS`` characters, at most ``max_lines`` lines and ``max_bytes`` bytes (the
    newest kept).
    """
    lines = []
    for line in (raw or b"").decode("utf-8", errors="replace").split("\n"):
        line = ccc_secrets.mask(screen_line(line), secrets)
        if line:
            lines.append(line if len(line) <= LINE_CHARS else line[:LINE_CHARS - 1] + "…")
    kept, used = [], 0
    for line in reversed(lines[-max_lines:]):
        used += len(line.encode()) + 1
        if used > max_bytes:
            break
        kept.append(line)
    return kept[::-1]


def stored_log(record):
    """The log lines last read for a problem as root recorded them (``log_record``), checked:
    ``{"summary", "read" (epoch s, root's clock), "lines"}``, or None."""
    if not isinstance(record, dict):
        return None
    summary, read, lines = record.get("summary"), record.get("read"), record.get("lines")
    if (not isinstance(summary, str) or not ccc_rules.is_number(read)
            or not isinstance(lines, list) or not all(isinstance(line, str) for line in lines)):
        return None
    return {"summary": summary, "read": read, "lines": [line[:LINE_CHARS] for line in lines[-LOG_LINES:]]}


def log_due(kind, summary, last, now_s):
    """
    Whether the log is read for this problem (else the lines of ``last``, ``stored_log``, are
    shown): a problem seen before keeps its lines; a new or changed one reads them, except that
    a boot problem, which the user's status file makes, reads them at most every
    ``BOOT_LOG_INTERVAL_S`` (a status file must not make every apply read the log). A Docker
    problem changes only when the container crashes or restarts again.
    """
    if last is None:
        return True
    if last["summary"] == summary:
        return False
    return kind != "boot" or not 0 <= now_s - last["read"] < BOOT_LOG_INTERVAL_S


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


def observe(client, attrs, folder, stack, secrets, now=None, with_log=True, last_log=None):
    """
    The problem of one container, or None: ``{"summary", "advice", "log": [lines], "note"}``
    (``note``: why the status file was ignored), with ``log_record`` (what root records of the
    lines: ``stored_log``) and ``log_as_of`` (when the lines shown were read, only when they
    were read for an earlier problem). ``folder``: the user's settings folder (``ccc_userdirs``
    entry) or None; ``secrets``: the values the container was given
    (``ccc_redact.given_secrets``); ``last_log``: the lines recorded last time
    (``ccc_feedback.last_log``).
    """
    status, note = read_boot_status(folder, stack) if folder else (None, None)
    now = now or datetime.datetime.now(datetime.timezone.utc)
    found = container_problem(attrs, now)
    kind = "container"
    if found is None:
        found, kind = boot_problem(status), "boot"
    if found is None:
        return {"summary": None, "note": note} if note else None
    problem = {"summary": found, "advice": advice(stack, kind), "log": [], "note": note}
    if not (with_log and attrs):
        return problem
    last = stored_log(last_log)
    if log_due(kind, found, last, now.timestamp()):
        last = {"summary": found, "read": now.timestamp(),
                "lines": log_lines(read_log(client, attrs["Id"]), secrets)}
    elif last["summary"] != found:
        problem["log_as_of"] = datetime.datetime.fromtimestamp(last["read"], datetime.timezone.utc).strftime(
            "%Y-%m-%d %H:%M:%S UTC")
    return dict(problem, log=last["lines"], log_record=last)
