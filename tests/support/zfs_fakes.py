"""The FAKE zpool/zfs/blkid (``tests/support/fakes/zfs_tools.py``) set up for one test: a bin
folder to put first on PATH, the JSON state the fakes answer from, file-backed "disks" (with
by-id style symlinks to them, as admins name disks) and the recorded command lines."""

import json
import os
import pathlib
import sys

FAKE = pathlib.Path(__file__).resolve().parent / "fakes" / "zfs_tools.py"
TOOLS = ("zpool", "zfs", "blkid")


def forbidden(argv):
    """Why a recorded command line is one the zfs role must never run, or None."""
    tool, args = argv[0], argv[1:]
    if tool in ("zpool", "zfs") and args[:1] == ["destroy"]:
        return "destroy"
    if "labelclear" in args or tool in ("wipefs", "sgdisk", "parted", "mkfs"):
        return "re-label"
    if tool == "zpool" and args[:1] == ["create"] and any(a == "-f" or (a.startswith("-") and "f" in a[1:] and len(a) <= 4) for a in args[1:]):
        return "forced create"
    if args[:1] in (["export"], ["import"], ["replace"], ["detach"], ["remove"], ["rename"], ["rollback"], ["attach"]):
        return f"{args[0]} (changes a pool's layout or data)"
    return None


class FakeZfs:
    """One test's fake tools. ``env`` is the PATH to run them under."""

    def __init__(self, root):
        self.root = pathlib.Path(root)
        self.bin = self.root / "bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        for tool in TOOLS:  # this interpreter without site (fast start), the fake under the tool's name
            wrapper = self.bin / tool
            wrapper.write_text(f"#!{sys.executable} -S\nimport runpy, sys\nmain = runpy.run_path({str(FAKE)!r})['main']\n"
                               f"sys.argv[0] = {tool!r}\nmain()\n")
            wrapper.chmod(0o755)
        self.state_file = self.root / "zfs-state.json"
        self.log_file = self.root / "zfs-calls.jsonl"
        self.write({"pools": {}, "datasets": {}, "labels": {}})
        self.log_file.write_text("")

    def env(self, base=None):
        """Environment variables that make ``zpool``/``zfs``/``blkid`` the fakes."""
        base = dict(os.environ if base is None else base)
        return dict(base, PATH=f"{self.bin}:{base.get('PATH', '/usr/bin:/bin')}",
                    CCC_FAKE_ZFS_STATE=str(self.state_file), CCC_FAKE_ZFS_LOG=str(self.log_file))

    def disks(self, *names):
        """File "disks" ``dev/<name>`` and their ``by-id/ata-<name>`` links; returns the links."""
        found = []
        for name in names:
            device = self.root / "dev" / name
            device.parent.mkdir(exist_ok=True)
            device.write_bytes(b"")
            link = self.root / "by-id" / f"ata-{name}"
            link.parent.mkdir(exist_ok=True)
            if not link.is_symlink():
                link.symlink_to(device)
            found.append(str(link))
        return found

    def read(self):
        return json.loads(self.state_file.read_text())

    def write(self, state):
        self.state_file.write_text(json.dumps(state))

    def label(self, disk, kind):
        """Give ``disk`` a signature: a file system type (``ext4``, ``zfs_member`` of an exported
        pool) or a ``KEY=value`` line as blkid prints it (``PTTYPE=gpt``)."""
        state = self.read()
        state["labels"][os.path.realpath(disk)] = kind
        self.write(state)

    def calls(self):
        """Every recorded command line, ``[tool, arg, ...]``, in order."""
        return [json.loads(line) for line in self.log_file.read_text().splitlines() if line]

    def changing_calls(self):
        """The recorded commands that change something (everything but reads and probes)."""
        reads = {("zpool", "list"), ("zpool", "status"), ("zpool", "get"), ("zfs", "list"), ("zfs", "get")}
        return [argv for argv in self.calls() if argv[0] != "blkid" and tuple(argv[:2]) not in reads]
