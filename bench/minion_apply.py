#!/usr/bin/env python3
"""Benchmark: the no-op `state.apply containers` of N containers as a lab runs it: through the
master and a running minion (bench/containers_apply.py times it through `salt-call --local`).

Uses the same cluster as tests/cluster (salt-master + 2 minions, a private dockerd per node,
shared storage), with ``--containers`` more containers placed on node1 (the start-up reconcile
deploys them). Once every one runs, times ``--repeat`` (default three) no-op applies each way,
the best of each:

    minion       publish -> return at the master (``salt/job/<jid>/new`` to ``.../ret/node1``):
                 the minion's job process, the pillar the master compiles for it (GPG included),
                 the SLS, the states, the return
    states       Salt's own total of the states in that return

    deploy_many  the same reconcile as the execution function ``ccc_docker.deploy_many`` alone
                 (publish -> return): the minion's pillar in memory, no SLS, no state engine

and two floors through the minion, the best of as many runs each: ``test.true`` (publish, the job
process, the return) and ``pillar.items`` (the same plus a fresh pillar compile on the master,
as every state run asks for). A resident minion has paid for Python's start, Salt's imports and
the grains once; ``salt-call --local`` pays them on every run.

    .venv/bin/python bench/minion_apply.py [--containers 50] [--repeat 3]

Smallest (the suite's smoke test): ``--containers 1 --repeat 1``, about 40 s with the cluster's
start-up.
"""

import pathlib
import sys
import time

import pytest

import _harness

REPO = pathlib.Path(__file__).resolve().parent.parent
SIZES = {"containers": (50, "containers placed on node1 besides the sample site's"),
         "repeat": (3, "runs of each job, the best one counted")}
COUNT = _harness.size(SIZES, "containers")
REPEAT = _harness.size(SIZES, "repeat")
IMAGE = "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1"
NODE = "node1"


def _stacks():
    return [f"apply-{index:03d}" for index in range(COUNT)]


@pytest.fixture(scope="package")
def extra_site():
    """The sample site's containers and COUNT more placed on node1, each with a user of its own."""
    sys.path.insert(0, str(REPO / "tests"))
    from support.site import sample_ccc

    containers, users = list(sample_ccc(NODE)["containers"]), {}
    for index, stack in enumerate(_stacks()):
        email = f"apply{index:03d}@example.org"
        users[email] = {"USER_NAME": f"apply{index:03d}", "USER_FULLNAME": f"Apply User {index}",
                        "USER_TYPE": "researcher"}
        containers.append({"STACK_NAME": stack, "USER_EMAIL": email, "CONTAINER_IMAGE": IMAGE,
                           "DEPLOYMENT_NODES": [NODE]})
    return {"users": users, "containers": containers}


def _wait(predicate, timeout):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout} s: {predicate.__doc__}")
        time.sleep(0.2)


def _quiet(master):
    """Until node1 runs no state job (the start-up reconcile, a redeploy the Docker beacon asked
    for) and the master holds no redeploy: a state job refuses to start beside another."""
    from cluster.conftest import redeploys_settled

    def idle():
        """node1 runs no state job and the master holds no redeploy"""
        running = master.salt_cli(timeout=60).run("saltutil.running", minion_tgt=NODE).data or []
        return redeploys_settled(master) and not [job for job in running if str(job.get("fun")).startswith("state.")]

    _wait(idle, timeout=300)


def _job(master, event_listener, fun, *args):
    """Run ``fun`` on node1 through the master: (publish -> return in s, the return)."""
    for _ in range(10):
        _quiet(master)
        before = time.time()
        result = master.salt_cli(timeout=600).run(fun, *args, minion_tgt=NODE)
        if "is running as PID" not in str(result.stdout):  # a job the reactor sent came first: wait it out
            break
    assert result.returncode == 0, result

    def publishes():
        """the listener has the job's publish event (the CLI may have its return sooner)"""
        return [event for event in event_listener.get_events([(master.id, "salt/job/*/new")], after_time=before)
                if event.data.get("fun") == fun and NODE in (event.data.get("minions") or [])]

    # Ours is the first such job published after ``before`` (a reactor's job that returns
    # meanwhile was published before it: ``_quiet``).
    _wait(publishes, timeout=30)
    published = min(publishes(), key=lambda event: event.stamp)
    tag = f"salt/job/{published.data['jid']}/ret/{NODE}"

    def returned():
        """the listener has the job's return (it reaches the CLI first)"""
        return event_listener.get_events([(master.id, tag)], after_time=before)

    _wait(returned, timeout=30)
    back = min(returned(), key=lambda event: event.stamp)
    return (back.stamp - published.stamp).total_seconds(), back.data.get("return")


def _states(returned):
    """Salt's own total of the states (ms -> s), that by state function, and whether any changed."""
    by_function, changed = {}, False
    for key, state in (returned or {}).items():
        if isinstance(state, dict):
            function = f"{key.split('_|-')[0]}.{key.split('_|-')[-1]}"
            by_function[function] = by_function.get(function, 0.0) + state.get("duration", 0.0) / 1000
            changed = changed or bool(state.get("changes"))
    return sum(by_function.values()), by_function, changed


def test_minion_apply(master, minions, dockerds, event_listener):
    from cluster.conftest import managed_stacks

    wanted = set(_stacks())

    def deployed():
        """every bench container runs on node1"""
        return wanted <= managed_stacks(dockerds[NODE])

    _wait(deployed, timeout=120 + 3 * COUNT)
    _job(master, event_listener, "state.apply", "containers")  # anything the start-up left, settled
    noop = []
    for _ in range(REPEAT):
        took, returned = _job(master, event_listener, "state.apply", "containers")
        states, by_function, changed = _states(returned)
        assert not changed, "a no-op apply changed something"
        noop.append((took, states, by_function))
    floors = {fun: min(_job(master, event_listener, fun)[0] for _ in range(REPEAT))
              for fun in ("test.true", "pillar.items")}
    direct = []
    for _ in range(REPEAT):
        took, returned = _job(master, event_listener, "ccc_docker.deploy_many")
        assert not [stack for stack, facts in (returned or {}).items() if facts.get("changes")], returned
        direct.append(took)
    took, states, by_function = min(noop, key=lambda run: run[0])
    print(f"\n{'N':>4} {'minion no-op':>13} {'states':>7} {'deploy_many':>12} {'test.true':>10} {'pillar.items':>13}")
    print(f"{COUNT:>4} {took:>12.2f}s {states:>6.2f}s {min(direct):>11.2f}s {floors['test.true']:>9.2f}s "
          f"{floors['pillar.items']:>12.2f}s")
    print("states by function: " + ", ".join(f"{function} {1000 * spent:.0f} ms" for function, spent
                                            in sorted(by_function.items(), key=lambda item: -item[1])))


if __name__ == "__main__":
    sys.exit(_harness.main(__file__, __doc__, SIZES))
