"""
The migration report: one entry per key of the original inventory (mapped, changed with the
reason, or not mapped with the reason), the entries left out because they hold template syntax
(``ccc_migrate_markers``), the problems ccc-salt's own checks find in the result,
and the deliberate differences of the deployed containers. Rendered as text for the admin and
as JSON for scripts. Entries name keys and pillar paths only, never a value of a secret.
"""

import json

import ccc_migrate_differences
import ccc_quote

STATUSES = ("mapped", "changed", "not_mapped", "refused")
HEADINGS = {
    "mapped": "Mapped unchanged",
    "changed": "Mapped with a change",
    "not_mapped": "Not mapped",
    "refused": "Refused (template syntax: left out of the written pillar; ccc-salt's checks: held until you fix it)",
}


class Report:
    """Entries collected while mapping: ``{status, source, key, target, reason}``."""

    def __init__(self):
        self.entries = []
        self.notes = []

    def add(self, status, source, key, target=None, reason=None):
        assert status in STATUSES, status
        self.entries.append({"status": status, "source": source, "key": key, "target": target, "reason": reason})

    def mapped(self, source, key, target):
        self.add("mapped", source, key, target)

    def changed(self, source, key, target, reason):
        self.add("changed", source, key, target, reason)

    def not_mapped(self, source, key, reason):
        self.add("not_mapped", source, key, None, reason)

    def refused(self, source, key, reason):
        self.add("refused", source, key, None, reason)

    def note(self, text):
        self.notes.append(text)

    def count(self, status):
        return sum(1 for entry in self.entries if entry["status"] == status)

    def as_dict(self, written=None):
        """The report as JSON-ready data; ``written`` lists the files written (None: --check)."""
        return {
            "summary": {status: self.count(status) for status in STATUSES},
            "entries": self.entries,
            "differences": ccc_migrate_differences.DIFFERENCES,
            "notes": self.notes,
            "written": written,
        }

    def json(self, written=None):
        return json.dumps(self.as_dict(written), indent=2, sort_keys=False) + "\n"

    def text(self, written=None):
        """The report for people: a summary, then the entries by status, the differences."""
        summary = ", ".join(f"{self.count(status)} {status.replace('_', ' ')}" for status in STATUSES)
        lines = [f"CCC inventory migration: {summary}", ""]
        for status in STATUSES:
            entries = [entry for entry in self.entries if entry["status"] == status]
            if not entries:
                continue
            lines.append(f"{HEADINGS[status]} ({len(entries)}):")
            lines.extend(_entry_line(entry) for entry in entries)
            lines.append("")
        lines.append("How the deployed containers differ from the original's (deliberately):")
        lines.extend(f"  [{item['id']}] {item['what']}: {item['why']}" for item in ccc_migrate_differences.DIFFERENCES)
        lines.append("")
        lines.extend(f"Note: {note}" for note in self.notes)
        if written is None:
            lines.append("--check: nothing was written.")
        else:
            lines.append(f"Written: {', '.join(written)}")
        return "\n".join(lines).rstrip() + "\n"


def _entry_line(entry):
    """One entry on one line. Keys and targets come from the inventory (and reasons quote them):
    their control characters are escaped, so a key cannot start a line of its own in the admin's
    terminal or send it escape sequences."""
    line = f"  {entry['source']}: {entry['key']}"
    if entry["target"]:
        line += f" -> {entry['target']}"
    if entry["reason"]:
        line += f"  ({entry['reason']})"
    return ccc_quote.one_line(line)
