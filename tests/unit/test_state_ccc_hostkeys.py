"""The ``ccc_hostkeys`` states' own part (the sshd_hostkeys role): compare, test mode, result,
comment and changes of the backup and of the node copies. Boundary: ``__salt__`` is a dict of
fakes that record their calls (``Fakes``), the narrowest boundary of a state; the real key store
behind it is in tests/nodes/test_host_roles.py."""

from salt.exceptions import CommandExecutionError
from support.salt_modules import Fakes, raises
from support.scripts import load_module

ACTING = ("ccc_hostkeys.migrate", "ccc_hostkeys.backup", "ccc_hostkeys.refresh")
PLAN = {"source": "", "sets": 2, "digest": "abc123", "write": "host-keys-20261205T080000Z-abc123.tar", "prune": []}
CURRENT = dict(PLAN, write=None)


def state(tmp_path, test=False, plan=PLAN, stale=(), **functions):
    """The state over a store at ``<tmp_path>/storage/state`` whose sets exist; ``plan`` and
    ``stale`` are what ``backup_plan`` and ``outdated`` return."""
    (tmp_path / "storage" / "state" / "host-keys").mkdir(parents=True, exist_ok=True)
    fakes = {"migrate": lambda: [], "backup_plan": lambda backup_dir, keep: dict(plan),
             "backup": lambda backup_dir, keep: dict(plan), "outdated": lambda sshd_data: list(stale),
             "refresh": lambda sshd_data, stack: True}
    fakes.update(functions)
    salt = Fakes({f"ccc_hostkeys.{key}": function for key, function in fakes.items()})
    pillar = {"ccc": {"cluster": {"state_dir": str(tmp_path / "storage" / "state")}}}
    return load_module("_states/ccc_hostkeys.py", "ccc_hostkeys_state", salt=salt, opts={"test": test},
                       pillar=pillar), salt


def test_backup_in_test_mode_reports_the_would_be_tar_and_moves_and_writes_nothing(tmp_path):
    module, salt = state(tmp_path, test=True)
    assert module.backed_up("/backups", keep=3) == {
        "name": "/backups", "result": None, "changes": {"write": PLAN["write"]},
        "comment": "would back up 2 host key set(s) to /backups"}
    assert salt.called(*ACTING) == []


def test_backup_written_then_a_second_run_with_a_current_backup_changes_nothing(tmp_path):
    module, salt = state(tmp_path)
    assert module.backed_up("/backups", keep=3)["comment"] == "backed up 2 host key set(s) to /backups"
    assert salt.called("ccc_hostkeys.backup") == [("ccc_hostkeys.backup", ("/backups", 3))]
    module, salt = state(tmp_path, plan=CURRENT)
    assert module.backed_up("/backups", keep=3) == {"name": "/backups", "result": True, "changes": {},
                                                   "comment": "backup of 2 host key set(s) is current (abc123)"}
    assert salt.called("ccc_hostkeys.backup") == []


def test_a_failing_backup_or_move_fails_the_state_with_the_reason(tmp_path):
    failing = raises(CommandExecutionError("host key backup to /backups failed: No space left on device"))
    assert state(tmp_path, backup=failing)[0].backed_up("/backups") == {
        "name": "/backups", "result": False, "changes": {},
        "comment": "host key backup to /backups failed: No space left on device"}
    moving = raises(CommandExecutionError("moving the host key sets into the key store failed: Permission denied"))
    result = state(tmp_path, migrate=moving)[0].node_copies_current("/data/sshd")
    assert (result["result"], result["comment"]) == (
        False, "moving the host key sets into the key store failed: Permission denied")


def test_node_copies_in_test_mode_then_refreshed_then_current(tmp_path):
    module, salt = state(tmp_path, test=True, stale=["box"])
    assert module.node_copies_current("/data/sshd") == {
        "name": "/data/sshd", "result": None, "changes": {"refresh": ["box"]},
        "comment": "would copy the rotated host keys of box"}
    assert salt.called(*ACTING) == []
    module, salt = state(tmp_path, stale=["box"])
    assert module.node_copies_current("/data/sshd")["changes"] == {"refreshed": ["box"]}
    assert salt.called("ccc_hostkeys.refresh") == [("ccc_hostkeys.refresh", ("/data/sshd", "box"))]
    module, salt = state(tmp_path)
    assert module.node_copies_current("/data/sshd") == {
        "name": "/data/sshd", "result": True, "changes": {},
        "comment": "the node's host key copies match the shared sets"}
    assert salt.called("ccc_hostkeys.refresh") == []
