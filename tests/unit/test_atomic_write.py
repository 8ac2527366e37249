"""The one atomic writer (``ccc_safefs.replace_file``) when the write fails part way: the file it
replaces is left as it was and no temporary file stays behind, for its callers too (the zfs
role's modprobe file, ``/etc/fstab`` of the nfs_storage role, the master's redeploy record). The failure is real: the writing
process runs under a file size limit (``RLIMIT_FSIZE``, SIGXFSZ ignored), so the kernel writes
part of the data and then refuses the rest with EFBIG, as a disk that fills up would."""

import json
import os
import resource
import signal
import subprocess
import sys

import pytest

from support.site import REPO

LIMIT = 16  # bytes a process may write to any file: less than any of the files below

PRELUDE = f"""
import json, sys
sys.path[:0] = [{str(REPO / "_utils")!r}, {str(REPO / "tests")!r}]
from support.scripts import load_module
"""

WRITERS = {
    "replace_file": """
import ccc_safefs
try:
    ccc_safefs.replace_file(sys.argv[1], b"new text, longer than the limit\\n" * 4, 0o600)
    print(json.dumps("written"))
except OSError as exc:
    print(json.dumps(str(exc)))
""",
    "zfs modprobe file": """
states = load_module("_states/ccc_zfs.py", "ccc_zfs_state", salt={}, opts={"test": False})
result = states.module_parameters(sys.argv[1], {"zfs_arc_max": 17179869184}, sys.argv[1] + ".no-module")
print(json.dumps([result["result"], result["comment"]]))
""",
    "fstab": """
from salt.exceptions import CommandExecutionError
module = load_module("_modules/ccc_nfs.py", "ccc_nfs_module")
module.FSTAB = sys.argv[1]
try:
    module.fstab_set("/data/shared/user_data", "nas:/export/users", "nfs", ["auto"])
    print(json.dumps("written"))
except CommandExecutionError as exc:
    print(json.dumps(str(exc)))
""",
}


def _limited():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a killed process
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def run_limited(code, path):
    proc = subprocess.run([sys.executable, "-c", PRELUDE + code, str(path)], capture_output=True, text=True,
                          timeout=60, preexec_fn=_limited, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_write_that_fails_part_way_leaves_the_old_file_and_no_temporary_file(tmp_path, writer):
    folder = tmp_path / "etc" / "conf.d"
    folder.mkdir(parents=True)
    target = folder / "the-file"
    target.write_text("UUID=x / ext4 defaults 0 1\n")  # what was there before, over the limit itself
    said = run_limited(WRITERS[writer], target)
    assert "File too large" in json.dumps(said), said
    if writer == "zfs modprobe file":
        assert said == [False, f"{target} could not be written ([Errno 27] File too large); nothing was changed"]
    if writer == "fstab":
        assert said == f"{target} could not be written ([Errno 27] File too large); it is unchanged"
    assert target.read_text() == "UUID=x / ext4 defaults 0 1\n"
    assert sorted(os.listdir(folder)) == ["the-file"]


def test_without_the_limit_the_same_write_replaces_the_file(tmp_path):
    target = tmp_path / "etc" / "the-file"
    target.parent.mkdir()
    target.write_text("old\n")
    proc = subprocess.run([sys.executable, "-c", PRELUDE + WRITERS["replace_file"], str(target)],
                          capture_output=True, text=True, timeout=60)
    assert json.loads(proc.stdout) == "written"
    assert target.read_bytes() == b"new text, longer than the limit\n" * 4
    assert oct(target.stat().st_mode & 0o777) == "0o600" and os.listdir(target.parent) == ["the-file"]


REDEPLOY_RECORD = """
import ccc_redeploy
try:
    with ccc_redeploy.open_record(sys.argv[1]) as record:
        record["stacks"]["ana-main"] = {"pending": True}
    print(json.dumps("written"))
except OSError as exc:
    print(json.dumps(str(exc)))
"""


def test_the_masters_redeploy_record_is_replaced_whole_or_not_at_all(tmp_path):
    """The redeploy record (``ccc_redeploy.open_record``) goes through ``replace_file``: a write
    that fails part way leaves the old record and no temporary file, and a link planted at the
    fixed temporary name it used to write through (``record.json.tmp``) is never followed."""
    cachedir = tmp_path / "cache"
    folder = cachedir / "ccc-redeploy"
    folder.mkdir(parents=True)
    record = folder / "record.json"
    old = json.dumps({"stacks": {}, "users": {}, "nodes": {}, "versions": {}}, sort_keys=True)
    record.write_text(old)
    said = run_limited(REDEPLOY_RECORD, cachedir)
    assert "File too large" in said, said
    assert record.read_text() == old
    assert sorted(os.listdir(folder)) == ["lock", "record.json"]
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (folder / "record.json.tmp").symlink_to(victim)
    proc = subprocess.run([sys.executable, "-c", PRELUDE + REDEPLOY_RECORD, str(cachedir)], capture_output=True,
                          text=True, timeout=60)
    assert json.loads(proc.stdout) == "written", proc.stderr
    assert json.loads(record.read_text())["stacks"] == {"ana-main": {"pending": True}}
    assert victim.read_text() == "keep\n"
    assert oct(record.stat().st_mode & 0o777) == "0o600"
