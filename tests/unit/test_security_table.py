"""docs/security.md's table of inputs names the test that proves each boundary: every test it
names must exist, so the table cannot point at a test that was renamed or removed."""

import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[2]
TABLE_HEADING = "## Every input a user or an imported file controls"


def table_rows():
    text = (REPO / "docs" / "security.md").read_text()
    section = text.split(TABLE_HEADING, 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| input")
            and not line.startswith("| ---")]


def test_the_table_has_a_row_per_input_with_four_cells_and_a_test():
    rows = table_rows()
    assert len(rows) >= 20
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split(" | ")]
        assert len(cells) == 4, row
        assert "tests/" in cells[3], f"no test named for: {cells[0]}"


def test_every_test_the_table_names_exists():
    named = set()
    for row in table_rows():
        last = row.strip("|").split(" | ")[-1]
        current = None
        for token in re.findall(r"`([^`]+)`", last):
            if token.startswith("tests/"):
                path, _, name = token.partition("::")
                current = path
            elif token.startswith("::") and current:
                name = token[2:]
                path = current
            else:
                continue
            named.add((path, name))
    assert named
    for path, name in sorted(named):
        target = REPO / path
        assert target.exists(), f"docs/security.md names {path}, which does not exist"
        if name:
            assert target.is_file() and re.search(rf"^def {re.escape(name)}\(", target.read_text(), re.M), \
                f"docs/security.md names {path}::{name}, which is not a test there"
