"""
The migration's second entry point: the files in which a lab's inventory repository keeps its
users and containers (``group_vars/ccc-cluster/{user-list,user-containers}.yml``, the files
ccc-manager commits) mapped to ``ccc:users`` and ``ccc:containers`` at one git revision, for
the inventory pillar (``_runners/ccc_inventory.py``, ``_pillar/ccc_inventory.py``).

Same reader (safe YAML, ``!vault`` kept apart, plain ``{{ var }}`` references expanded), same
template-syntax refusal (``ccc_migrate_markers``), same record mapping (``ccc_migrate_containers``),
same checks (``ccc_migrate_check``) and the same report as ``scripts/migrate-ansible-inventory``.

What differs is what happens to a refusal, because here the result goes live: a revision that
cannot be read as a whole (a file missing, YAML that does not parse, a variable of the wrong
shape) raises ``SourceError`` and the caller keeps serving its last good revision; an entry
that is refused (one user, one container) keeps its last good version (or stays out when it
never had one), so a bad commit changes nothing of what runs, and the refusal is as small as
the entry.
"""

import ccc_migrate_check
import ccc_migrate_containers
import ccc_migrate_inventory as inventory_reader
import ccc_migrate_markers as markers
import ccc_migrate_report
import ccc_rules

SHAPES = {"deployment_users": dict, "deployment_containers": list}
NOT_HERE = ("the inventory pillar maps deployment_users and deployment_containers only: "
            "set it in the site pillar (scripts/migrate-ansible-inventory maps it)")


class SourceError(Exception):
    """The revision cannot be loaded as a whole: the last good revision stays in use."""


def read_vars(texts):
    """``{variable: (value, source)}`` of the files' ``{source: text}`` (``None``: the file is
    missing at this revision), references expanded as the migration expands them."""
    found = {}
    for source, text in texts.items():
        if text is None:
            raise SourceError(f"{source}: missing at this revision")
        try:
            data = inventory_reader.load_text(text, source)
        except inventory_reader.InventoryError as exc:
            raise SourceError(str(exc)) from None
        if not isinstance(data, dict):
            raise SourceError(f"{source}: expected a mapping of variables")
        found.update({key: (value, source) for key, value in data.items()})
    for key, shape in SHAPES.items():
        if key not in found:
            raise SourceError(f"{key} is in none of {', '.join(texts)}: a revision without it is not used")
        value, source = found[key]
        if value is None:
            found[key] = (shape(), source)
        elif not isinstance(value, shape):
            raise SourceError(f"{source}: {key} must be a {'mapping' if shape is dict else 'list'}")
    plain = {key: value for key, (value, _) in found.items()}
    return inventory_reader.expand_all(found, plain)


def _unusable(entry, stack_key=False):
    """Why a user or container entry cannot be mapped at all, or None."""
    if not isinstance(entry, dict):
        return "is not a mapping of keys"
    if stack_key and not ccc_rules.is_stack_name(entry.get("STACK_NAME")):
        return "has no valid STACK_NAME"
    if inventory_reader.holds_inline_vault(entry):
        return "holds an inline vault value the inventory pillar cannot decrypt (keep secrets out of the record)"
    return None


def _label(entry, index):
    stack = entry.get("STACK_NAME") if isinstance(entry, dict) else None
    return stack if ccc_rules.is_stack_name(stack) else f"#{index}"


class _Decision:
    """The entries served and the new last good entries, with what the report says of each refusal."""

    def __init__(self, revision, last_good, report):
        self.revision, self.last_good, self.report = revision, last_good, report
        self.served = {"users": {}, "containers": []}
        self.kept = {"users": {}, "containers": {}}

    def accept(self, kind, key, record):
        if kind == "users":
            self.served["users"][key] = record
        elif key not in self.kept["containers"]:
            self.served["containers"].append(record)
        self.kept[kind][key] = {"record": record, "revision": self.revision}

    def refuse(self, kind, key, where):
        """An entry refused at this revision: its last good version, if any, stays."""
        previous = (self.last_good.get(kind) or {}).get(key) if key is not None else None
        if previous is None:
            self.report.note(f"{where}: refused and never accepted before: not deployed")
            return
        if kind == "containers" and key in self.kept["containers"]:
            return
        self.report.note(f"{where}: refused: its last good version (revision {previous['revision'][:12]}) stays")
        self.accept(kind, key, previous["record"])
        self.kept[kind][key] = previous


def _users(value, source, decision, report):
    """Map and decide the users (before the containers, whose checks read the served users)."""
    usable = {}
    for email, entry in value.items():
        reason = _unusable(entry)
        if reason:
            report.refused(source, f"deployment_users[{markers.name(email)}]", reason)
        else:
            usable[email] = entry
    clean = markers.variables({"deployment_users": (usable, source)}, report).get("deployment_users", ({}, source))[0]
    mapped = ccc_migrate_containers.users(clean, report, source)
    for email in value:
        where = f"deployment_users[{markers.name(email)}]"
        if email in mapped:
            decision.accept("users", email, mapped[email])
        else:
            decision.refuse("users", email if isinstance(email, str) else None, where)


def _containers(value, source, site, decision, report):
    """Map, check and decide the containers, in the revision's order."""
    usable = []
    for index, entry in enumerate(value):
        reason = _unusable(entry, stack_key=True)
        if reason:
            report.refused(source, f"deployment_containers[{_label(entry, index)}]", reason)
        else:
            usable.append(entry)
    clean = markers.variables({"deployment_containers": (usable, source)}, report)
    clean_ids = {id(entry) for entry in clean.get("deployment_containers", ([], source))[0]}
    mapped = {id(entry): ccc_migrate_containers.containers([entry], report, source)[0]
              for entry in usable if id(entry) in clean_ids}
    candidate = {**site, "users": decision.served["users"], "containers": list(mapped.values())}
    held = ccc_migrate_check.check_containers(candidate, report, source)
    for index, entry in enumerate(value):
        label = _label(entry, index)
        stack = label if not label.startswith("#") else None
        record = mapped.get(id(entry))
        if record is not None and stack not in held:
            decision.accept("containers", stack, record)
        else:
            decision.refuse("containers", stack, f"deployment_containers[{label}]")


def map_revision(found, site, last_good, revision):
    """
    ``(served, last_good, report)`` of one revision: ``found`` from ``read_vars``, ``site`` the
    site's ``ccc`` pillar (its ``user_types`` and cluster settings the checks read), ``last_good``
    what ``map_revision`` returned for the revision before (``{}`` at first). ``served`` is
    ``{"users": {...}, "containers": [...]}``, what the pillar serves.
    """
    report = ccc_migrate_report.Report()
    decision = _Decision(revision, last_good or {}, report)
    for key, (_, source) in found.items():
        if key not in SHAPES:
            report.not_mapped(source, markers.name(key), NOT_HERE)
    users, users_source = found["deployment_users"]
    _users(users, users_source, decision, report)
    containers, containers_source = found["deployment_containers"]
    _containers(containers, containers_source, site, decision, report)
    return decision.served, decision.kept, report
