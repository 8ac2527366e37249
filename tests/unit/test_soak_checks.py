"""The fault soak's checker (tests/support/soak_checks.py) finds what it is there to find: a
swap leftover, a stack on the wrong node or running older settings, a ``.deploy`` that tells
another story or is not a bounded regular file, a foreign container gone, a second copy kept
past the move window, a user's file changed. Fake engine listings; real files."""

import os

from support.soak_checks import Availability, Copies, UserFiles, quiet_problems, report_problems
from support.soak_model import Stack

SHM_1G = 1024**3


def listing(*containers):
    return [{"Names": [f"/{name}"], "Id": f"id-{name}", "State": state,
             "Labels": {"ccc.managed-by": "ccc-salt", "ccc.stack": name.split(".ccc-")[0]}}
            for name, state in containers]


def inspect_with(shm=SHM_1G, image="img:1"):
    return lambda node, name: {"Config": {"Image": image}, "HostConfig": {"ShmSize": shm}}


def stack():
    return {"box": Stack("box", "u@x.org", ["node1"], "img:1", {"SHM_SIZE": "1g"})}


def write_report(tmp_path, text):
    folder = tmp_path / "shared" / "user_data" / "u@x.org" / "container-settings"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "box.deploy").write_text("# ccc-salt deploy report, written now\n" + text)
    return folder / "box.deploy"


TRUE_REPORT = "container: box\nnode: node1\nresult: running, unchanged\nplacement: node1\n" \
              "settings: your settings file was accepted\nshm_size: 1g\n"


def kinds(problems):
    return sorted({problem[0] for problem in problems})


def test_a_quiet_cluster_passes(tmp_path):
    write_report(tmp_path, TRUE_REPORT)
    seen = {"node1": listing(("box", "running")), "node2": []}
    assert quiet_problems(seen, inspect_with(), tmp_path, stack(), {}) == []


def test_leftovers_wrong_nodes_and_old_settings_are_found(tmp_path):
    write_report(tmp_path, TRUE_REPORT)
    seen = {"node1": listing(("box", "running"), ("box.ccc-old", "exited")), "node2": []}
    assert kinds(quiet_problems(seen, inspect_with(), tmp_path, stack(), {})) == ["swap leftover"]
    seen = {"node1": listing(("box", "running")), "node2": listing(("box", "running"))}
    assert kinds(quiet_problems(seen, inspect_with(), tmp_path, stack(), {})) == ["placement"]
    seen = {"node1": listing(("box", "running")), "node2": []}
    assert kinds(quiet_problems(seen, inspect_with(shm=2 * SHM_1G), tmp_path, stack(), {})) == ["last edit runs"]
    assert kinds(quiet_problems({"node1": None, "node2": []}, inspect_with(), tmp_path, stack(), {})) == ["engine"]


def test_a_report_that_tells_another_story_is_found(tmp_path):
    seen = {"node1": listing(("box", "running")), "node2": []}
    for wrong in (TRUE_REPORT.replace("shm_size: 1g", "shm_size: 4g"),
                  TRUE_REPORT.replace("node: node1", "node: node2"),
                  TRUE_REPORT.replace("running, unchanged", "NOT deployed: the Docker engine does not answer"),
                  TRUE_REPORT.replace("was accepted", "was REJECTED (see messages)")):
        write_report(tmp_path, wrong)
        assert kinds(quiet_problems(seen, inspect_with(), tmp_path, stack(), {})) == ["deploy truth"], wrong


def test_a_report_must_be_a_bounded_regular_file(tmp_path):
    path = write_report(tmp_path, TRUE_REPORT)
    assert report_problems(tmp_path, stack()) == []
    path.write_text("x" * 9000)
    assert kinds(report_problems(tmp_path, stack())) == ["deploy file"]
    path.unlink()
    os.symlink("/etc/passwd", path)
    assert kinds(report_problems(tmp_path, stack())) == ["deploy file"]


def test_a_foreign_container_removed_is_found(tmp_path):
    write_report(tmp_path, TRUE_REPORT)
    seen = {"node1": listing(("box", "running")), "node2": []}
    foreign = {"node2": ("lab-own", "id-lab-own")}
    assert kinds(quiet_problems(seen, inspect_with(), tmp_path, stack(), foreign)) == ["foreign container"]


def test_two_copies_count_only_past_the_window_and_after_the_last_fault():
    copies, stacks = Copies(bound=40), stack()
    seen = {"node1": listing(("box", "running")), "node2": listing(("box", "running"))}
    assert copies.problems(seen, stacks, now=100, fault_ended=0) == []
    assert copies.problems(seen, stacks, now=139, fault_ended=0) == []
    assert copies.problems(seen, stacks, now=141, fault_ended=120) == []  # a fault ended 21 s ago
    assert kinds(copies.problems(seen, stacks, now=141, fault_ended=0)) == ["double copy"]


def test_unavailability_is_the_longest_gap_of_a_stack_that_ran():
    availability, stacks = Availability(), stack()
    availability.update({"node1": [], "node2": []}, stacks, now=0)  # never ran yet: not down
    availability.update({"node1": listing(("box", "running")), "node2": []}, stacks, now=1)
    availability.update({"node1": None, "node2": []}, stacks, now=2)
    availability.update({"node1": listing(("box", "running")), "node2": []}, stacks, now=9.5)
    assert availability.longest == {"box": 7.5}


def test_a_users_file_changed_or_lost_is_found(tmp_path):
    files = UserFiles(tmp_path)
    files.write("u@x.org", "box", "data.bin", b"work")
    assert files.problems() == []
    path = tmp_path / "shared" / "user_data" / "u@x.org" / "box" / "data.bin"
    path.write_bytes(b"other")
    assert files.problems()[0][2] == "changed by the system"
    path.unlink()
    assert files.problems()[0][2].startswith("lost")


def test_a_seed_names_the_same_mix_of_steps():
    from support.soak_model import FAULTS, Chooser, Model

    def steps(seed):
        model, chooser = Model(), Chooser(seed)
        return [chooser.next(model) for _ in range(200)]

    assert steps(116) == steps(116)
    assert steps(116) != steps(117)
    assert set(FAULTS) <= {kind for kind, _ in steps(116)}  # a long run meets every fault
