"""
Orphans: managed containers whose STACK_NAME left pillar, removed under a guard.

A broken or emptied pillar looks exactly like containers that left it, and must never wipe a
node: ``refusal`` says when removing them must not happen now. Data is never touched.
"""

import ccc_engine
import ccc_node_record
import ccc_rules


def refusal(orphans, managed_count, max_share, force=False, pillar_errors=None):
    """
    Why removing ``orphans`` must not happen now, or ``None`` when it may.

    Never while pillar has render errors (``force`` does not override this: fix the pillar);
    and when more than one container would go and they are more than ``max_share`` of the
    node's ``managed_count`` managed containers, only with ``force`` (pillar
    ``ccc_force_orphans``). A ``max_share`` outside 0..1 refuses too.
    """
    if not orphans:
        return None
    if pillar_errors:
        return "pillar has render errors, so its list of containers cannot be trusted: " + "; ".join(
            str(error) for error in pillar_errors)[:1000]
    if not ccc_rules.is_number(max_share) or not 0 <= max_share <= 1:
        return f"ccc:cluster:orphans:max_share must be a number from 0 to 1, got {max_share!r}"
    if len(orphans) > 1 and len(orphans) > max_share * managed_count and not force:
        return (f"{len(orphans)} of the {managed_count} managed containers on this node would go, more than "
                f"max_share {max_share:g} of them; if pillar really dropped them, run again with "
                """pillar='{"ccc_force_orphans": true}'""")
    return None


def remove(client, known_stacks, test=False, max_share=0.5, force=False, pillar_errors=None):
    """
    Remove managed containers whose STACK_NAME is not in ``known_stacks`` (their swap leftovers
    too), unless ``refusal`` refuses. Returns ``{"orphans", "managed", "refused"}``
    (``refused``: the reason nothing was removed, else ``None``).
    """
    managed = ccc_node_record.managed_by_stack(client)
    orphans = sorted(stack for stack in managed if stack not in known_stacks)
    refused = refusal(orphans, len(managed), max_share, force, pillar_errors)
    if not test and refused is None:
        for summary in (summary for stack in orphans for summary in managed[stack]):
            attrs = ccc_engine.inspect(client, summary["Id"])
            if attrs is not None:
                ccc_engine.stop_and_remove(client, attrs)
    return {"orphans": orphans, "managed": len(managed), "refused": refused}
