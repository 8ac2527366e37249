"""The fault soak's model (``tests/support/soak.py``): what the soak's users and admins asked for
last, so the checker knows what must run where once the cluster is quiet, and the seeded choice
of the next step. Pure: no harness, no clock; one ``random.Random(seed)`` decides every choice,
so a seed names a run (the timing of what the cluster does in between still varies)."""

import copy
import dataclasses
import random

import yaml

NODES = ("node1", "node2")
MIB = 1024**2
SIZES = {"256m": 256 * MIB, "512m": 512 * MIB, "1g": 1024 * MIB, "2g": 2048 * MIB, "3g": 3072 * MIB,
         "4g": 4096 * MIB}
PLACEMENTS = (["node1"], ["node2"], ["node1", "node2"])
ANA, BOR = "ana.novak@example.org", "bor.kralj@example.org"
BASE_IMAGE = "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1"
JUPYTER_IMAGE = "vicoslab/ccc:jupyter-latest-ubuntu22.04-cuda12.6.1"
CRASH_IMAGE = "vicoslab/ccc:soak-crash"  # within the sample site's image policy; made by the soak
# Settings files a user gets wrong: each is refused as a whole, the last accepted settings stay.
INVALID = {
    "size over the maximum": "{stack}:\n  SHM_SIZE: 900t\n",
    "broken YAML": "{stack}:\n  SHM_SIZE: [1g\n",
    "not a mapping": "- {stack}\n- SHM_SIZE: 1g\n",
    "unknown image": "{stack}:\n  CONTAINER_IMAGE: 'evil.example.org/miner:latest'\n",
}
MAX_EXTRAS = 2  # containers (and users) the soak's admin adds at most at once

# kind -> weight of the step mix (faults and edits); ``Chooser(kinds=...)`` may narrow it
WEIGHTS = {
    "edit": 18, "invalid_edit": 8, "move": 10, "burst": 6, "crash_loop": 4, "admin_container": 5,
    "admin_user": 4, "broken_pillar": 3, "dockerd_kill": 5, "minion_kill": 5, "master_stop": 3, "storage_away": 3,
}
FAULTS = ("broken_pillar", "dockerd_kill", "minion_kill", "master_stop", "storage_away")


@dataclasses.dataclass
class Stack:
    """One container the soak watches: its user's last accepted settings (``settings``, as the
    file says them), where pillar places it without them, and the admin's image."""

    name: str
    email: str
    default_nodes: list
    image: str
    settings: dict = dataclasses.field(default_factory=dict)
    added: bool = False  # added to pillar by the soak's admin (removed again by it)
    user_added: bool = False  # its user too
    rejected: bool = False  # the user's last save was invalid (the accepted settings stay)

    @property
    def placement(self):
        return list(self.settings.get("DEPLOYMENT_NODES") or self.default_nodes)

    @property
    def shm(self):
        """The accepted SHM_SIZE in bytes, None when the user set none (pillar's)."""
        size = self.settings.get("SHM_SIZE")
        return SIZES[size] if size else None

    @property
    def wanted_image(self):
        return self.settings.get("CONTAINER_IMAGE") or self.image

    @property
    def crashing(self):
        return self.wanted_image == CRASH_IMAGE

    def text(self):
        return yaml.safe_dump({self.name: self.settings}, default_flow_style=False)


def sample_stacks():
    """The sample site's researcher containers on node1/node2, each with an explicit settings file
    (the soak writes it first: an earlier test's file says nothing then)."""
    return {
        "ana-main": Stack("ana-main", ANA, ["node1"], BASE_IMAGE, {"SHM_SIZE": "1g"}),
        "ana-jupyter": Stack("ana-jupyter", ANA, ["node1"], JUPYTER_IMAGE, {"SHM_SIZE": "1g"}),
        "bor-main": Stack("bor-main", BOR, ["node1", "node2"], BASE_IMAGE, {"SHM_SIZE": "1g"}),
    }


class Model:
    """What was asked for last; ``expected()`` is what must run once the cluster is quiet."""

    def __init__(self):
        self.stacks = sample_stacks()
        self.extra_users = {}  # email -> pillar entry
        self.counter = 0

    def expected(self):
        """``{stack: Stack}`` of the stacks that must exist (placement, settings, image)."""
        return dict(self.stacks)

    def extras(self):
        return [stack for stack in self.stacks.values() if stack.added]

    def pillar_containers(self, sample):
        """The admin's containers list: the sample site's plus the soak's."""
        added = [{"STACK_NAME": s.name, "USER_EMAIL": s.email, "CONTAINER_IMAGE": s.image,
                  "DEPLOYMENT_NODES": list(s.default_nodes)} for s in self.extras()]
        return copy.deepcopy(sample) + added

    def pillar_users(self, sample):
        users = copy.deepcopy(sample)
        users.update(copy.deepcopy(self.extra_users))
        return users

    def add_container(self, node, with_user):
        self.counter += 1
        if with_user:
            email = f"soak{self.counter}@example.org"
            self.extra_users[email] = {"USER_FULLNAME": f"Soak User {self.counter}", "USER_NAME": f"soak{self.counter}",
                                       "USER_TYPE": "researcher"}
            stack = Stack(f"soak-u{self.counter}", email, [node], BASE_IMAGE, added=True, user_added=True)
        else:
            stack = Stack(f"soak-a{self.counter}", ANA, [node], BASE_IMAGE, added=True)
        self.stacks[stack.name] = stack
        return stack

    def remove_container(self, name):
        stack = self.stacks.pop(name)
        if stack.user_added:
            self.extra_users.pop(stack.email, None)
        return stack


class Chooser:
    """The seeded step mix: ``next(model)`` -> ``(kind, params)``; every choice from one RNG."""

    def __init__(self, seed, kinds=None, max_outage=70):
        self.rng = random.Random(seed)
        self.weights = {kind: weight for kind, weight in WEIGHTS.items() if kinds is None or kind in kinds}
        self.max_outage = max_outage

    def pick(self, options):
        return options[self.rng.randrange(len(options))]

    def user_stack(self, model, movable=False):
        names = sorted(name for name, stack in model.stacks.items()
                       if not stack.added and not (movable and stack.crashing))
        return self.pick(names)

    def size_other_than(self, current):
        return self.pick([size for size in SIZES if size != current])

    def edits_during(self, model):
        """0-2 valid SHM_SIZE edits a user makes while a fault lasts."""
        return [(self.user_stack(model), self.pick(list(SIZES))) for _ in range(self.rng.randrange(3))]

    def next(self, model):  # noqa: C901 - one branch per kind, each a few lines
        kinds = sorted(self.weights)
        kind = self.rng.choices(kinds, weights=[self.weights[k] for k in kinds])[0]
        rng = self.rng
        if kind == "edit":
            name = self.user_stack(model)
            return kind, {"stack": name, "size": self.size_other_than(model.stacks[name].settings.get("SHM_SIZE"))}
        if kind == "invalid_edit":
            return kind, {"stack": self.user_stack(model), "what": self.pick(sorted(INVALID))}
        if kind == "move":
            name = self.user_stack(model, movable=True)
            current = model.stacks[name].placement
            return kind, {"stack": name, "nodes": self.pick([p for p in PLACEMENTS if p != current])}
        if kind == "burst":
            return kind, {"stack": self.user_stack(model), "sizes": [self.pick(list(SIZES)) for _ in range(rng.randint(5, 20))],
                          "gaps": [round(rng.uniform(0.05, 0.6), 2) for _ in range(20)]}
        if kind == "crash_loop":
            crashing = sorted(n for n, s in model.stacks.items() if s.crashing)
            if crashing:  # the user fixes it
                return kind, {"stack": self.pick(crashing), "crash": False}
            return kind, {"stack": self.user_stack(model), "crash": True}
        if kind in ("admin_container", "admin_user"):
            removable = sorted(s.name for s in model.extras() if s.user_added == (kind == "admin_user"))
            if removable and (len(model.extras()) >= MAX_EXTRAS or rng.random() < 0.5):
                return kind, {"remove": self.pick(removable)}
            if len(model.extras()) >= MAX_EXTRAS:
                return self.next(model)
            return kind, {"add": self.pick(list(NODES))}
        if kind == "broken_pillar":
            return kind, {"for_s": rng.randint(15, 45), "edits": self.edits_during(model)}
        if kind == "dockerd_kill":  # half the time in the middle of a recreate on that node
            node = self.pick(list(NODES))
            on_node = sorted(n for n, s in model.stacks.items() if node in s.placement and not s.added)
            recreate = None
            if on_node and rng.random() < 0.5:
                name = self.pick(on_node)
                recreate = (name, self.size_other_than(model.stacks[name].settings.get("SHM_SIZE")))
            return kind, {"node": node, "with_shims": rng.random() < 0.5, "down_s": rng.randint(1, 20),
                          "recreate": recreate,
                          "delay_s": round(rng.uniform(0, 1.5), 2), "edits": self.edits_during(model)}
        if kind == "minion_kill":
            name = self.user_stack(model)
            node = self.pick(model.stacks[name].placement)
            return kind, {"node": node, "stack": name, "size": self.size_other_than(model.stacks[name].settings.get("SHM_SIZE")),
                          "delay_s": round(rng.uniform(0, 2.5), 2), "down_s": rng.randint(2, 12)}
        if kind == "master_stop":  # half the time right after a save (its event in flight)
            saved = (self.user_stack(model), self.pick(list(SIZES))) if rng.random() < 0.5 else None
            return kind, {"down_s": rng.randint(10, max(10, self.max_outage)), "edits": self.edits_during(model),
                          "saved": saved, "delay_s": round(rng.uniform(0, 1.0), 2)}
        if kind == "storage_away":
            return kind, {"away_s": rng.randint(5, 30)}
        raise AssertionError(kind)
