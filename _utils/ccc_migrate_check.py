"""
Check the migrated pillar with ccc-salt's own rules before anything is written: each
container's admin record (``ccc_pillar.container_record``, the checks a deploy makes), the user
types' access classes and nodes, the networks they name. What fails goes to the report as
``refused``: the original accepted it, ccc-salt will hold that container until it is fixed.
"""

import ccc_pillar


def _check_types(ccc, nodes, report):
    cluster = ccc.get("cluster") or {}
    access_networks = cluster.get("access_networks") or {}
    for name, user_type in (ccc.get("user_types") or {}).items():
        source = f"deployment_types[{name}]"
        if user_type.get("access") not in access_networks:
            report.refused(source, "access", f"{user_type.get('access')!r} is no access class of compute_container_networks:"
                           " every container of this type is held (the original failed them too)")
        for key in ("default_nodes", "allowed_nodes"):
            unknown = [node for node in user_type.get(key) or [] if node not in nodes]
            if unknown:
                report.refused(source, key, f"not a node of the ccc-cluster group: {', '.join(map(str, unknown))}")


def _check_networks(ccc, report):
    cluster = ccc.get("cluster") or {}
    defined = set((cluster.get("networks") or {}).keys())
    if not defined:
        return
    named = {net for listed in (cluster.get("access_networks") or {}).values() for net in listed}
    named |= {cluster["claims_network"]} if cluster.get("claims_network") else set()
    for network in sorted(named - defined):
        report.refused("compute_container_networks", network, "not a network of docker_networks: ccc-salt cannot create it")


def check_containers(ccc, report, source=None):
    """A ``refused`` entry for each problem of each container's admin record (the checks a deploy
    makes); returns the STACK_NAMEs that have problems. ``source``: the file the records came
    from (the inventory pillar names it; the migration names the container instead)."""
    held, index = set(), ccc_pillar.entries_by_stack(ccc)
    for entry in ccc.get("containers") or []:
        stack = entry.get("STACK_NAME")
        _, problems = ccc_pillar.container_record(ccc, stack, index=index)
        for problem in problems:
            if source is None:
                report.refused(f"deployment_containers[{stack}]", "record", problem)
            else:
                report.refused(source, f"deployment_containers[{stack}]", problem)
        if problems:
            held.add(stack)
    return held


def check(ccc, nodes, report):
    """Add a ``refused`` entry for each problem ccc-salt finds in the migrated ``ccc`` pillar."""
    _check_types(ccc, nodes, report)
    _check_networks(ccc, report)
    check_containers(ccc, report)
