"""
States for ccc-salt compute containers, over the ``ccc_docker`` execution module: the module
does the work and returns facts (what it found, what it did or with ``test=True`` would do, what
failed and why); these states are the one place that words them as ``result``, ``changes`` and
``comment``, and they own test mode (``None`` where changes would be made).

.. code-block:: yaml

    ccc-containers-deploy:
      ccc_container.deployed:
        - stacks: [box1, box2]

    box1:
      ccc_container.running: []

    ccc-containers-orphans:
      ccc_container.orphans_absent: []

    ccc-containers-summary:
      ccc_container.summary:
        - order: last

``deployed`` plans and applies all its stacks at once (several at a time, see
``_utils/ccc_deploy.py``); each ``running`` state then reports its own container's outcome,
so every container keeps its own state ID, result, comment and changes. A ``running`` state
without a ``deployed`` one before it applies its container itself.
"""

from salt.exceptions import CommandExecutionError

import _ccc_state_ret as ccc_state_ret

__virtualname__ = "ccc_container"

OUTCOMES_KEY = "ccc_container.outcomes"
DEPLOYED_KEY = "ccc_container.deployed"


def __virtual__():
    if "ccc_docker.deploy" not in __salt__:
        return False, "ccc_docker is not available (needs the docker Python SDK)"
    return __virtualname__


def _test():
    return bool(__opts__["test"])


def _failed(name, exc):
    """A state that cannot act: one line saying why (no traceback)."""
    lines = str(exc).strip().splitlines()
    return ccc_state_ret.result(name, False, {}, lines[0] if lines else type(exc).__name__)


def _join(comment, notes):
    return "; ".join([comment, *notes])


def _said(facts, test):
    """What one container's apply did, or would do, in the words of the comment."""
    stack, reason, changes = facts["stack"], facts["reason"], facts["changes"]
    if facts["action"] == "failed":
        return facts["problem"]
    if facts["action"] == "keep":
        return f"{stack}: {'would be' if test else 'is'} {facts['done']}"
    if facts["action"] == "remove":
        if not changes:
            return f"{stack}: not on this node ({reason})"
        return f"{stack}: {'would be' if test else 'was'} {' and '.join(changes)} ({reason})"
    if test:
        return f"{stack}: would be {', '.join(changes) or 'left as it is'} ({reason})"
    return f"{stack}: {facts['done']} ({reason})"


def _reported(name, facts, test):
    """
    The state return of one container's facts (``ccc_docker.deploy``): failed when they name a
    problem, else ``None`` in test mode when anything would change; an interrupted recreate
    settled first is one of the changes.
    """
    changes, comment = dict(facts["changes"]), _join(_said(facts, test), facts["notes"])
    if facts["settled"]:
        changes["swap_settled"] = facts["settled"]
        comment += f"; {'would settle' if test else 'settled'} an interrupted recreate: {facts['settled']}"
    outcome = False if facts["problem"] else (None if test and changes else True)
    return ccc_state_ret.result(name, outcome, changes, comment)


def deployed(name, stacks=()):
    """
    Plan and apply every container of ``stacks`` on this node, ``ccc:node:create_parallelism``
    at a time where Docker has work (``ccc_deploy``). Reports nothing of its own: the ``running`` state of each container reports its
    outcome. Fails only when the containers could not be applied at all.
    """
    try:
        outcomes = __salt__["ccc_docker.deploy_many"](list(stacks), test=_test())
    except CommandExecutionError as exc:
        return _failed(name, exc)
    __context__[DEPLOYED_KEY] = outcomes
    failed = sum(1 for facts in outcomes.values() if facts["problem"])
    return ccc_state_ret.result(name, True, {}, f"{len(outcomes)} container(s) {'checked' if _test() else 'applied'}, "
                                                f"{failed} failed; each reports in its own state")


def running(name):
    """
    Deploy the container ``name`` (a STACK_NAME) as pillar and its user's settings say.

    On the nodes of its placement it runs with exactly the resolved spec (recreated only when
    the spec changed); on other nodes, or when DISABLED, it is removed from this node. Errors
    leave the container as it was and fail this state only.
    """
    facts = (__context__.get(DEPLOYED_KEY) or {}).pop(name, None)
    ret = None
    if facts is None:
        try:
            facts = __salt__["ccc_docker.deploy"](name, test=_test())
        except Exception as exc:  # noqa: BLE001 - counted in the summary, never lost in a traceback
            ret = ccc_state_ret.result(name, False, {}, f"{name}: {type(exc).__name__}: {exc}")
    ret = ret or _reported(name, facts, _test())
    __context__.setdefault(OUTCOMES_KEY, {})[name] = ret["result"]
    return ret


def absent(name):
    """
    Remove the ccc-salt container ``name`` from this node; user data is never touched.
    """
    test = _test()
    try:
        removed = __salt__["ccc_docker.remove"](name, test=test)["removed"]
    except CommandExecutionError as exc:
        return _failed(name, exc)
    if not removed:
        return ccc_state_ret.result(name, True, {}, f"{name} is not on this node")
    removed = ", ".join(removed)
    return ccc_state_ret.result(name, None if test else True, {"removed": removed},
                                f"{removed} {'would be' if test else 'was'} removed")


def orphans_absent(name, enabled=True):
    """
    Remove ccc-salt containers whose STACK_NAME is no longer in pillar (data is kept).

    Fails, removing nothing (test mode says so too), when the module's guard refuses: pillar
    render errors, or more than ``ccc:cluster:orphans:max_share`` of the node's containers
    without ``pillar='{"ccc_force_orphans": true}'``.
    """
    if not enabled:
        return ccc_state_ret.result(name, True, {}, "orphan removal is switched off")
    test = _test()
    try:
        outcome = __salt__["ccc_docker.remove_orphans"](test=test)
    except CommandExecutionError as exc:
        return _failed(name, exc)
    orphans = outcome["orphans"]
    if outcome["refused"]:
        return ccc_state_ret.result(name, False, {}, f"refusing to remove {len(orphans)} orphaned container(s) "
                                                     f"({', '.join(orphans)}): {outcome['refused']}")
    if not orphans:
        return ccc_state_ret.result(name, True, {}, "no orphaned containers")
    return ccc_state_ret.result(name, None if test else True, {"removed": orphans},
                                f"{'would remove' if test else 'removed'} {len(orphans)} orphaned container(s)")


def private_mounts_managed(name):
    """
    Bind-mount the live private data groups of the users with containers on this node, and
    unmount revoked ones; running containers see the change without being recreated.
    """
    test = _test()
    try:
        changes = __salt__["ccc_docker.private_mounts"](test=test)
    except (CommandExecutionError, OSError) as exc:
        return _failed(name, exc)
    refused = changes.pop("refused", [])
    comment = "private data mounts " + ("would change" if test else "changed") if changes else \
        "private data mounts are in place"
    if refused:
        # A user put a link (or a file) where a group's mount point belongs: that group is not
        # mounted for them; everything else is.
        return ccc_state_ret.result(name, False, changes,
                                    comment + "; refused (not a real folder): " + "; ".join(refused))
    return ccc_state_ret.result(name, None if test and changes else True, changes, comment)


def summary(name, selected=None, errors=None):
    """
    Report which containers of this run failed; fails when any did or when the selection had
    errors (for example an unknown name in ``containers=``).
    """
    outcomes = __context__.get(OUTCOMES_KEY, {})
    failed = sorted(stack for stack, result in outcomes.items() if result is False)
    problems = list(errors or [])
    lines = [f"{len(outcomes)} container(s) processed, {len(failed)} failed"]
    if failed:
        lines.append("failed: " + ", ".join(failed))
    lines.extend(problems)
    return ccc_state_ret.result(name, not failed and not problems, {}, "\n".join(lines))
