"""The sample site's secrets (sample-pillar/site/secrets.sls, GPG-encrypted to the public DEMO
key the test master holds) never travel on the event bus: a pillar refresh, the master's pillar
watch, a full reconcile and a settings redeploy on node1 and node2, and every event the master
and the minions sent meanwhile (job publications and returns, beacons, reactor and runner
events) is scanned for each decrypted secret value."""

import json
import time

import pytest
import yaml

from support import secrets, site

from .test_redeploy import EDIT_TIMEOUT, settings_dir, shm_of, wait_for

pytestmark = pytest.mark.docker

GIB = 1024**3


def _demo_secret_values(keyring):
    text = (site.SAMPLE_SITE / "secrets.sls").read_text().split("\n", 1)[1]
    values = []

    def walk(node):
        if isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, str) and "BEGIN PGP MESSAGE" in node:
            values.append(secrets.gpg(keyring, "--decrypt", stdin=node))
    walk(yaml.safe_load(text))
    return values


def test_no_secret_travels_on_the_event_bus(master, minions, dockerds, cluster_storage, event_listener,
                                            tmp_path_factory):
    keyring = secrets.demo_keyring(tmp_path_factory.mktemp("demo-gpg") / "gpgkeys")
    values = _demo_secret_values(keyring)
    secrets.stop_agent(keyring)
    assert len(values) >= 5 and all(values)
    started = time.time()
    cli = master.salt_cli(timeout=120)
    assert cli.run("saltutil.refresh_pillar", "wait=True", minion_tgt="*").returncode == 0
    assert master.salt_run_cli(timeout=120).run("ccc.pillar_watch", "force=True").returncode == 0
    assert master.salt_run_cli(timeout=120).run("ccc.reconcile_node", "node2").returncode == 0
    path = settings_dir(cluster_storage, "bor.kralj@example.org") / "bor-main.yml"
    path.write_text("bor-main:\n  SHM_SIZE: 3g\n")
    assert wait_for(lambda: shm_of(dockerds["node1"], "bor-main") == 3 * GIB, timeout=EDIT_TIMEOUT)
    time.sleep(5)  # the last returns and reactor events
    events = event_listener.get_events([(master.id, "*"), ("node1", "*"), ("node2", "*")], after_time=started)
    assert len(events) > 20, "the scan saw too few events to mean anything"
    texts = {f"event {event.tag} from {event.daemon_id} #{n}": json.dumps([event.data, event.full_data], default=str)
             for n, event in enumerate(events)}
    secrets.assert_no_secret(texts, values)
