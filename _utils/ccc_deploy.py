"""
A run over many containers: read the shared inputs once, then plan and apply each selected
container, several at a time.

Why this shape: a first deploy is dominated by waits outside Python (Docker creating and
starting containers), so containers are applied concurrently by a bounded thread pool
(``ccc:node:create_parallelism``, default 4), each thread with its own Docker client. SSH host
keys of new stacks come from spare sets made in the background after the last deploy
(``ccc_hostkey_spares``) or from forked workers started before the threads
(``ccc_hostkey_maker``: RSA generation holds the GIL), and the engine's containers are
listed once, so a no-op apply asks Docker about each container once. Threads pay only where
Docker works: a container the list shows already running its wanted spec
(``ccc_apply.looks_settled``) is applied in the calling thread while the pool creates the
others, because checking one is CPU-bound work (2.6 ms of CPU in 2.9 ms) that four threads made
slower, not faster (a no-op of 50: 147 ms in one thread, 207-267 ms in four).
Planning stays one-way: ``ccc_plan.read_inputs`` once for the run, ``ccc_plan.plan`` once per
container (in the calling thread, before any apply: pure CPU), ``ccc_apply.apply`` once per
container; images are pulled once per run however many containers use them (``ccc_images``).
The state ``ccc_container.deployed`` runs this before the per-container
``ccc_container.running`` states, which only report each container's facts
(``ccc_apply.Applied``) from the state run's ``__context__`` (same state IDs, results, comments
and changes as when each container was applied by its own state). The node record is updated under its lock
(``ccc_node_record``), pin mounts are made one at a time (``ccc_apply``), and every stack's
swap touches only that stack's containers, so concurrency changes nothing a container sees.
"""

import concurrent.futures
import logging

import ccc_apply
import ccc_engine
import ccc_hostkey_maker
import ccc_hostkey_spares
import ccc_plan
import ccc_rules

log = logging.getLogger(__name__)


def parallelism(node):
    """``ccc:node:create_parallelism`` (``ccc_pillar.node_settings``): how many containers that
    Docker must create, start or stop a run applies at once; a whole number of at least 1."""
    value = node["create_parallelism"]
    if not ccc_rules.is_whole(value, 1):
        raise ValueError(f"ccc:node:create_parallelism must be a whole number of at least 1, got {value!r}")
    return value


def failed(stack, exc):
    """The facts of a container whose apply raised: it fails alone, with the reason."""
    return ccc_apply.Applied(stack, "failed", problem=f"{stack}: {type(exc).__name__}: {exc}")


def deploy(inputs, stacks, clients, test=False, workers=1):
    """
    Plan and apply ``stacks`` with the inputs read once (``ccc_plan.read_inputs``): those that
    need Docker's work in a pool, at most ``workers`` at a time, in any order; meanwhile those the
    engine's list shows running their wanted spec in the calling thread, one at a time (a check).
    ``clients()`` gives each thread its Docker client.
    Returns ``{STACK_NAME: ccc_apply.Applied}`` in the order of ``stacks``; one container's
    failure, whatever it is, never stops the others.
    """
    stacks = list(dict.fromkeys(stacks))
    existing = _existing(clients)
    planned = {stack: _attempt(stack, ccc_plan.plan, inputs, stack) for stack in stacks}
    outcomes = {stack: plan for stack, plan in planned.items() if isinstance(plan, ccc_apply.Applied)}  # failed
    todo = [stack for stack in stacks if stack not in outcomes]
    settled, busy = [], []  # a check here, or Docker's work in the pool
    for stack in todo:
        quick = existing is not None and ccc_apply.looks_settled(inputs.node, planned[stack], existing.get(stack))
        (settled if quick else busy).append(stack)
    with ccc_hostkey_maker.for_run(inputs.cluster, stacks, test) as make_keys:

        def one(stack):
            return ccc_apply.apply(clients(), inputs.cluster, inputs.node, planned[stack], test=test,
                                   existing=existing, make_keys=make_keys)

        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(workers, len(busy))),
                                                   thread_name_prefix="ccc-deploy") as pool:
            futures = {stack: pool.submit(one, stack) for stack in busy}
            for stack in settled:  # meanwhile, in this thread
                outcomes[stack] = _attempt(stack, one, stack)
            for stack, future in futures.items():
                outcomes[stack] = _attempt(stack, future.result)
    if not test:  # the threads are gone: keys for the next new stacks, in the background
        ccc_hostkey_spares.top_up_later(inputs.cluster, ccc_hostkey_spares.wanted_stacks(inputs.ccc))
    return {stack: outcomes[stack] for stack in stacks}


def _attempt(stack, step, *args):
    """``step(*args)``, or, whatever it raises, this container's failure alone as its outcome."""
    try:
        return step(*args)
    except Exception as exc:  # noqa: BLE001 - reported as this container's failure
        log.exception("applying %s failed", stack)
        return failed(stack, exc)


def _existing(clients):
    """The engine's containers by name now (one call for the run), or None when it does not
    answer: each container then asks, and reports the engine's failure itself."""
    try:
        return ccc_engine.listed(clients())
    except ccc_engine.ENGINE_ERRORS:
        return None
