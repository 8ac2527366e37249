"""Two inventory hosts whose names differ only by ``.`` and ``_`` (``gpu.4`` and ``gpu_4``) would
share one node pillar file (pillar/top.sls replaces a minion id's dots by underscores), and the
second written would silently replace the first, with each minion reading the other's GPU groups
and disks. The migration refuses both by name and writes neither file; the other nodes migrate
as before, and the command line writes the tree."""

import shutil
import subprocess

import yaml
from support.site import REPO

from ccc_migrate import migration  # noqa: E402  (support.site puts the checkout on the path)
from ccc_migrate import write as migrate_write  # noqa: E402
INVENTORY = REPO / "tests" / "data" / "ansible-inventory"
SCRIPT = REPO / "scripts" / "migrate-ansible-inventory"


def colliding_inventory(root):
    shutil.copytree(INVENTORY, root)
    hosts_file = root / "ccc-cluster.yml"
    data = yaml.safe_load(hosts_file.read_text())
    data["all"]["children"]["ccc-cluster"]["hosts"].update({"gpu.4": {}, "gpu_4": {}})
    hosts_file.write_text(yaml.safe_dump(data))
    for name, group in (("gpu.4", "device_lab"), ("gpu_4", "device_student")):
        (root / "host_vars" / f"{name}.yml").write_text(yaml.safe_dump({"compute_devices": {group: ["GPU-0"]}}))
    return root


def test_hosts_that_share_a_node_file_are_refused_and_neither_file_is_written(tmp_path):
    root = colliding_inventory(tmp_path / "inventory")
    _, nodes, _, report = migration.migrate(root)
    assert set(nodes) == {"gpu1", "gpu2", "gpu3"}
    refused = {entry["key"]: entry["reason"] for entry in report.entries if entry["status"] == "refused"}
    assert "site/nodes/gpu_4.sls would also be the file of gpu_4" in refused["host gpu.4"]
    assert "site/nodes/gpu_4.sls would also be the file of gpu.4" in refused["host gpu_4"]
    files = migrate_write.plain_files({}, nodes)
    assert "site/nodes/gpu_4.sls" not in files and "site/nodes/gpu1.sls" in files


def test_the_command_line_reports_the_collision_and_writes_the_other_nodes(tmp_path):
    root = colliding_inventory(tmp_path / "inventory")
    out = tmp_path / "out"
    proc = subprocess.run([str(SCRIPT), str(root), str(out)], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "host gpu.4" in proc.stdout and "host gpu_4" in proc.stdout
    assert not (out / "site" / "nodes" / "gpu_4.sls").exists()
    assert (out / "site" / "nodes" / "gpu3.sls").exists()
