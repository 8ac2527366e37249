"""Salt's loader settings (``LOADER_SETTINGS`` of scripts/minion_config.py) in every config
ccc-salt writes: the masterless one (scripts/make-local-config.py), the minion's and the
master's. Without ``lazy_loader_strict_matching`` every file client's ``init`` lookup on the
``roots`` backend loaded all of Salt's other fileserver modules (gitfs and its GitPython among
them) on each salt-call and each pillar compile."""

import json
import subprocess
import sys

import master_config
import minion_config
import yaml

from support.site import REPO, SHARED_GPG_KEYDIR

# In a fresh interpreter: the fileserver modules Salt imported to start the config's file server.
_LOADED = """
import json, sys
import salt.config, salt.fileserver
kind, path = sys.argv[1:]
opts = (salt.config.master_config if kind == "master" else salt.config.minion_config)(path)
salt.fileserver.Fileserver(opts).init()
print(json.dumps(sorted(name.rsplit(".", 1)[1] for name in sys.modules if ".fileserver." in name)))
"""


def _fileserver_modules(kind, config_file):
    proc = subprocess.run([sys.executable, "-c", _LOADED, kind, str(config_file)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_the_masterless_config_starts_its_file_server_without_the_other_backends(tmp_path):
    subprocess.run([sys.executable, str(REPO / "scripts" / "make-local-config.py"), "--config-dir", str(tmp_path),
                    "--id", "node1", "--gpg-keydir", str(SHARED_GPG_KEYDIR)], check=True, capture_output=True)
    assert _fileserver_modules("minion", tmp_path / "minion") == ["roots"]


def test_the_master_config_starts_its_file_server_without_the_other_backends(tmp_path):
    config = master_config.master_config(gpg_keydir=tmp_path / "gpgkeys")
    config.update({key: str(tmp_path / key) for key in ("root_dir", "cachedir", "pki_dir", "sock_dir")},
                  log_file=str(tmp_path / "master.log"))
    (tmp_path / "master").write_text(yaml.safe_dump(config))
    assert _fileserver_modules("master", tmp_path / "master") == ["roots"]


def test_the_minion_settings_carry_the_same_loader_settings():
    assert minion_config.minion_config().items() >= minion_config.LOADER_SETTINGS.items()
