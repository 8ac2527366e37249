"""The masterless config (scripts/make-local-config.py) keeps Salt's grains cache: a salt-call
gathered every grain again on each run (0.08-0.10 s of a no-op apply), and the cache holds the
node's id. A config written again for another node must never act as the node it replaced."""

import subprocess
import sys

from support.site import REPO, SHARED_GPG_KEYDIR, SaltNode


def _grain(node, name):
    return node.salt_call("grains.get", name)[0]


def test_grains_are_cached_and_a_rewritten_config_starts_from_its_own_id(tmp_path):
    node = SaltNode(tmp_path / "salt", "node1", "unix:///nonexistent.sock", tmp_path / "storage")
    cache = node.config_dir / "var" / "cache" / "grains.cache.p"
    assert _grain(node, "id") == "node1"
    assert cache.is_file()  # the next salt-call reads the grains from here

    subprocess.run([sys.executable, str(REPO / "scripts" / "make-local-config.py"), "--config-dir", str(node.config_dir),
                    "--id", "node2", "--gpg-keydir", str(SHARED_GPG_KEYDIR)], check=True, capture_output=True)
    assert not cache.exists()
    assert _grain(node, "id") == "node2"  # within the cache's 5 minutes: not node1's
