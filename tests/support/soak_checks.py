"""The fault soak's invariants (``tests/support/soak.py``), judged on what the engines and the
shared storage show, never on what the product says about itself (only its ``.deploy`` text is
read, to check that it tells the truth).

Two kinds: ``continuous`` ones hold at every look, also in the middle of a fault (a ``.deploy``
is a bounded regular file, no user file is lost or changed, a container ccc-salt did not create
is never touched, a settings file is never rewritten, no stack keeps two running copies longer
than the move window once no fault lasts); ``quiet`` ones are what the cluster must reach within
a bounded time after each fault (every stack runs on exactly its placement with the last
accepted settings, no ``.ccc-new``/``.ccc-old`` is left, ``.deploy`` says where and what runs)."""

import hashlib
import os
import pathlib
import stat

from support import site  # noqa: F401  (puts the product's _utils on the path)
from support.soak_model import NODES

import ccc_schema  # noqa: E402

REPORT_LIMIT = 8 * 1024  # ccc_report.MAX_REPORT_BYTES: the bound a user's home relies on
SWAP_MARK = ".ccc-"
MANAGED = "ccc.managed-by=ccc-salt"


def observe(clients):
    """``{node: [container summary]}`` of every container on each engine (one listing each), or
    ``None`` for an engine that does not answer now."""
    seen = {}
    for node, client in clients.items():
        try:
            seen[node] = client.api.containers(all=True)
        except Exception:  # noqa: BLE001 - the engine is down or starting: unknown, not empty
            seen[node] = None
    return seen


def name_of(summary):
    return summary["Names"][0].lstrip("/")


def is_running(summary):
    return summary.get("State") == "running"


def copies(seen, stack, running_only=True):
    """The nodes whose engine has a container named exactly ``stack`` (running, or any state)."""
    return {node for node, listing in seen.items() if listing is not None
            for summary in listing if name_of(summary) == stack and (is_running(summary) or not running_only)}


def settings_folder(storage, email):
    return pathlib.Path(storage) / "shared" / "user_data" / email / "container-settings"


def _digest(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


class UserFiles:
    """Files the soak's users keep in their homes: none may be lost or changed by the system."""

    def __init__(self, storage):
        self.storage = pathlib.Path(storage)
        self.files = {}

    def write(self, email, home, name, data):
        path = self.storage / "shared" / "user_data" / email / home / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        self.files[path] = hashlib.sha256(data).hexdigest()

    def problems(self):
        found = []
        for path, digest in self.files.items():
            try:
                now = _digest(path)
            except OSError as exc:
                found.append(("user data", str(path), f"lost: {exc.strerror}"))
                continue
            if now != digest:
                found.append(("user data", str(path), "changed by the system"))
        return found


def report_problems(storage, stacks):
    """Continuous: each ``.deploy`` of the watched stacks is absent or a regular file of at most
    ``REPORT_LIMIT`` bytes (never a link, a folder, a FIFO)."""
    found = []
    for stack in stacks.values():
        path = settings_folder(storage, stack.email) / f"{stack.name}.deploy"
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(info.st_mode):
            found.append(("deploy file", stack.name, f"{path} is not a regular file (mode {oct(info.st_mode)})"))
        elif info.st_size > REPORT_LIMIT:
            found.append(("deploy file", stack.name, f"{path} has {info.st_size} bytes, over {REPORT_LIMIT}"))
    return found


def settings_problems(storage, written):
    """Continuous: every settings file holds what its user last wrote (the system writes one
    only where none exists)."""
    found = []
    for (email, stack), text in written.items():
        path = settings_folder(storage, email) / f"{stack}.yml"
        try:
            now = path.read_text()
        except OSError as exc:
            found.append(("settings file", stack, f"{path} lost: {exc.strerror}"))
            continue
        if now != text:
            found.append(("settings file", stack, f"{path} was changed by the system: {now[:200]!r}"))
    return found


def foreign_problems(seen, foreign, quiet):
    """Continuous: each container ccc-salt did not create is still there with its id (and,
    once quiet, running: Docker restarts it after an engine restart, its policy is ``always``)."""
    found = []
    for node, (name, container_id) in foreign.items():
        listing = seen.get(node)
        if listing is None:
            continue
        match = [s for s in listing if name_of(s) == name]
        if not match or match[0]["Id"] != container_id:
            found.append(("foreign container", f"{node}/{name}", "removed or replaced"))
        elif quiet and not is_running(match[0]):
            found.append(("foreign container", f"{node}/{name}", f"not running: {match[0].get('Status')}"))
        elif any(key.startswith("ccc.") for key in (match[0].get("Labels") or {})):
            found.append(("foreign container", f"{node}/{name}", "got a ccc label"))
    return found


def quiet_problems(seen, inspect, storage, stacks, foreign):
    """What keeps the cluster from being quiet now (empty: quiet). ``inspect(node, name)``
    returns a container's inspect data or None."""
    if any(listing is None for listing in seen.values()):
        return [("engine", node, "does not answer") for node, listing in seen.items() if listing is None]
    found = []
    for node, listing in seen.items():
        for summary in listing:
            name = name_of(summary)
            if SWAP_MARK in name:
                found.append(("swap leftover", name, f"on {node} ({summary.get('State')})"))
            labels = summary.get("Labels") or {}
            if labels.get("ccc.managed-by") == "ccc-salt" and labels.get("ccc.stack") not in stacks \
                    and is_running(summary) and name.split(SWAP_MARK)[0] not in stacks:
                found.append(("placement", labels.get("ccc.stack"), f"runs on {node}, placed nowhere"))
    for stack in stacks.values():
        found.extend(_stack_problems(seen, inspect, storage, stack))
    found.extend(foreign_problems(seen, foreign, quiet=True))
    return found


def _stack_problems(seen, inspect, storage, stack):
    where = copies(seen, stack.name, running_only=not stack.crashing)
    want = set(stack.placement)
    if where != want:
        return [("placement", stack.name, f"on {sorted(where) or 'no node'}, placed on {sorted(want)}")]
    found = []
    for node in sorted(where):
        attrs = inspect(node, stack.name)
        if attrs is None:
            return [("placement", stack.name, f"vanished on {node}")]
        image = attrs["Config"]["Image"]
        if image != stack.wanted_image:
            found.append(("last edit runs", stack.name, f"{node} runs image {image}, the last accepted is "
                          f"{stack.wanted_image}"))
        if stack.shm is not None and attrs["HostConfig"]["ShmSize"] != stack.shm:
            found.append(("last edit runs", stack.name, f"{node} runs shm {attrs['HostConfig']['ShmSize']}, the last "
                          f"accepted is {stack.settings['SHM_SIZE']}"))
    if not found:
        found.extend(_report_truth(storage, stack, where))
    return found


def report_lines(text):
    """``{key: value}`` of a ``.deploy`` report's lines before its messages."""
    lines = {}
    for line in text.partition("\nmessages:\n")[0].splitlines()[1:]:
        key, sep, value = line.partition(": ")
        if sep and key not in lines:
            lines[key] = value
    return lines


def _report_truth(storage, stack, where):
    """Quiet: the ``.deploy`` of a stack that runs says a node where it runs (its own line, or
    the move sentence's "running on"), no failure, whether the last save was rejected, and the
    last accepted size."""
    path = settings_folder(storage, stack.email) / f"{stack.name}.deploy"
    try:
        text = path.read_text()
    except OSError as exc:
        return [("deploy truth", stack.name, f"no report: {exc.strerror}")]
    lines = report_lines(text)
    result, node = lines.get("result", ""), lines.get("node", "")
    said = {n for n in NODES if f"running on {n}" in result}
    found = []
    if result.startswith("NOT ") or "still running on" in result:
        found.append(("deploy truth", stack.name, f"says {result!r} while it runs on {sorted(where)}"))
    elif node not in where and not (said and said <= where):
        found.append(("deploy truth", stack.name, f"says node {node!r} ({result!r}), it runs on {sorted(where)}"))
    if stack.rejected != ("REJECTED" in lines.get("settings", "")):
        found.append(("deploy truth", stack.name, f"says settings {lines.get('settings')!r}, the last save was "
                      f"{'invalid' if stack.rejected else 'accepted'}"))
    if stack.shm is not None and node in where and lines.get("shm_size") != ccc_schema.format_size(stack.shm):
        found.append(("deploy truth", stack.name, f"says shm_size {lines.get('shm_size')!r}, it runs "
                      f"{stack.settings['SHM_SIZE']}"))
    return found


class Copies:
    """Continuous: a stack placed on one node runs on two at most the move window, counted from
    when the last fault ended (a node that cannot act keeps its copy until it can)."""

    def __init__(self, bound):
        self.bound = bound
        self.since = {}

    def problems(self, seen, stacks, now, fault_ended):
        found = []
        for stack in stacks.values():
            running = copies(seen, stack.name)
            if len(stack.placement) == 1 and len(running) > 1:
                since = self.since.setdefault(stack.name, now)
                if now - max(since, fault_ended) > self.bound:
                    found.append(("double copy", stack.name, f"runs on {sorted(running)} for "
                                  f"{now - since:.0f} s, placed on {stack.placement}"))
            else:
                self.since.pop(stack.name, None)
        return found


class Availability:
    """The longest time each stack that should run had no running copy anywhere."""

    def __init__(self):
        self.down_since, self.longest, self.up_once = {}, {}, set()

    def update(self, seen, stacks, now):
        """An engine that does not answer counts as running nothing (its users cannot reach it); a
        stack counts once it ran (an admin's new one is not down before its first start)."""
        for stack in stacks.values():
            running = copies(seen, stack.name)
            if running:
                self.up_once.add(stack.name)
            if stack.crashing or running or stack.name not in self.up_once:
                if stack.name in self.down_since:
                    self._close(stack.name, now)
                continue
            self.down_since.setdefault(stack.name, now)
            self.longest[stack.name] = max(self.longest.get(stack.name, 0.0), now - self.down_since[stack.name])

    def _close(self, name, now):
        start = self.down_since.pop(name)
        self.longest[name] = max(self.longest.get(name, 0.0), now - start)
