"""
Keep template syntax out of the migrated pillar. An inventory is input, not code: a key or value
holding Jinja's syntax (``{{ ... }}``, ``{% ... %}``, ``{# ... #}``, Salt's default delimiters)
would run on the salt-master, as root, the first time it rendered the pillar through Salt's
default ``jinja|yaml`` renderer (``{{ salt["cmd.run"]("...") }}`` runs a command). The writer
starts every file with ``#!yaml`` so Salt's Jinja never sees them; this module also leaves every
entry that holds such syntax out, so no written file carries any (nor a copy an admin pastes
into a Jinja-rendered file). Plain ``{{ var.path }}`` references are expanded before the check
(``ccc_migrate_inventory.expand``); what remains is Jinja the migration will not evaluate.

A refusal is as small as the entry: one container, user or user type, one node (its name also
names its file and is written into it, so it must be one printable line without ``/``), one host
or cluster variable, one vault value. Each goes to the report as ``refused`` with the place
inside it, by key names only (never a value: secrets stay out of the report). The nodes and the
vault are only the offline tool's: ``ccc_migrate/markers.py`` applies the rule to them.
"""

MARKERS = ("{{", "{%", "{#")
REASON = ("holds template syntax ({{, {% or {#) at {where}: an inventory is data, and Salt would run it as "
          "Jinja on the master; left out (write it as plain data)")
NAME_REASON = "is not a variable name (a number or other non-text key in YAML): left out"
RECORDS = ("deployment_users", "deployment_types")  # mappings of records, refused one by one


def has_marker(text):
    """True when ``text`` is a string holding a Jinja delimiter."""
    return isinstance(text, str) and any(marker in text for marker in MARKERS)


def name(key):
    """A key as the report shows it: as written, or quoted (control characters escaped) when it is
    itself template syntax or not one printable line."""
    text = str(key)
    return repr(text) if has_marker(text) or not text.isprintable() else text


def marked(value, path=""):
    """The places in ``value`` (key paths like ``FRP_PORTS.HTTP[0].pass``) where a key or a string
    holds a marker; ``path`` itself (or ``the value``) when ``value`` is such a string."""
    if isinstance(value, dict):
        found = []
        for key, item in value.items():
            here = f"{path}.{name(key)}" if path else name(key)
            found += [f"{here} (a key)"] if has_marker(key) else marked(item, here)
        return found
    if isinstance(value, list):
        return [place for index, item in enumerate(value) for place in marked(item, f"{path}[{index}]")]
    return [path or "the value"] if has_marker(value) else []


def _refuse(report, source, key, places):
    report.refused(source, key, REASON.replace("{where}", ", ".join(places)))


def _records(value, variable, source, report):
    """``deployment_users``/``deployment_types`` without the records that hold markers."""
    kept = {}
    for key, record in value.items():
        places = ["its key"] if has_marker(key) else marked(record)
        if places:
            _refuse(report, source, f"{variable}[{name(key)}]", places)
        else:
            kept[key] = record
    return kept


def _containers(value, source, report):
    """``deployment_containers`` without the containers that hold markers (in order)."""
    kept = []
    for index, entry in enumerate(value):
        places = marked(entry)
        if not places:
            kept.append(entry)
            continue
        stack = entry.get("STACK_NAME") if isinstance(entry, dict) else None
        label = stack if isinstance(stack, str) and not has_marker(stack) and stack.isprintable() else f"#{index}"
        _refuse(report, source, f"deployment_containers[{label}]", places)
    return kept


def variables(found, report):
    """``{key: (value, source)}`` of group or host variables without what holds markers: the
    data model's records one by one, any other variable as a whole; and without keys that are
    not text (``NAME_REASON``), which no mapping can name."""
    kept = {}
    for key, (value, source) in found.items():
        if not isinstance(key, str):  # "0: x" in YAML: every mapping step expects a name
            report.refused(source, name(key), NAME_REASON)
        elif has_marker(key):
            _refuse(report, source, name(key), ["the variable's name"])
        elif key in RECORDS and isinstance(value, dict):
            kept[key] = (_records(value, key, source, report), source)
        elif key == "deployment_containers" and isinstance(value, list):
            kept[key] = (_containers(value, source, report), source)
        elif places := marked(value):
            _refuse(report, source, name(key), places)
        else:
            kept[key] = (value, source)
    return kept
