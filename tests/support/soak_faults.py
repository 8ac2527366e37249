"""What the fault soak does to the live harness (``tests/cluster/conftest.py``): a user's save, an
admin's pillar file, a dockerd SIGKILLed with or without its containerd and shims, a minion's
whole process tree SIGKILLed in the middle of a recreate, the master stopped, the user-data
share gone, a container that crash-loops. Each helper acts and returns; the driver
(``tests/support/soak.py``) waits and checks. ``Harness.wait`` keeps the checks running while a
fault lasts."""

import os
import pathlib
import signal
import time

import psutil
import yaml

from support.dockerd import start_dockerd
from support.nodes import TEST_BASE, bridge_cidr
from support.soak_checks import name_of, settings_folder
from support.soak_model import CRASH_IMAGE

FOREIGN = "soak-foreign"  # a container of the lab's own, on each node, that ccc-salt must never touch


class Harness:
    """The live cluster's handles (the conftest's fixtures; ``dockerds`` is updated in place when
    an engine is started again, as tests/cluster/test_engine_restart.py does)."""

    def __init__(self, master, minions, dockerds, storage, overrides_root, wait):
        self.master, self.minions, self.dockerds = master, minions, dockerds
        self.storage, self.overrides_root = pathlib.Path(storage), pathlib.Path(overrides_root)
        self.wait = wait  # wait(seconds): sleeps while the continuous checks go on
        self.clients = {}

    # -- engines ------------------------------------------------------------------------------

    def client(self, node):
        daemon = self.dockerds[node]
        cached = self.clients.get(node)
        if cached is None or cached[0] is not daemon:
            if cached is not None:
                cached[1].close()
            self.clients[node] = (daemon, daemon.client(timeout=20))
        return self.clients[node][1]

    def all_clients(self):
        return {node: self.client(node) for node in self.dockerds}

    def inspect(self, node, name):
        try:
            return self.client(node).api.inspect_container(name)
        except Exception:  # noqa: BLE001 - gone or being replaced
            return None

    def prepare_engines(self):
        """The crash image (its entrypoint exits 1 at once) and the foreign container, on each node;
        returns ``{node: (name, id)}`` of the foreign containers."""
        foreign = {}
        for node in self.dockerds:
            client = self.client(node)
            made = client.api.create_container("ccc-test/tiny:1")
            try:
                repository, tag = CRASH_IMAGE.split(":")
                client.api.commit(made["Id"], repository=repository, tag=tag,
                                  changes=['ENTRYPOINT ["/bin/sh", "-c", "echo soak crash; exit 1"]'])
            finally:
                client.api.remove_container(made["Id"])
            for old in client.api.containers(all=True, filters={"name": FOREIGN}):
                client.api.remove_container(old["Id"], force=True)
            created = client.api.create_container("ccc-test/tiny:1", name=FOREIGN, labels={"lab.owner": "soak"},
                                                  host_config=client.api.create_host_config(
                                                      restart_policy={"Name": "always"}))
            client.api.start(created["Id"])
            foreign[node] = (FOREIGN, created["Id"])
        return foreign

    def remove_engine_extras(self):
        for node in self.dockerds:
            client = self.client(node)
            for old in client.api.containers(all=True, filters={"name": FOREIGN}):
                client.api.remove_container(old["Id"], force=True)

    def kill_dockerd(self, node, with_shims, down_s):
        """SIGKILL ``node``'s dockerd (with its containerd and shims: the containers die too; or
        alone: they live on, and the next dockerd stops them); ``start_dockerd`` starts it again."""
        daemon = self.dockerds[node]
        pid = daemon.pid()
        if with_shims:
            daemon._kill_leftovers(pid)  # noqa: SLF001 - the harness's own SIGKILL of the tree
            daemon.stop()
        else:
            os.kill(pid, signal.SIGKILL)
            if daemon._proc is not None:  # noqa: SLF001
                daemon._proc.wait()  # noqa: SLF001
        self.wait(down_s)

    def start_dockerd(self, node):
        self.dockerds[node] = start_dockerd(node, TEST_BASE, bridge_cidr(node), fake_nvidia=True)

    def dockerd_down(self, node):
        return self.dockerds[node].pid() is None

    # -- salt daemons ---------------------------------------------------------------------------

    def kill_minion(self, node):
        """SIGKILL the minion's whole process tree (its running jobs too), as a power cut of the
        daemon would; the factory is told it is gone."""
        factory = self.minions[node]
        pid = factory.pid
        if pid:
            try:
                tree = psutil.Process(pid)
                victims = tree.children(recursive=True) + [tree]
            except psutil.NoSuchProcess:
                victims = []
            for proc in victims:
                try:
                    proc.send_signal(signal.SIGKILL)
                except psutil.NoSuchProcess:
                    pass
        factory.terminate()

    def start_minion(self, node):
        self.minions[node].start()

    def stop_master(self):
        self.master.terminate()

    def start_master(self):
        self.master.start()

    def wait_for_swap(self, node, stack, timeout):
        """Until ``node`` shows the first sign of a recreate of ``stack`` (its ``.ccc-new``, or a
        new id under the name); True when seen."""
        before = self.inspect(node, stack)
        before = before["Id"] if before else None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                names = {name_of(s): s["Id"] for s in self.client(node).api.containers(all=True)}
            except Exception:  # noqa: BLE001
                names = {}
            if f"{stack}.ccc-new" in names or (stack in names and names[stack] != before):
                return True
            time.sleep(0.05)
        return False

    # -- storage and pillar -------------------------------------------------------------------------

    def user_data(self):
        return self.storage / "shared" / "user_data"

    def write_settings(self, email, stack, text):
        path = settings_folder(self.storage, email) / f"{stack}.yml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def take_storage_away(self, step):
        """The user-data share disappears (the folder is gone, as when the share is away); returns
        where its files wait."""
        away = self.storage / "shared" / f"user_data.soak-away-{step}"
        os.rename(self.user_data(), away)
        return away

    def bring_storage_back(self, away, step):
        """Put the share back; returns what the system created at its place meanwhile (moved aside
        first), or None."""
        recreated = None
        if os.path.lexists(self.user_data()):
            recreated = self.storage / f"recreated-user-data-{step}"
            os.rename(self.user_data(), recreated)
            recreated = sorted(str(p.relative_to(recreated)) for p in recreated.rglob("*"))[:20] or ["(empty folder)"]
        os.rename(away, self.user_data())
        return recreated

    def site_file(self, name):
        return self.overrides_root / "site" / f"{name}.sls"

    def write_pillar(self, containers, users):
        """The admin's containers.sls and users.sls (they shadow the sample site's)."""
        self.site_file("containers").write_text(yaml.safe_dump({"ccc": {"containers": containers}}))
        self.site_file("users").write_text(yaml.safe_dump({"ccc": {"users": users}}))

    def break_pillar(self, users):
        """users.sls with invalid YAML (an admin's half-saved edit)."""
        text = yaml.safe_dump({"ccc": {"users": users}})
        self.site_file("users").write_text(text + "  broken: [this is not yaml\n")

    def remove_pillar(self):
        for name in ("containers", "users"):
            self.site_file(name).unlink(missing_ok=True)
