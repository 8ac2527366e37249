"""Run each group of test modules in one pytest-xdist worker (``-n 2 --dist loadgroup``).

Why not xdist's own ``loadgroup``: xdist 3.8 marks a group by appending ``@<group>`` to
``item._nodeid``, which pytest 9 no longer reads (node ids live in ``item._id``), so the marks
are ignored and a module's tests are spread over both workers, each booting the module's test
node under the same container name. Instead the workers, which see every test's fixture closure,
write ``{module: group}`` to a folder the controller names; the controller's scheduler (xdist's
``LoadScopeScheduling``, whose scopes are whole groups) reads it once all workers have collected.

Groups: a module is its own group (its module-scoped nodes are built once), except
``tests/cluster/`` and every module using node1's or node2's fixed-name private dockerd (the
cluster drives them too), the acceptance tier (``tests/acceptance/``: one master, two test
nodes), and the modules changing the host's inotify sysctls."""

import json
import pathlib

NODE_DOCKERD_GROUP = "node-dockerds"
NODE_DOCKERD_FIXTURES = {"node1_dockerd", "node2_dockerd", "dockerds"}
# Modules that change host-global state other modules read: the host's fs.inotify sysctls.
SHARED_HOST_GROUPS = {
    "tests/nodes/test_host_roles.py": "host-sysctl",
    "tests/nodes/test_cluster.py": "host-sysctl",
    "tests/bench/test_bench_node_smoke.py": "host-sysctl",  # bench/cluster_apply.py's node
}
# The admin's journey (tests/acceptance/): its modules share one master and two test nodes.
ACCEPTANCE_GROUP = "acceptance"
WORKERINPUT_KEY = "ccc_xdist_groups_dir"


def module_of(nodeid):
    """The module part of a node id (``tests/nodes/test_x.py``)."""
    return nodeid.split("::", 1)[0]


def groups_of(items):
    """``{module: group}`` for collected ``items`` (their ``nodeid`` and ``fixturenames``)."""
    groups = {}
    for item in items:
        module = module_of(item.nodeid)
        if module.startswith("tests/cluster/") or NODE_DOCKERD_FIXTURES & set(item.fixturenames):
            groups[module] = NODE_DOCKERD_GROUP
        elif module.startswith("tests/acceptance/"):
            groups[module] = ACCEPTANCE_GROUP
        else:
            groups.setdefault(module, SHARED_HOST_GROUPS.get(module, module))
    return groups


def write_groups(folder, worker, items):
    """A worker's part: its collection's groups as ``<folder>/<worker>.json`` (atomically)."""
    target = pathlib.Path(folder) / f"{worker}.json"
    scratch = target.with_suffix(".tmp")
    scratch.write_text(json.dumps(groups_of(items)))
    scratch.replace(target)


def read_groups(folder):
    """The controller's part: the groups every worker wrote (they collect the same tests)."""
    groups = {}
    for path in sorted(pathlib.Path(folder).glob("*.json")):
        groups.update(json.loads(path.read_text()))
    return groups


def make_scheduler(config, log, folder):
    """xdist's LoadScopeScheduling with a test's scope = its module's group from ``folder``."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        """Whole groups go to one worker; bigger groups (by test count) are handed out first."""

        _groups = None

        def _split_scope(self, nodeid):
            if self._groups is None:  # first called once every worker has finished collecting
                self._groups = read_groups(folder)
            module = module_of(nodeid)
            return self._groups.get(module, module)

    return GroupScheduling(config, log)
