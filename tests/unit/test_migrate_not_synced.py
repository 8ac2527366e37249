"""The offline migration tool (``ccc_migrate/``) is not part of what ``saltutil.sync_all`` copies
to every node: the only migration modules a minion gets are the mapping and checks the master's
inventory pillar imports (``_runners/ccc_inventory.py``, one mapping for two entry points), and
the tool imports those from ``_utils`` instead of keeping copies."""

import ast
import subprocess
import sys

from support.site import REPO, SALT_CALL, SHARED_GPG_KEYDIR

UTILS = REPO / "_utils"
PACKAGE = REPO / "ccc_migrate"


def _imports(path):
    """Top-level module names ``path`` imports (relative imports left out)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names.add(node.module.split(".")[0])
    return names


def _utils_closure(*paths):
    """The ``_utils`` modules ``paths`` import, directly or through other ``_utils`` modules."""
    seen, todo = set(), list(paths)
    while todo:
        for name in _imports(todo.pop()):
            if name not in seen and (UTILS / f"{name}.py").is_file():
                seen.add(name)
                todo.append(UTILS / f"{name}.py")
    return seen


def _synced_utils(tmp_path):
    """The utils modules a minion's ``saltutil.sync_utils`` copies from this state tree."""
    config = tmp_path / "config"
    subprocess.run([sys.executable, str(REPO / "scripts" / "make-local-config.py"), "--config-dir", str(config),
                    "--id", "node1", "--gpg-keydir", str(SHARED_GPG_KEYDIR)], check=True, capture_output=True)
    proc = subprocess.run(SALT_CALL + ["--local", "-c", str(config), "--out=txt", "saltutil.sync_utils"],
                          capture_output=True, text=True, timeout=300, check=True)
    return {item.strip(" '[]").removeprefix("utils.") for item in proc.stdout.split(":", 1)[1].split(",")}


def test_a_minion_gets_only_the_migration_rules_the_inventory_pillar_uses(tmp_path):
    synced = _synced_utils(tmp_path)
    assert {"ccc_pillar", "ccc_migrate_records", "ccc_migrate_containers"} <= synced, sorted(synced)
    master_side = _utils_closure(REPO / "_runners" / "ccc_inventory.py", REPO / "_pillar" / "ccc_inventory.py")
    migration_synced = {name for name in synced if name.startswith("ccc_migrate")}
    assert migration_synced <= master_side, sorted(migration_synced - master_side)
    offline = {path.stem for path in PACKAGE.glob("*.py") if not path.stem.startswith("_")}
    assert {"cli", "migration", "vault", "write", "secrets", "inventory"} <= offline
    assert not {"ccc_migrate", *offline} & synced


def test_the_tool_imports_the_shared_rules_and_keeps_no_copy_of_them():
    shared = {name for path in PACKAGE.glob("*.py") for name in _imports(path) if (UTILS / f"{name}.py").is_file()}
    assert {"ccc_migrate_containers", "ccc_migrate_check", "ccc_migrate_report", "ccc_migrate_markers",
            "ccc_migrate_inventory"} <= shared, sorted(shared)
    defined_in_utils = {node.name for path in UTILS.glob("ccc_migrate*.py")
                        for node in ast.parse(path.read_text(encoding="utf-8")).body
                        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_")}
    defined_here = {node.name for path in PACKAGE.glob("*.py")
                    for node in ast.parse(path.read_text(encoding="utf-8")).body
                    if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_")}
    assert not defined_in_utils & defined_here, sorted(defined_in_utils & defined_here)
