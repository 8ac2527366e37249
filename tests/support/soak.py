"""The fault soak (issue 22): for a set time, a seeded random mix of what real labs see, played
on the live harness (tests/cluster/conftest.py), with the invariants checked all along
(``soak_checks``) and figures kept. Used by bench/soak.py (long runs, any seed) and
tests/cluster/test_soak.py (about two minutes, a fixed seed).

One step at a time: the step acts (``soak_faults``; a fault lasts a while, users may save in
the meantime), then the cluster must become quiet, every quiet invariant holding for
``STABLE`` s, within ``quiet_bound`` s of the fault's end; each invariant still failing then is
a violation, reported with the seed and the step. The continuous invariants are checked about
every second throughout, faults included. No fixed sleep decides anything: every wait polls a
condition with a deadline."""

import collections
import random
import statistics
import time

import yaml

from support import site
from support.soak_checks import (Availability, Copies, UserFiles, foreign_problems, observe, quiet_problems,
                                 report_problems, settings_folder, settings_problems)
from support.soak_faults import Harness
from support.soak_model import CRASH_IMAGE, FAULTS, INVALID, Chooser, Model, Stack, sample_stacks

STABLE = 5  # s every quiet invariant must hold before the cluster counts as quiet
POLL = 1.0
FILES_EVERY = 5  # s between reads of the users' data files


def _sample(name):
    return yaml.safe_load((site.SAMPLE_SITE / f"{name}.sls").read_text())["ccc"][name]


class Soak:
    """One soak run; ``run()`` returns the figures (violations included)."""

    def __init__(self, master, minions, dockerds, storage, overrides_root, seed, duration, move_window,  # noqa: PLR0913
                 kinds=None, max_outage=70, quiet_bound=60, give_up=240, log=print):
        self.h = Harness(master, minions, dockerds, storage, overrides_root, self.wait)
        self.seed, self.duration, self.log = seed, duration, log
        self.quiet_bound, self.give_up = quiet_bound, give_up
        self.model, self.chooser = Model(), Chooser(seed, kinds, max_outage)
        self.data_rng = random.Random(seed + 1)
        self.files = UserFiles(storage)
        self.copies, self.availability = Copies(move_window + 20), Availability()
        self.samples = {"containers": _sample("containers"), "users": _sample("users")}
        self.written, self.foreign, self.originals = {}, {}, {}
        self.step, self.kind = 0, "start"
        self.fault_active, self.fault_ended = False, time.monotonic()
        self.storage_away = None
        self.violations, self.reported = [], set()
        self.faults, self.edits = collections.Counter(), collections.Counter()
        self.to_quiet = collections.defaultdict(list)
        self.started = self.files_read = 0.0

    # -- checks ---------------------------------------------------------------------------------

    def violate(self, invariant, subject, detail):
        if (self.step, invariant, subject) in self.reported:
            return
        self.reported.add((self.step, invariant, subject))
        entry = {"seed": self.seed, "step": self.step, "kind": self.kind, "at_s": round(time.monotonic() - self.started),
                 "invariant": invariant, "subject": subject, "detail": detail}
        self.violations.append(entry)
        self.log(f"VIOLATION {format_violation(entry)}")

    def poll(self):
        """One look: the continuous invariants, the availability figures; returns what was seen."""
        now = time.monotonic()
        seen = observe(self.h.all_clients())
        stacks = self.model.stacks
        self.availability.update(seen, stacks, now)
        found = foreign_problems(seen, self.foreign, quiet=False)
        found += self.copies.problems(seen, stacks, now, now if self.fault_active else self.fault_ended)
        if self.storage_away is None:
            found += report_problems(self.h.storage, stacks) + settings_problems(self.h.storage, self.written)
            if now - self.files_read >= FILES_EVERY:
                self.files_read = now
                found += self.files.problems()
        for problem in found:
            self.violate(*problem)
        return seen

    def wait(self, seconds):
        """Sleep ``seconds`` while the continuous checks go on."""
        deadline = time.monotonic() + seconds
        while True:
            self.poll()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(POLL, left))

    def wait_quiet(self):
        """Until every quiet invariant holds for ``STABLE`` s; each one still failing
        ``quiet_bound`` s after the fault ended is a violation. Returns the seconds to quiet, or
        None after ``give_up`` s."""
        start, stable_since, flagged = time.monotonic(), None, False
        while True:
            seen = self.poll()
            problems = quiet_problems(seen, self.h.inspect, self.h.storage, self.model.stacks, self.foreign)
            problems += self.files.problems()
            now = time.monotonic()
            if not problems:
                stable_since = stable_since or now
                if now - stable_since >= STABLE:
                    return stable_since - start
            else:
                stable_since = None
                if now - start > self.quiet_bound and not flagged:
                    flagged = True
                    for invariant, subject, detail in problems:
                        self.violate(f"quiet within {self.quiet_bound} s: {invariant}", subject, detail)
                if now - start > self.give_up:
                    self.violate("quiet", "cluster", f"still not quiet {self.give_up} s after the step: {problems[:5]}")
                    return None
            time.sleep(POLL)

    # -- what users and admins do ---------------------------------------------------------------

    def save(self, stack, text, count=True):
        self.h.write_settings(stack.email, stack.name, text)
        self.written[(stack.email, stack.name)] = text
        if count:
            self.edits["saves"] += 1

    def edit(self, name, **changes):
        """A valid save: the model takes it as the last accepted settings."""
        stack = self.model.stacks[name]
        for key, value in changes.items():
            if value is None:
                stack.settings.pop(key, None)
            else:
                stack.settings[key] = value
        stack.rejected = False
        self.save(stack, stack.text())
        self.edits["valid"] += 1

    def edits_during(self, edits, within):
        """Users keep saving while a fault lasts: ``edits`` spread over ``within`` s."""
        gap = within / (len(edits) + 1)
        for name, size in edits:
            self.wait(gap)
            if name in self.model.stacks and self.storage_away is None:
                self.edit(name, SHM_SIZE=size)
        self.wait(gap)

    def write_user_file(self):
        stack = self.model.stacks[self.data_rng.choice(["ana-main", "bor-main"])]
        name = f"soak-{self.step}.bin"
        self.files.write(stack.email, stack.name, name, self.data_rng.randbytes(self.data_rng.randint(1, 65536)))

    def admin_pillar(self):
        self.h.write_pillar(self.model.pillar_containers(self.samples["containers"]),
                            self.model.pillar_users(self.samples["users"]))
        self.edits["pillar"] += 1

    def act(self, kind, params):  # noqa: C901, PLR0912 - one branch per kind, each a few lines
        """Perform one step; a fault sets ``fault_active`` while it lasts."""
        if kind == "edit":
            self.edit(params["stack"], SHM_SIZE=params["size"])
            if self.data_rng.random() < 0.5:
                self.write_user_file()
        elif kind == "invalid_edit":
            stack = self.model.stacks[params["stack"]]
            stack.rejected = True
            self.save(stack, INVALID[params["what"]].format(stack=stack.name))
            self.edits["invalid"] += 1
        elif kind == "move":
            self.edit(params["stack"], DEPLOYMENT_NODES=params["nodes"])
            self.edits["moves"] += 1
        elif kind == "burst":
            for size, gap in zip(params["sizes"], params["gaps"]):
                self.edit(params["stack"], SHM_SIZE=size)
                time.sleep(gap)
            self.edits["bursts"] += 1
        elif kind == "crash_loop":
            self.edit(params["stack"], CONTAINER_IMAGE=CRASH_IMAGE if params["crash"] else None)
            self.edits["crash loops started" if params["crash"] else "crash loops fixed"] += 1
        elif kind in ("admin_container", "admin_user"):
            if "remove" in params:
                self.model.remove_container(params["remove"])
            else:
                self.model.add_container(params["add"], with_user=kind == "admin_user")
            self.admin_pillar()
        else:
            self.fault(kind, params)

    def fault(self, kind, params):
        self.faults[kind] += 1
        self.fault_active = True
        if kind == "broken_pillar":
            self.h.break_pillar(self.model.pillar_users(self.samples["users"]))
            self.edits_during(params["edits"], params["for_s"])
            self.admin_pillar()
        elif kind == "dockerd_kill":
            if params["recreate"]:
                name, size = params["recreate"]
                self.edit(name, SHM_SIZE=size)
                if self.h.wait_for_swap(params["node"], name, timeout=30):
                    self.faults["dockerd_kill: in a recreate"] += 1
                time.sleep(params["delay_s"])
            self.h.kill_dockerd(params["node"], params["with_shims"], 0)
            self.edits_during(params["edits"], params["down_s"])
            self.h.start_dockerd(params["node"])
        elif kind == "minion_kill":
            self.edit(params["stack"], SHM_SIZE=params["size"])
            if self.h.wait_for_swap(params["node"], params["stack"], timeout=30):
                self.faults["minion_kill: in a recreate"] += 1
            time.sleep(params["delay_s"])
            self.h.kill_minion(params["node"])
            self.wait(params["down_s"])
            self.h.start_minion(params["node"])
        elif kind == "master_stop":
            if params["saved"]:
                self.edit(params["saved"][0], SHM_SIZE=params["saved"][1])
                time.sleep(params["delay_s"])
            self.h.stop_master()
            self.edits_during(params["edits"], params["down_s"])
            self.h.start_master()
        elif kind == "storage_away":
            self.storage_away = self.h.take_storage_away(self.step)
            self.wait(params["away_s"])
            self.storage_back()
        else:
            raise AssertionError(kind)

    def storage_back(self):
        recreated = self.h.bring_storage_back(self.storage_away, self.step)
        self.storage_away = None
        if recreated:
            self.violate("storage root", "user_data", f"created at the share's place while it was away: {recreated}")

    # -- the run --------------------------------------------------------------------------------

    def setup(self):
        self.foreign = self.h.prepare_engines()
        for stack in self.model.stacks.values():
            path = settings_folder(self.h.storage, stack.email) / f"{stack.name}.yml"
            self.originals[path] = path.read_bytes() if path.exists() else None
            self.save(stack, stack.text(), count=False)
        for stack in ("ana-main", "bor-main"):
            self.files.write(self.model.stacks[stack].email, stack, "soak-start.bin", self.data_rng.randbytes(4096))

    def run(self):
        """Play steps until ``duration`` s are over, then bring every stack back to health; always
        leaves the harness as it found it. Returns the figures."""
        self.started = time.monotonic()
        try:
            self.setup()
            self.log(f"soak seed {self.seed}: waiting for the start to be quiet")
            self.to_quiet["start"].append(self.wait_quiet())
            while time.monotonic() - self.started < self.duration:
                self.step += 1
                self.kind, params = self.chooser.next(self.model)
                began = time.monotonic()
                self.act(self.kind, params)
                self.fault_active, self.fault_ended = False, time.monotonic()
                took = self.wait_quiet()
                self.to_quiet[self.kind].append(took)
                self.log(f"[{began - self.started:6.0f} s] step {self.step} {self.kind} {params}: acted "
                         f"{self.fault_ended - began:.1f} s, quiet after {'never' if took is None else f'{took:.1f} s'}")
            self.step += 1
            self.kind = "final"
            for name, stack in sorted(self.model.stacks.items()):
                if stack.crashing:
                    self.edit(name, CONTAINER_IMAGE=None)
            self.to_quiet["final"].append(self.wait_quiet())
        finally:
            self.teardown()
        return self.figures()

    def teardown(self):
        """Undo what the soak did (the next tests expect the sample site): every daemon back, the
        admin's files and the users' settings as they were, the soak's containers gone."""
        self.fault_active = False
        if self.storage_away is not None:
            self.storage_back()
        for node in list(self.h.dockerds):
            if self.h.dockerd_down(node):
                self.h.start_dockerd(node)
        if not self.h.master.is_running():
            self.h.start_master()
        for node, factory in self.h.minions.items():
            if not factory.is_running():
                self.h.start_minion(node)
        self.h.remove_pillar()
        for path, data in self.originals.items():
            if data is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(data)
        self.written.clear()
        for path in list(self.files.files):
            path.unlink(missing_ok=True)
        self.files.files.clear()
        self.kind, self.step = "teardown", self.step + 1
        self.model.stacks = {name: Stack(s.name, s.email, s.default_nodes, s.image) for name, s in sample_stacks().items()}
        self.model.extra_users = {}
        self.to_quiet["teardown"].append(self.wait_quiet())
        self.h.remove_engine_extras()

    def figures(self):
        times = {kind: [t for t in values if t is not None] for kind, values in self.to_quiet.items()}
        return {
            "seed": self.seed, "duration_s": round(time.monotonic() - self.started), "steps": self.step,
            "faults": dict(self.faults), "edits": dict(self.edits),
            "longest_unavailable_s": {stack: round(s, 1) for stack, s in sorted(self.availability.longest.items())},
            "to_quiet_s": {kind: {"n": len(values), "max": round(max(values), 1) if values else None,
                                  "median": round(statistics.median(values), 1) if values else None,
                                  "never": len(self.to_quiet[kind]) - len(values)}
                           for kind, values in sorted(times.items())},
            "violations": self.violations,
        }


def format_violation(entry):
    return (f"seed {entry['seed']} step {entry['step']} ({entry['kind']}, {entry['at_s']} s): "
            f"{entry['invariant']}: {entry['subject']}: {entry['detail']}")


def format_figures(figures):
    lines = [f"soak seed {figures['seed']}: {figures['duration_s']} s, {figures['steps']} steps",
             f"faults injected: {figures['faults']}", f"edits: {figures['edits']}",
             f"longest unavailability per stack (s): {figures['longest_unavailable_s']}",
             "time to quiet per step kind (s):"]
    lines += [f"  {kind}: {value}" for kind, value in figures["to_quiet_s"].items()]
    lines.append(f"violations: {len(figures['violations'])}")
    lines += [f"  {format_violation(entry)}" for entry in figures["violations"]]
    return "\n".join(lines)


__all__ = ["FAULTS", "Soak", "format_figures", "format_violation"]
