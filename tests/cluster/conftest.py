"""A live cluster for event-driven tests: a salt-master (pytest-salt-factories) configured with
ccc-salt's own master config (scripts/master_config.py), and minions node1 and node2, each
driving its own private dockerd. All nodes share one storage tree standing in for NFS."""

import pathlib
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

import master_config
import minion_config
from support import secrets, site
from support.nodes import node_dockerd, remove_managed_containers

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.append(str(REPO / "_beacons"))
import _ccc_settings_watcher  # noqa: E402  (the settings beacon's defaults)

NODES = ("node1", "node2")
QUIET_PERIOD = _ccc_settings_watcher.DEFAULTS["quiet_period"]  # the product's
POLL_INTERVAL = 5
# The master's redeploy limits (ccc_redeploy): tight enough that a short test reaches the rate limit.
REDEPLOY_LIMITS = {"max_applies": 3, "window": 15, "job_timeout": 60}
# ccc:cluster:moves:max_window of the test site: short enough that a test sees a move window end.
MOVE_WINDOW = 40


@pytest.fixture(scope="session")
def salt_factories_config():
    return {"start_timeout": 120}


@pytest.fixture(scope="package")
def cluster_storage(tmp_path_factory):
    root = tmp_path_factory.mktemp("cluster") / "storage"
    site.storage_overrides(root)
    yield root
    site.unmount_below(root)  # the nodes' pin trees must not outlive the cluster


@pytest.fixture(scope="package")
def dockerds():
    daemons = {node: node_dockerd(node) for node in NODES}
    for daemon in daemons.values():
        remove_managed_containers(daemon)
    yield daemons
    for daemon in daemons.values():
        remove_managed_containers(daemon)


@pytest.fixture(scope="package")
def beacon_settings():
    """``ccc:cluster:beacon`` of the test site: the stat poll every POLL_INTERVAL s, the product's
    quiet period (a benchmark may return the product's settings: ``{}``)."""
    return {"quiet_period": QUIET_PERIOD, "poll_interval": POLL_INTERVAL}


@pytest.fixture(scope="package")
def extra_site():
    """``ccc`` pillar added to every node's (a benchmark adds containers and users; a list
    replaces the site's, as Salt's pillar merge does)."""
    return {}


@pytest.fixture(scope="package")
def overrides_root(tmp_path_factory, dockerds, cluster_storage, beacon_settings, extra_site):
    """Per-node pillar: the test dockerd, the shared storage, per-node networks, the beacon."""
    root = tmp_path_factory.mktemp("pillar-overrides")
    for node, daemon in dockerds.items():
        base = yaml.safe_load((site.SAMPLE_SITE / "nodes" / f"{node}.sls").read_text())["ccc"]
        ccc = site.deep_merge(base, {
            "cluster": dict(site.storage_overrides(cluster_storage), networks=site.network_overrides(node),
                            beacon=beacon_settings, moves={"max_window": MOVE_WINDOW}),
            "node": {"docker_url": daemon.url, **site.node_local(cluster_storage, node)},
            # All simulated nodes share one kernel, so host bind mounts would be shared too.
            "user_types": {"researcher": {"allowed_private_data_mount_groups": []}},
        })
        ccc = site.deep_merge(ccc, extra_site)
        path = root / "site" / "nodes" / f"{node}.sls"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump({"ccc": ccc}))
    return root


@pytest.fixture(scope="package")
def redeploy_limits():
    """The master's ``ccc_redeploy`` limits (a benchmark may return the product defaults)."""
    return REDEPLOY_LIMITS


@pytest.fixture(scope="package")
def inventory_repo(tmp_path_factory):
    """Where the master reads a lab's inventory repository (ccc_inventory): absent (nothing
    served) until tests/cluster/test_inventory_repo.py makes one, and absent again after it."""
    return tmp_path_factory.mktemp("inventory") / "ccc-inventory"


@pytest.fixture(scope="package")
def master(salt_factories, overrides_root, redeploy_limits, inventory_repo, tmp_path_factory):
    # The sample site's secrets.sls is encrypted to its public DEMO key: the master's keyring holds it.
    keydir = secrets.demo_keyring(tmp_path_factory.mktemp("master-gpg") / "gpgkeys")
    overrides = master_config.master_config(REPO, REPO / "sample-pillar", [overrides_root], gpg_keydir=keydir,
                                            inventory={"repo": str(inventory_repo)})
    overrides["ccc_redeploy"] = redeploy_limits
    factory = salt_factories.salt_master_daemon("ccc-master", overrides=overrides)
    with factory.started():
        yield factory
    secrets.stop_agent(keydir)


# How often a minion checks its master connection (production: minion_config.MASTER_ALIVE_INTERVAL).
MASTER_ALIVE_INTERVAL = 10


def _minion(master, node):
    # ccc-salt's minion settings (scripts/minion_config.py); this master publishes on a random port
    settings = minion_config.minion_config(MASTER_ALIVE_INTERVAL, master.config["publish_port"])
    return master.salt_minion_daemon(node, overrides={"loop_interval": 1, **settings})


@pytest.fixture(scope="package")
def minions(master, dockerds, event_listener):
    """node1 and node2, started; waits for the start-up reconcile the reactor orchestrates."""
    factories = {node: _minion(master, node) for node in NODES}
    started = time.time()
    _each_at_once(factories.values(), lambda factory: factory.start())
    # minion start -> reactor -> orchestrate (sync_all, state.apply containers) on each node
    result = event_listener.wait_for_events(
        [(master.id, f"salt/job/*/ret/{node}") for node in NODES], after_time=started, timeout=180,
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        running = {node: managed_stacks(dockerds[node]) for node in NODES}
        if running["node1"] >= {"ana-main", "ana-jupyter", "bor-main"}:
            break
        time.sleep(1)
    else:
        pytest.fail(f"start-up reconcile did not deploy node1's containers: {running} {result.missed}")
    yield factories
    _each_at_once([factory for factory in factories.values() if factory.is_running()],
                  lambda factory: factory.terminate())


def _each_at_once(factories, action):
    """``action`` on every minion factory at once: a Salt 3008 minion waits 5 s after SIGTERM
    (``MinionManager.stop_async``, so that its last returns reach the master), and its start
    waits for the master's sign-in; one after the other, every cluster's start-up and teardown
    paid that once per minion."""
    with ThreadPoolExecutor(max_workers=len(NODES)) as pool:
        list(pool.map(action, factories))  # list(): an exception in a thread is raised here


def managed_stacks(daemon):
    """STACK_NAMEs of the running ccc-salt containers on a test dockerd."""
    listed = daemon.client().api.containers(filters={"label": "ccc.managed-by=ccc-salt"})  # one call: no 404 mid-swap
    return {entry["Labels"]["ccc.stack"] for entry in listed}


def redeploys_settled(master, stack=None):
    """The master's redeploy record (``ccc.redeploy_status``) holds nothing in flight, pending or
    held back: for ``stack``, or (None) for any stack and no node's full reconcile either."""
    record = master.salt_run_cli(timeout=60).run("ccc.redeploy_status").data or {}
    if stack is not None:
        return stack not in (record.get("stacks") or {})
    return not record.get("stacks") and not record.get("nodes")
