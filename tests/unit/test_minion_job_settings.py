"""The minion settings ccc-salt prints (scripts/minion_config.py) keep Salt's default of one
process per job: jobs as threads of the minion would never top up the spare SSH host keys
(``ccc_hostkey_spares.top_up_later`` forks only from a single-threaded process)."""

import subprocess
import sys

import minion_config
import yaml

from support.site import REPO


def test_the_minion_settings_keep_each_job_in_a_process_of_its_own():
    printed = subprocess.run([sys.executable, str(REPO / "scripts" / "minion_config.py")], capture_output=True,
                             text=True, check=True).stdout
    assert yaml.safe_load(printed)["multiprocessing"] is True
    assert minion_config.minion_config()["multiprocessing"] is True  # what the tests' minions start with
